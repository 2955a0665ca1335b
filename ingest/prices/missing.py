"""Instance types seen on nodes in the lake that no price source covers (DuckDB over Parquet)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from ingest.lake import partition_files

__all__ = ["MissingPrice", "missing_instance_types"]


@dataclass(frozen=True)
class MissingPrice:
    provider: str
    region: str
    instance_type: str
    capacity_type: str
    nodes: int
    first_seen: datetime
    last_seen: datetime

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.region}/{self.instance_type}/{self.capacity_type}"


def missing_instance_types(lake_dir: Path | str) -> list[MissingPrice]:
    """(provider, region, instance_type, capacity_type) on nodes with no ``prices`` row at all.

    A node without a capacity type counts as ``on_demand`` (what it is billed as by default);
    nodes without an instance type cannot be priced by type and are left to the data-quality report.
    """
    nodes = partition_files(lake_dir, "k8s_nodes")
    if not nodes:
        return []
    prices = partition_files(lake_dir, "prices")
    con = duckdb.connect()
    try:
        con.execute("create temp table seen as select coalesce(provider, 'unknown') as provider, "
                    "coalesce(region, '') as region, instance_type, coalesce(capacity_type, 'on_demand') as capacity_type, "
                    "count(distinct node) as nodes, min(snapshot_ts) as first_seen, max(snapshot_ts) as last_seen "
                    "from read_parquet(?, union_by_name=true, hive_partitioning=false) where instance_type is not null and instance_type <> '' "
                    "group by all", [[str(p) for p in nodes]])
        if prices:
            con.execute("create temp table priced as select distinct provider, region, instance_type, capacity_type "
                        "from read_parquet(?, union_by_name=true, hive_partitioning=false)", [[str(p) for p in prices]])
        else:
            con.execute("create temp table priced (provider varchar, region varchar, instance_type varchar, capacity_type varchar)")
        rows = con.execute(
            "select s.* from seen s anti join priced p using (provider, region, instance_type, capacity_type) "
            "order by provider, region, instance_type, capacity_type").fetchall()
    finally:
        con.close()
    return [MissingPrice(*row) for row in rows]
