"""The fleet's own inputs from the warehouse marts (never the lake): nodes from ``dim_node``, pod
shapes seen in a window from ``fct_gpu_allocation_hourly`` (GPU-equivalents, CPU and memory
requests, allowed GPU models), and the $/GPU-hour from
``fct_node_hourly``."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from gpufinops.errors import NotFound
from gpufinops.warehouse import connect
from simulator.inputs import MILLI, Inventory, Workload

__all__ = ["load_fleet", "gpu_hour_rate"]


def _row(con: Any, sql: str, params: list[Any]) -> tuple[Any, ...]:
    row = con.execute(sql, params).fetchone()
    assert row is not None  # an aggregate always returns one row
    return tuple(row)


def load_fleet(path: Path | str, cluster: str, window: timedelta) -> tuple[Inventory, Workload]:
    con = connect(path, read_only=True)
    try:
        end = _row(con, "select max(hour) from fct_node_hourly where cluster = ?", [cluster])[0]
        if end is None:
            raise NotFound(f"cluster {cluster!r} has no nodes in the warehouse")
        start = end - window
        nodes = con.execute(
            "select node, coalesce(gpu_model, ''), coalesce(gpu_capacity, 0), coalesce(cpu_capacity, 0), "
            "coalesce(memory_capacity_gib, 0), coalesce(node_pool, '') from dim_node "
            "where cluster = ? and last_hour >= ? order by node", [cluster, start]).fetchall()
        # the pod's allowed GPU models ('|'-separated); a warehouse built before the column: any model
        cols = {r[0] for r in con.execute("select column_name from information_schema.columns "
                                          "where table_name = 'fct_gpu_allocation_hourly'").fetchall()}
        constraint = "coalesce(gpu_model_constraint, '')" if "gpu_model_constraint" in cols else "''"
        pods = con.execute(
            "select pod, arg_max(gpu_equiv, hour), arg_max(cpu_request, hour), arg_max(memory_request_gib, hour), "
            f"arg_max({constraint}, hour) "
            "from fct_gpu_allocation_hourly where cluster = ? and hour > ? and hour <= ? and gpu_equiv > 0 "
            "group by pod order by pod", [cluster, start, end]).fetchall()
    finally:
        con.close()
    if not nodes:
        raise NotFound(f"cluster {cluster!r} has no nodes seen in the window")
    inv = Inventory([r[0] for r in nodes], np.array([int(round(r[3] * MILLI)) for r in nodes], np.int64),
                    np.array([int(round(r[4] * 1024)) for r in nodes], np.int64),
                    np.array([int(r[2]) for r in nodes], np.int64), [r[1] if r[2] else "" for r in nodes],
                    [r[5] for r in nodes])
    ng, gm = [], []
    for _, e, _c, _m, _g in pods:
        e = float(e)
        if e >= 1 - 1e-9:
            ng.append(int(round(e)))
            gm.append(MILLI)
        else:
            ng.append(1)
            gm.append(max(1, int(round(e * MILLI))))
    work = Workload([r[0] for r in pods], np.array([int(round(float(r[2] or 0) * MILLI)) for r in pods], np.int64),
                    np.array([int(round(float(r[3] or 0) * 1024)) for r in pods], np.int64),
                    np.array(ng, np.int64), np.array(gm, np.int64), [str(r[4] or "") for r in pods])
    return inv, work


def gpu_hour_rate(path: Path | str, cluster: str, window: timedelta) -> float:
    """The fleet's GPU price in $/GPU-hour over the window: GPU cost over GPU capacity-hours."""
    con = connect(path, read_only=True)
    try:
        end = _row(con, "select max(hour) from fct_node_hourly where cluster = ?", [cluster])[0]
        if end is None:
            raise NotFound(f"cluster {cluster!r} has no nodes in the warehouse")
        row = _row(con, "select sum(gpu_cost_usd), sum(coalesce(gpu_capacity, 0) * covered_hours) "
                   "from fct_node_hourly where cluster = ? and hour > ?", [cluster, end - window])
    finally:
        con.close()
    cost, hours = float(row[0] or 0), float(row[1] or 0)
    return cost / hours if hours > 0 else 0.0
