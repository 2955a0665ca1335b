"""Run one heavy query against a warehouse (cold, then warm) and print its timings as JSON."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bench.queries import HEAVY_QUERIES
from gpufinops.warehouse import connect


def main(warehouse: str, name: str) -> None:
    con = connect(Path(warehouse), read_only=True)
    sql = HEAVY_QUERIES[name]
    timings = []
    rows = 0
    for _ in range(3):
        t0 = time.perf_counter()
        rows = len(con.execute(sql).fetchall())
        timings.append(time.perf_counter() - t0)
    print(json.dumps({"query": name, "cold_s": round(timings[0], 3), "warm_s": round(min(timings[1:]), 3), "rows": rows}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
