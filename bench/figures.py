"""Headline figures of a built warehouse (the ones the README and issue notes quote).

``python -m bench.figures [HOME]`` prints total and GPU cost, idle-allocated %, unallocated %,
unmeasured GPU-hours and the conservation check's worst relative error per (cluster, hour).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpufinops.warehouse import connect

_SQL = {
    "node_cost_usd": "select sum(node_cost_usd) from fct_node_hourly",
    "gpu_cost_usd": "select sum(gpu_cost_usd) from fct_node_hourly",
    "pod_gpu_cost_usd": "select sum(gpu_cost_usd) from fct_gpu_allocation_hourly",
    "chargeback_usd": "select sum(chargeback_usd) from fct_showback_daily",
    "gpu_capacity_hours": "select sum(allocated_gpu_hours + unallocated_gpu_hours) from fct_node_hourly",
    "allocated_gpu_hours": "select sum(gpu_hours) from fct_gpu_allocation_hourly",
    "measured_gpu_hours": "select sum(measured_gpu_hours) from fct_gpu_allocation_hourly",
    "idle_gpu_hours": "select sum(idle_gpu_hours) from fct_gpu_allocation_hourly",
    "unallocated_gpu_hours": "select sum(unallocated_gpu_hours) from fct_node_hourly",
    "unallocated_cost_usd": "select sum(unallocated_cost_usd) from fct_node_hourly",
    # Conservation (DESIGN §3): Σ pod cost + Σ unallocated − Σ overcommit = Σ node cost per cluster-hour.
    "conservation_worst_rel_error": """
        with pods as (select cluster, hour, sum(total_cost_usd) as c from fct_gpu_allocation_hourly group by all),
             nodes as (select cluster, hour, sum(node_cost_usd) as n,
                              sum(unallocated_cost_usd) - sum(overcommit_cost_usd) as u
                       from fct_node_hourly group by all)
        select max(abs(coalesce(p.c, 0) + n.u - n.n) / greatest(n.n, 1e-9))
        from nodes n left join pods p using (cluster, hour) where n.n > 0
    """,
}


def figures(home: Path) -> dict[str, float]:
    con = connect(home / "warehouse.duckdb")
    out = {k: float(con.execute(q).fetchall()[0][0] or 0.0) for k, q in _SQL.items()}
    out["idle_allocated_pct"] = 100 * out["idle_gpu_hours"] / out["measured_gpu_hours"] if out["measured_gpu_hours"] else 0.0
    out["unallocated_gpu_hours_pct"] = 100 * out["unallocated_gpu_hours"] / out["gpu_capacity_hours"] if out["gpu_capacity_hours"] else 0.0
    out["unallocated_cost_pct"] = 100 * out["unallocated_cost_usd"] / out["node_cost_usd"] if out["node_cost_usd"] else 0.0
    out["unmeasured_gpu_hours_pct"] = 100 * (1 - out["measured_gpu_hours"] / out["allocated_gpu_hours"]) if out["allocated_gpu_hours"] else 0.0
    return out


if __name__ == "__main__":
    print(json.dumps(figures(Path(sys.argv[1] if len(sys.argv) > 1 else "var")), indent=2))
