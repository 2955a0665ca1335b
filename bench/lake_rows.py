"""Row counts of a lake's big landing tables and their hourly rollups, from the Parquet footers.

    python -m bench.lake_rows <lake>    # prints {table: rows} as JSON

A child process of ``make bench`` (a Linux child starts from its parent's peak RSS, so the bench
process itself stays small)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb

TABLES = ("k8s_pods", "k8s_nodes", "gpu_samples", "container_usage", "serving_requests",
          "gpu_samples_hourly", "container_usage_hourly", "serving_requests_hourly", "k8s_pods_last",
          "k8s_nodes_last", "k8s_pod_runs", "k8s_pod_snapshots", "k8s_node_snapshots")


def lake_rows(lake: Path) -> dict[str, int]:
    out = {}
    for table in TABLES:
        if (lake / table).is_dir():
            files = str(lake / table / "cluster=*" / "day=*" / "*.parquet")
            out[table] = int(duckdb.sql(f"select coalesce(sum(num_rows), 0) from parquet_file_metadata('{files}')").fetchall()[0][0])
    return out


if __name__ == "__main__":
    print(json.dumps(lake_rows(Path(sys.argv[1]))))
