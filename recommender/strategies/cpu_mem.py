"""``rightsize_cpu_mem``: VPA-style requests from decaying usage histograms.

Target = p90 × (1 + margin); bounds = p50 / p95 × (1 + margin), widened while history is short
(VPA's confidence: min(days of history, samples / samples-per-day)); floors 25 mCPU and 250 MiB;
memory is OOM-aware: a container that reached its limit never gets less than peak × bump.
The ``proposed`` dict is the ``rightsizing`` object of the cost API.
"""

from __future__ import annotations

from pydantic import Field

from recommender.histogram import CPU_SPEC, MEMORY_SPEC, DecayingHistogram
from recommender.model import HOURS_PER_MONTH, ContainerUsage, Recommendation, RecommenderInput
from recommender.strategies.base import Strategy, StrategySettings, register

__all__ = ["CpuMemSettings", "RightsizeCpuMem", "rightsize_container"]

_GIB = 1024.0**3
_MIB = 1024.0**2


class CpuMemSettings(StrategySettings):
    half_life_hours: float = Field(default=24.0, gt=0)
    target_percentile: float = Field(default=0.90, gt=0, le=1)
    lower_percentile: float = Field(default=0.50, gt=0, le=1)
    upper_percentile: float = Field(default=0.95, gt=0, le=1)
    safety_margin: float = Field(default=0.15, ge=0)
    min_cpu_cores: float = Field(default=0.025, ge=0)
    min_memory_bytes: float = Field(250 * _MIB, ge=0)
    oom_limit_share: float = Field(default=0.95, gt=0, le=1, description="working set ≥ this share of the limit = OOM risk")
    oom_bump: float = Field(default=1.2, ge=1)
    min_relative_change: float = Field(default=0.10, ge=0, description="smaller changes are not worth a restart")
    samples_per_day: float = Field(default=1440.0, gt=0)
    skip_tiers: list[str] = Field(default_factory=lambda: ["system"])


def rightsize_container(c: ContainerUsage, s: CpuMemSettings) -> dict[str, dict[str, float]]:
    """Target and bounds for one container; pure."""
    cpu = DecayingHistogram.from_buckets(CPU_SPEC, c.cpu_buckets)
    mem = DecayingHistogram.from_buckets(MEMORY_SPEC, c.memory_buckets)
    days = max((c.last_sample - c.first_sample).total_seconds() / 86400.0, 1e-6)
    confidence = max(min(days, c.samples / s.samples_per_day), 1e-6)
    lower_scale = (1 + 0.001 / confidence) ** -2
    upper_scale = 1 + 1 / confidence
    m = 1 + s.safety_margin

    def bounds(h: DecayingHistogram, floor: float) -> dict[str, float]:
        target = max(h.percentile(s.target_percentile) * m, floor)
        lower = max(min(h.percentile(s.lower_percentile) * m * lower_scale, target), floor)
        upper = max(h.percentile(s.upper_percentile) * m * upper_scale, target)
        return {"target": target, "lower_bound": lower, "upper_bound": upper}

    out = {"cpu": bounds(cpu, s.min_cpu_cores), "memory": bounds(mem, s.min_memory_bytes)}
    oom_risk = bool(c.memory_limit and c.memory_peak >= s.oom_limit_share * c.memory_limit)
    if oom_risk:
        bumped = c.memory_peak * s.oom_bump
        out["memory"] = {k: max(v, bumped) for k, v in out["memory"].items()}
    out["meta"] = {"confidence_days": round(confidence, 3), "oom_risk": float(oom_risk)}
    return out


@register
class RightsizeCpuMem(Strategy[CpuMemSettings]):
    name = "rightsize_cpu_mem"
    kinds = ("rightsize_cpu_mem",)
    settings_model = CpuMemSettings

    def plan(self, data: RecommenderInput) -> list[Recommendation]:
        s = self.settings
        out = []
        for c in data.container_usage:
            if c.tier in s.skip_tiers or c.samples == 0:
                continue
            r = rightsize_container(c, s)
            cpu_t, mem_t = r["cpu"]["target"], r["memory"]["target"]
            changes = [_rel(c.cpu_request, cpu_t), _rel(c.memory_request, mem_t)]
            if max(changes) < s.min_relative_change:
                continue
            saving = 0.0
            if c.cpu_request:
                saving += (c.cpu_request - cpu_t) * c.cpu_cost_usd_per_core_hour
            if c.memory_request:
                saving += (c.memory_request - mem_t) / _GIB * c.memory_cost_usd_per_gib_hour
            saving *= HOURS_PER_MONTH * c.replicas
            conf_days = r["meta"]["confidence_days"]
            out.append(Recommendation(
                kind="rightsize_cpu_mem", cluster=c.cluster, namespace=c.namespace, workload=c.workload,
                tier=c.tier, id_extra=(c.container,),
                current={"container": c.container, "cpu_request": c.cpu_request, "memory_request": c.memory_request,
                         "memory_limit": c.memory_limit, "replicas": c.replicas},
                proposed={"container": c.container,
                          "cpu": {k: round(v, 4) for k, v in r["cpu"].items()},
                          "memory": {k: round(v) for k, v in r["memory"].items()}},
                evidence={"samples": c.samples, "window_start": c.first_sample.isoformat(),
                          "window_end": c.last_sample.isoformat(), "half_life_hours": s.half_life_hours,
                          "memory_peak_bytes": c.memory_peak, "oom_risk": bool(r["meta"]["oom_risk"]),
                          "confidence_days": conf_days},
                # Saving may be negative: an under-requested container costs more once it asks for what it uses.
                est_monthly_savings_usd=saving, confidence=min(1.0, conf_days / 7.0),
                risk="medium" if r["meta"]["oom_risk"] or (c.memory_request or 0) > mem_t else "low",
                created_at=data.now,
            ))
        return out

    def run(self, data: RecommenderInput) -> list[Recommendation]:
        # Increases are kept even when they cost money: they prevent throttling and OOM kills.
        if not self.settings.enabled:
            return []
        floor = self.settings.min_monthly_savings_usd
        return [r for r in self.plan(data) if abs(r.est_monthly_savings_usd) >= floor or r.evidence["oom_risk"]]


def _rel(current: float | None, target: float) -> float:
    if not current:
        return 1.0
    return abs(current - target) / current
