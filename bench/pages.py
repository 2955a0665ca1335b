"""How long each page's queries take, uncached, on a dbt-built warehouse: ``python -m bench.pages --home DIR``.

For ``make bench``: ``time_pages(path, shared_namespaces)`` returns {page: median milliseconds} for the
full set of read-model queries a page runs on first load (the cache is cold), with the widest scope.
The warehouse is one ``gpufinops build`` made (the bench fleet, or ``gpufinops demo`` + ``build``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import duckdb
import pandas as pd

from gpufinops.views.queries import RAW
from gpufinops.views.scope import Scope
from gpufinops.warehouse import connect

__all__ = ["page_workloads", "time_pages", "time_pages_detail"]

Step = Callable[[duckdb.DuckDBPyConnection], object]


def page_workloads(con: duckdb.DuckDBPyConnection, shared: tuple[str, ...]) -> dict[str, list[Step]]:
    """Each page's queries as run on first load (30-day window; the team page for the biggest team)."""
    every = Scope.everything()
    cur = con.cursor()
    cur.execute("set TimeZone = 'UTC'")
    last = pd.Timestamp(RAW["data_window"](cur, every).iloc[0]["last_day"]).date()
    end, start = last + timedelta(days=1), last - timedelta(days=29)
    week = last - timedelta(days=6)
    month = last.replace(day=1)
    spend = RAW["spend_by_team_daily"](cur, every, start, end, shared)
    team = spend.groupby("team")["chargeback_usd"].sum().idxmax() if not spend.empty else "unassigned"
    lead = Scope.of_teams([team])
    cur.close()
    q = RAW
    return {
        "home": [lambda c: q["data_window"](c, every), lambda c: q["team_totals"](c, every, week, end),
                 lambda c: q["stranded_gpus"](c, every)],
        "finance": [lambda c: q["data_window"](c, every),
                    lambda c: q["cost_lines_daily"](c, every, min(start, month), end, shared),
                    lambda c: q["spend_by_team_daily"](c, every, min(start, month), end, shared),
                    lambda c: q["bill_reconciliation"](c, every, start, end)],
        "team": [lambda c: q["teams"](c, lead), lambda c: q["data_window"](c, lead),
                 lambda c: q["team_totals"](c, lead, start, end), lambda c: q["team_daily"](c, lead, start, end),
                 lambda c: q["idle_workloads"](c, lead, start, end, 10), lambda c: q["team_namespaces"](c, lead)],
        "platform": [lambda c: q["data_window"](c, every), lambda c: q["capacity_hourly"](c, every, start, end),
                     lambda c: q["node_allocation"](c, every), lambda c: q["stranded_gpus"](c, every),
                     lambda c: q["pending_gpu_pods"](c, every, start, end)],
    }


def time_pages(warehouse: Path | str, shared: tuple[str, ...], repeats: int = 5) -> dict[str, float]:
    """{page: median wall milliseconds} of ``repeats`` runs of all its queries."""
    return {page: t["median_ms"] for page, t in time_pages_detail(warehouse, shared, repeats).items()}


def time_pages_detail(warehouse: Path | str, shared: tuple[str, ...], repeats: int = 5) -> dict[str, dict[str, float]]:
    """{page: {median_ms, min_ms, cpu_ms}}: wall median and minimum, and the median CPU time of this
    process (DuckDB's threads included), which other load on the machine disturbs less than the wall."""
    con = connect(warehouse)
    try:
        workloads = page_workloads(con, shared)
        result = {}
        for page, steps in workloads.items():
            runs, cpus = [], []
            for _ in range(repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                for step in steps:
                    cur = con.cursor()  # a cursor per query, as the pages do
                    cur.execute("set TimeZone = 'UTC'")
                    step(cur)
                    cur.close()
                runs.append((time.perf_counter() - t0) * 1000)
                cpus.append((time.process_time() - c0) * 1000)
            result[page] = {"median_ms": statistics.median(runs), "min_ms": min(runs), "cpu_ms": statistics.median(cpus)}
        return result
    finally:
        con.close()


def _main() -> None:
    from gpufinops.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    settings = load_settings(home=args.home)
    detail = time_pages_detail(settings.warehouse_path, tuple(settings.cost.shared_namespaces), args.repeats)
    for page, t in detail.items():
        print(f"{page:<9} {t['median_ms']:8.1f} ms  (all of the page's queries, uncached, median of {args.repeats}; "
              f"min {t['min_ms']:.1f} ms, CPU {t['cpu_ms']:.1f} ms)")


if __name__ == "__main__":
    _main()
