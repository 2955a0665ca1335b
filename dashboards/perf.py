"""How long each page's queries take, uncached, on a warehouse: ``python -m dashboards.perf --home DIR``.

For ``make bench``: ``time_pages(path, shared_namespaces)`` returns {page: median milliseconds} for the
full set of warehouse queries a page runs on first load (the cache is cold), with the widest scope.
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

from dashboards.identity import Scope
from dashboards.queries import RAW
from gpufinops.warehouse import connect

__all__ = ["page_workloads", "time_pages", "build_synthetic"]

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
    con = connect(warehouse)
    try:
        workloads = page_workloads(con, shared)
        result = {}
        for page, steps in workloads.items():
            runs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for step in steps:
                    cur = con.cursor()  # a cursor per query, as the pages do
                    cur.execute("set TimeZone = 'UTC'")
                    step(cur)
                    cur.close()
                runs.append((time.perf_counter() - t0) * 1000)
            result[page] = statistics.median(runs)
        return result
    finally:
        con.close()


def build_synthetic(path: Path, nodes: int = 1000, days: int = 30, pods_per_node: int = 6, teams: int = 40) -> None:
    """A contract-shaped warehouse of ``nodes`` 8-GPU nodes, ``days`` hours of pods, for sizing the
    dashboards' queries before the real bench warehouse exists (numbers are arbitrary, shapes are not)."""
    con = duckdb.connect(str(path))
    try:
        con.execute("set TimeZone = 'UTC'")
        con.execute(f"""
        create or replace table hours as
          select h::timestamptz as hour from generate_series(timestamptz '2026-10-01 00:00:00+00',
                 timestamptz '2026-10-01 00:00:00+00' + interval {days} day - interval 1 hour, interval 1 hour) g(h);
        create or replace table fct_node_hourly as
          select hour, 'c' || (n % 4) as cluster, 'node-' || n as node, 'pool-' || (n % 5) as node_pool,
                 'p4d.24xlarge' as instance_type, 'on_demand' as capacity_type, 'A100-80GB' as gpu_model,
                 8.0 as gpu_capacity, 32.0 as node_cost_usd, 28.8 as gpu_cost_usd,
                 6.0 as allocated_gpu_hours, 2.0 as unallocated_gpu_hours, 7.2 as unallocated_cost_usd,
                 0.0 as overcommit_cost_usd, 2.0 as utilized_gpu_hours
          from hours, range({nodes}) r(n) order by hour;
        create or replace table fct_gpu_allocation_hourly as
          select hour, 'c' || (n % 4) as cluster, 'node-' || n as node, 'ns-' || ((n * 7 + p) % {teams * 3}) as namespace,
                 'team-' || (((n * 7 + p) % {teams * 3}) % {teams}) as team, 'tenant-' || (((n * 7 + p) % {teams * 3}) % 8) as tenant,
                 'training' as tier, 'Job' as workload_kind, 'wl-' || ((n * 7 + p) % 5000) as workload,
                 'pod-' || n || '-' || p as pod, 'A100-80GB' as gpu_model, 'nvidia.com/gpu' as gpu_resource,
                 1.0 as gpu_hours, 0.3 as utilized_gpu_hours, 0.7 as idle_gpu_hours, 1.0 as measured_gpu_hours,
                 3.6 as gpu_cost_usd, 2.52 as idle_cost_usd, 0.5 as cpu_cost_usd, 0.3 as memory_cost_usd,
                 4.4 as total_cost_usd, false as is_shared_namespace
          from hours, range({nodes}) r(n), range({pods_per_node}) q(p) order by hour;
        create or replace table fct_workload_daily as
          select hour::date as day, cluster, tenant, team, namespace, workload_kind, workload, tier, gpu_model,
                 gpu_resource, sum(gpu_hours) as gpu_hours, sum(utilized_gpu_hours) as utilized_gpu_hours,
                 sum(idle_gpu_hours) as idle_gpu_hours, sum(measured_gpu_hours) as measured_gpu_hours,
                 sum(gpu_hours - measured_gpu_hours) as unmeasured_gpu_hours, sum(gpu_cost_usd) as gpu_cost_usd,
                 sum(idle_cost_usd) as idle_cost_usd, sum(cpu_cost_usd) as cpu_cost_usd,
                 sum(memory_cost_usd) as memory_cost_usd, sum(total_cost_usd) as total_cost_usd
          from fct_gpu_allocation_hourly group by all order by day;
        create or replace table fct_showback_daily as
          select hour::date as day, cluster, tenant, team, namespace, sum(gpu_hours) as gpu_hours,
                 sum(utilized_gpu_hours) as utilized_gpu_hours, sum(idle_gpu_hours) as idle_gpu_hours,
                 sum(measured_gpu_hours) as measured_gpu_hours, 0.7 as idle_allocated_pct,
                 sum(total_cost_usd) as direct_cost_usd, sum(idle_cost_usd) as idle_cost_usd, 0.0 as shared_cost_usd,
                 0.0 as unallocated_share_usd, sum(total_cost_usd) as chargeback_usd
          from fct_gpu_allocation_hourly group by all order by day;
        create or replace table fct_cluster_capacity_hourly as
          select hour, cluster, sum(gpu_capacity) as gpu_capacity, sum(allocated_gpu_hours) as gpu_allocated,
                 sum(unallocated_gpu_hours) as gpu_unallocated, 10.0 as fragmentation_gpus, 0.05 as fragmentation_rate,
                 count(*) as nodes_in_use, (count(*) * 0.8)::int as nodes_lower_bound, 5 as pending_gpu_pods
          from fct_node_hourly group by all order by hour;
        create or replace table fct_bill_reconciliation_daily as
          select day, 'aws' as provider, 'i-' || cluster as resource_id, 1.0 as computed_cost_usd, 1.0 as billed_cost_usd,
                 1.0 as effective_cost_usd, 0.0 as difference_usd, 'matched' as status
          from (select distinct day, cluster from fct_showback_daily);
        drop table hours;
        """)
    finally:
        con.close()


def _main() -> None:
    from gpufinops.settings import load_settings

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--synthetic-nodes", type=int, default=0,
                        help="First build a synthetic warehouse of this many nodes (30 days) under --home.")
    args = parser.parse_args()
    settings = load_settings(home=args.home)
    if args.synthetic_nodes:
        settings.home.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        build_synthetic(settings.warehouse_path, nodes=args.synthetic_nodes)
        print(f"synthetic warehouse of {args.synthetic_nodes} nodes built in {time.perf_counter() - t0:.1f} s")
    for page, ms in time_pages(settings.warehouse_path, tuple(settings.cost.shared_namespaces), args.repeats).items():
        print(f"{page:<9} {ms:8.1f} ms  (all of the page's queries, uncached, median of {args.repeats})")


if __name__ == "__main__":
    _main()
