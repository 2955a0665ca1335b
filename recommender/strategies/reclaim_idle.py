"""``reclaim_idle_gpu`` and, for serving, ``scale_to_zero_window``: GPUs held while idle.

Gated by tier: serving is never preempted (it gets a scale-to-zero window or a min-replica
suggestion); training is stopped only when checkpointed, otherwise its owner is flagged;
interactive notebooks are stopped after their own (shorter) idle window; batch is reclaimed.
"""

from __future__ import annotations

from pydantic import Field

from recommender.model import HOURS_PER_MONTH, Recommendation, RecommenderInput, WorkloadGpuUsage
from recommender.strategies._usage import gpu_cost_rate, trailing_idle_run, window_evidence
from recommender.strategies.base import Strategy, StrategySettings, register

__all__ = ["ReclaimIdleSettings", "ReclaimIdleGpu"]


class ReclaimIdleSettings(StrategySettings):
    util_threshold: float = Field(default=0.05, ge=0, le=1, description="hourly mean utilisation below this is idle")
    window_hours: dict[str, float] = Field(
        default_factory=lambda: {"batch": 6.0, "training": 6.0, "serving": 6.0, "interactive": 2.0},
        description="sustained idle window per tier (interactive: the N idle hours before a notebook stops)",
    )
    scale_to_zero_min_hours: int = Field(default=4, ge=1, description="idle hours of day needed for a serving window")
    min_days_for_daily_pattern: int = Field(default=2, ge=1, description="days an hour of day must be seen idle")


_ACTIONS = {
    "batch": ("reclaim", "low"),
    "interactive": ("stop_notebook", "low"),
}


@register
class ReclaimIdleGpu(Strategy[ReclaimIdleSettings]):
    name = "reclaim_idle_gpu"
    kinds = ("reclaim_idle_gpu", "scale_to_zero_window")
    settings_model = ReclaimIdleSettings

    def plan(self, data: RecommenderInput) -> list[Recommendation]:
        out: list[Recommendation] = []
        for w in data.gpu_usage:
            if w.tier == "serving":
                rec = self._serving(w, data)
            elif w.tier in ("training", "batch", "interactive"):
                rec = self._reclaim(w, data)
            else:
                rec = None  # system and unknown tiers are never touched
            if rec is not None:
                out.append(rec)
        return out

    def _reclaim(self, w: WorkloadGpuUsage, data: RecommenderInput) -> Recommendation | None:
        s = self.settings
        window = s.window_hours.get(w.tier, 6.0)
        run = trailing_idle_run(w.hourly, s.util_threshold, data.window_end)
        if run.length_h < window:
            return None
        rate = gpu_cost_rate(run.hours)
        ev = window_evidence(run.hours)
        ev.update(threshold=s.util_threshold, required_window_hours=window)
        if w.tier == "training":
            action, risk = ("stop", "low") if w.checkpointed else ("flag_owner", "medium")
            ev["checkpointed"] = w.checkpointed
        else:
            action, risk = _ACTIONS[w.tier]
        confidence = float(ev["coverage"]) * min(1.0, 0.5 + run.length_h / (4.0 * window))
        if action == "flag_owner":
            confidence *= 0.6  # we cannot stop it safely; the owner decides
        return Recommendation(
            kind="reclaim_idle_gpu", cluster=w.cluster, namespace=w.namespace, workload=w.workload, tier=w.tier,
            current={"replicas": w.replicas, "gpu_equiv_per_pod": w.gpu_equiv_per_pod, "gpu_model": w.gpu_model,
                     "gpu_resource": w.gpu_resource, "workload_kind": w.workload_kind},
            proposed={"action": action, "release_gpus": round(w.replicas * w.gpu_equiv_per_pod, 3)},
            evidence=ev, est_monthly_savings_usd=rate * HOURS_PER_MONTH, confidence=confidence, risk=risk,
            created_at=data.now,
        )

    def _serving(self, w: WorkloadGpuUsage, data: RecommenderInput) -> Recommendation | None:
        """Never preempt serving: suggest a daily scale-to-zero window and/or fewer min replicas."""
        s = self.settings
        by_hour: dict[int, list[float]] = {}
        for h in w.hourly:
            if h.util_mean is not None:
                by_hour.setdefault(h.hour.hour, []).append(h.util_mean)
        days = max((len(v) for v in by_hour.values()), default=0)
        idle_hours = sorted(hod for hod, us in by_hour.items()
                            if len(us) >= s.min_days_for_daily_pattern and max(us) < s.util_threshold)
        idle_hours = _longest_block(idle_hours)  # one contiguous daily window (a cron scaler needs one)
        if len(idle_hours) < s.scale_to_zero_min_hours:
            idle_hours = []
        run = trailing_idle_run(w.hourly, s.util_threshold, data.window_end)
        min_replicas = w.replicas
        if w.replicas > 1 and run.length_h >= s.window_hours.get("serving", 6.0):
            min_replicas = 1
        if not idle_hours and min_replicas == w.replicas:
            return None
        measured = [h for h in w.hourly if h.util_mean is not None]
        rate = gpu_cost_rate(w.hourly[-24:])
        zero_share = len(idle_hours) / 24.0
        kept = (1 - zero_share) * (min_replicas / w.replicas if w.replicas else 1.0)
        ev = window_evidence(measured)
        ev.update(idle_hours_of_day_utc=idle_hours, days_observed=days, trailing_idle_hours=run.length_h,
                  threshold=s.util_threshold)
        proposed: dict[str, object] = {"action": "scale_to_zero_window" if idle_hours else "set_min_replicas"}
        if idle_hours:
            proposed["scale_to_zero_utc_hours"] = idle_hours
        if min_replicas != w.replicas:
            proposed["min_replicas"] = min_replicas
        confidence = float(ev["coverage"]) * min(1.0, days / 7.0 + 0.3)
        return Recommendation(
            kind="scale_to_zero_window", cluster=w.cluster, namespace=w.namespace, workload=w.workload,
            tier=w.tier,
            current={"replicas": w.replicas, "gpu_equiv_per_pod": w.gpu_equiv_per_pod, "gpu_model": w.gpu_model},
            proposed=proposed, evidence=ev, est_monthly_savings_usd=rate * HOURS_PER_MONTH * (1 - kept),
            confidence=confidence, risk="medium", created_at=data.now,
        )


def _longest_block(hours: list[int]) -> list[int]:
    """The longest run of consecutive hours of day, wrapping past midnight, in window order."""
    hs = set(hours)
    if len(hs) == 24:
        return list(range(24))
    best: list[int] = []
    for h in sorted(hs):
        if (h - 1) % 24 in hs:
            continue  # not the start of a run
        run = [h]
        while (run[-1] + 1) % 24 in hs:
            run.append((run[-1] + 1) % 24)
        if len(run) > len(best):
            best = run
    return best
