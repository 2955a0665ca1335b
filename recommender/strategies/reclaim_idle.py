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
    scale_to_zero_max_requests: float = Field(
        default=0.0, ge=0, description="with request counters: an hour of day qualifies when its requests stay at "
                                       "or below this on every day of the evidence")
    warmup_seconds: dict[str, float] = Field(
        default_factory=dict, description="per workload ('<namespace>/<workload>'): warm-up lead time before "
                                          "traffic returns (model load), seconds; wins over the pod annotation")
    default_warmup_seconds: float = Field(default=600.0, ge=0, description="lead time without setting or annotation")


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
        """Never preempt serving: suggest a daily scale-to-zero window and/or fewer min replicas.

        With request counters the window comes from the requests (``_request_window``), else from GPU duty."""
        s = self.settings
        window_ev: dict[str, object] = {}
        if w.requests_hourly is not None:
            idle_hours, off_hours, days, window_ev = self._request_window(w)
        else:
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
            off_hours = float(len(idle_hours))
        run = trailing_idle_run(w.hourly, s.util_threshold, data.window_end)
        min_replicas = w.replicas
        if w.replicas > 1 and run.length_h >= s.window_hours.get("serving", 6.0):
            min_replicas = 1
        if not idle_hours and min_replicas == w.replicas:
            return None
        measured = [h for h in w.hourly if h.util_mean is not None]
        rate = gpu_cost_rate(w.hourly[-24:])
        zero_share = off_hours / 24.0  # only the hours really off: the warm-up runs on the GPUs
        kept = (1 - zero_share) * (min_replicas / w.replicas if w.replicas else 1.0)
        ev = window_evidence(measured)
        ev.update(idle_hours_of_day_utc=idle_hours, days_observed=days, trailing_idle_hours=run.length_h,
                  threshold=s.util_threshold, window_source="requests" if w.requests_hourly is not None else "gpu_duty",
                  off_hours_per_day=round(off_hours, 4))
        ev.update(window_ev)
        proposed: dict[str, object] = {"action": "scale_to_zero_window" if idle_hours else "set_min_replicas"}
        if idle_hours:
            proposed["scale_to_zero_utc_hours"] = idle_hours
            if "scale_up_at_utc" in window_ev:
                proposed["scale_up_at_utc"] = window_ev["scale_up_at_utc"]
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

    def _warmup(self, w: WorkloadGpuUsage) -> tuple[float, str]:
        """(lead time in seconds, where it came from): the setting, else the pods' annotation, else the default."""
        key = f"{w.namespace}/{w.workload}"
        if key in self.settings.warmup_seconds:
            return float(self.settings.warmup_seconds[key]), "setting"
        if w.warmup_seconds is not None:
            return float(w.warmup_seconds), "annotation"
        return float(self.settings.default_warmup_seconds), "default"

    def _request_window(self, w: WorkloadGpuUsage) -> tuple[list[int], float, int, dict[str, object]]:
        """The daily window from the request counters: (hours of day, hours really off per day, days, evidence).

        An hour of day qualifies when the counters measured it (samples while the workload held GPUs) on
        at least ``min_days_for_daily_pattern`` days and its requests were at most
        ``scale_to_zero_max_requests`` on every one of them; an hour without samples is unmeasured, never
        0 requests. Traffic returns in the first hour after the longest contiguous block of qualifying
        hours (one with requests above the threshold, or not measured: then the window ends early). Of the
        block, the hours before that minus the warm-up lead time are off; the window qualifies only when
        those are at least ``scale_to_zero_min_hours``."""
        s = self.settings
        assert w.requests_hourly is not None
        held = {h.hour for h in w.hourly if h.gpu_hours > 0}
        by_hod: dict[int, list[float]] = {}
        for hour, n in w.requests_hourly.items():
            if hour in held:
                by_hod.setdefault(hour.hour, []).append(n)
        days = len({hour.date() for hour in w.requests_hourly if hour in held})
        lead_s, lead_source = self._warmup(w)
        ev: dict[str, object] = {"request_threshold": s.scale_to_zero_max_requests, "request_days": days,
                                 "warmup_lead_seconds": lead_s, "warmup_source": lead_source}
        quiet = sorted(hod for hod, ns in by_hod.items()
                       if len(ns) >= s.min_days_for_daily_pattern and max(ns) <= s.scale_to_zero_max_requests)
        block = _longest_block(quiet)
        if not block:
            return [], 0.0, days, ev
        if len(block) == 24:  # no traffic on any day: nothing to warm up for
            ev.update(predicted_first_request_utc=None, requests_max_in_window=0.0)
            return block, 24.0, days, ev
        returns = (block[-1] + 1) % 24  # the first hour of day with requests above the threshold (or unmeasured)
        off = len(block) - lead_s / 3600.0
        up_min = int(round(block[0] * 60 + off * 60)) % (24 * 60)
        ev.update(predicted_first_request_utc=f"{returns:02d}:00",
                  scale_up_at_utc=f"{up_min // 60:02d}:{up_min % 60:02d}",
                  requests_max_in_window=max(n for h in block for n in by_hod[h]),
                  requests_at_return_max=max(by_hod[returns]) if returns in by_hod else None,
                  request_days_per_hour_min=min(len(by_hod[h]) for h in block))
        if off < s.scale_to_zero_min_hours:
            ev["rejected"] = (f"the warm-up lead time {lead_s:.0f} s leaves {max(off, 0):.2f} h off of the "
                              f"{len(block)} quiet hours; {s.scale_to_zero_min_hours} needed")
            return [], 0.0, days, ev
        return block, off, days, ev


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
