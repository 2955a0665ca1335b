"""A short showback summary of the built warehouse (what `gpufinops build` prints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpufinops.warehouse import connect

__all__ = ["ShowbackSummary", "TenantLine", "showback_summary"]


@dataclass(frozen=True)
class TenantLine:
    tenant: str
    gpu_hours: float
    chargeback_usd: float
    idle_allocated_pct: float | None


@dataclass
class ShowbackSummary:
    first_day: str | None
    last_day: str | None
    clusters: int
    node_cost_usd: float
    gpu_cost_usd: float
    chargeback_usd: float
    gpu_capacity_hours: float
    allocated_gpu_hours: float
    measured_gpu_hours: float
    idle_gpu_hours: float
    unmeasured_gpu_hours: float
    unallocated_gpu_hours: float
    unpriced_nodes: int
    top_tenants: list[TenantLine] = field(default_factory=list)

    @property
    def idle_allocated_pct(self) -> float | None:
        return 100.0 * self.idle_gpu_hours / self.measured_gpu_hours if self.measured_gpu_hours > 0 else None

    @property
    def unallocated_pct(self) -> float | None:
        return 100.0 * self.unallocated_gpu_hours / self.gpu_capacity_hours if self.gpu_capacity_hours > 0 else None


def showback_summary(warehouse: Path | str, *, top: int = 5) -> ShowbackSummary:
    con = connect(warehouse, read_only=True)
    try:
        (first, last, clusters, node_cost, gpu_cost, cap_h, unalloc_h) = con.execute(
            "select cast(min(hour) as date)::varchar, cast(max(hour) as date)::varchar, count(distinct cluster), "
            "coalesce(sum(node_cost_usd), 0), coalesce(sum(gpu_cost_usd), 0), "
            "coalesce(sum(coalesce(gpu_capacity, 0) * covered_hours), 0), coalesce(sum(unallocated_gpu_hours), 0) "
            "from fct_node_hourly"
        ).fetchall()[0]
        (alloc_h, measured_h, idle_h, unmeasured_h) = con.execute(
            "select coalesce(sum(gpu_hours), 0), coalesce(sum(measured_gpu_hours), 0), "
            "coalesce(sum(idle_gpu_hours), 0), coalesce(sum(unmeasured_gpu_hours), 0) from fct_gpu_allocation_hourly"
        ).fetchall()[0]
        (chargeback,) = con.execute("select coalesce(sum(chargeback_usd), 0) from fct_showback_daily").fetchall()[0]
        (unpriced,) = con.execute("select count(*) from dq_unpriced_nodes").fetchall()[0]
        tenants = con.execute(
            "select tenant, sum(gpu_hours), sum(chargeback_usd), "
            "sum(idle_gpu_hours) / nullif(sum(measured_gpu_hours), 0) "
            "from fct_showback_daily where namespace not in ('(unallocated)', '(overhead)') "
            "group by tenant order by 3 desc limit ?",
            [top],
        ).fetchall()
    finally:
        con.close()
    return ShowbackSummary(
        first_day=first, last_day=last, clusters=int(clusters), node_cost_usd=float(node_cost),
        gpu_cost_usd=float(gpu_cost), chargeback_usd=float(chargeback), gpu_capacity_hours=float(cap_h),
        allocated_gpu_hours=float(alloc_h), measured_gpu_hours=float(measured_h), idle_gpu_hours=float(idle_h),
        unmeasured_gpu_hours=float(unmeasured_h), unallocated_gpu_hours=float(unalloc_h), unpriced_nodes=int(unpriced),
        top_tenants=[TenantLine(t, float(g or 0), float(c or 0), None if p is None else 100.0 * float(p)) for t, g, c, p in tenants],
    )
