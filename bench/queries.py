"""The heaviest questions the dashboards and API ask of the marts, timed by ``make bench``."""

from __future__ import annotations

__all__ = ["HEAVY_QUERIES"]

HEAVY_QUERIES: dict[str, str] = {
    # Finance: 30-day chargeback per tenant and team.
    "showback_by_team_30d": """
        select tenant, team, sum(gpu_hours) as gpu_hours, sum(chargeback_usd) as chargeback_usd,
               sum(idle_gpu_hours) / nullif(sum(gpu_hours), 0) as idle_share
        from fct_showback_daily group by all order by chargeback_usd desc
    """,
    # Team lead / recommender: the most idle workloads over the whole window, from the hourly fact.
    "top_idle_workloads_30d": """
        select cluster, namespace, workload, sum(gpu_hours) as gpu_hours,
               sum(idle_gpu_hours) / nullif(sum(measured_gpu_hours), 0) as idle_allocated_pct,
               sum(idle_cost_usd) as idle_cost_usd
        from fct_gpu_allocation_hourly where gpu_hours > 0
        group by all order by idle_cost_usd desc limit 50
    """,
    # The OpenCost question: per-namespace allocated / utilised GPU-hours and idle % over 7 days.
    "namespace_gpu_hours_7d": """
        select namespace, sum(gpu_hours) as allocated_gpu_hours, sum(utilized_gpu_hours) as utilized_gpu_hours,
               sum(idle_gpu_hours) / nullif(sum(measured_gpu_hours), 0) as idle_pct
        from fct_gpu_allocation_hourly
        where hour >= (select max(hour) from fct_gpu_allocation_hourly) - interval 7 day
        group by all order by allocated_gpu_hours desc
    """,
    # Platform: capacity vs allocated vs utilised per hour, fleet-wide.
    "capacity_trend_hourly": """
        select hour, sum(gpu_capacity) as capacity, sum(allocated_gpu_hours) as allocated,
               sum(utilized_gpu_hours) as utilized, sum(node_cost_usd) as cost
        from fct_node_hourly group by hour order by hour
    """,
}
