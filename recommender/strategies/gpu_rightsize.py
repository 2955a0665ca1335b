"""GPU right-sizing: ``rightsize_gpu_count`` (idle devices of multi-GPU pods) and
``rightsize_to_mig`` / ``enable_time_slicing`` (single-GPU pods that use a sliver of their GPU)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from recommender.mig import has_mig, smallest_fitting_profile
from recommender.model import HOURS_PER_MONTH, Recommendation, RecommenderInput, WorkloadGpuUsage
from recommender.strategies._usage import gpu_cost_rate, window_evidence
from recommender.strategies.base import Strategy, StrategySettings, register

__all__ = ["GpuCountSettings", "RightsizeGpuCount", "FractionalSettings", "RightsizeFractional"]

_SKIP_TIERS = ("system",)


def _coverage_ok(w: WorkloadGpuUsage, min_coverage: float, min_hours: float) -> tuple[bool, dict[str, Any]]:
    ev = window_evidence([h for h in w.hourly if h.util_mean is not None])
    ok = float(ev["coverage"]) >= min_coverage and int(ev["window_hours"]) >= min_hours
    return ok, ev


class GpuCountSettings(StrategySettings):
    device_p95_threshold: float = Field(default=0.05, ge=0, le=1, description="a device with p95 under this is idle")
    min_hours: float = Field(default=6, ge=0)
    min_coverage: float = Field(default=0.5, ge=0, le=1)


@register
class RightsizeGpuCount(Strategy[GpuCountSettings]):
    name = "rightsize_gpu_count"
    kinds = ("rightsize_gpu_count",)
    settings_model = GpuCountSettings

    def plan(self, data: RecommenderInput) -> list[Recommendation]:
        s = self.settings
        out = []
        for w in data.gpu_usage:
            if w.tier in _SKIP_TIERS or w.gpus_per_pod < 2 or len(w.device_p95) < 2:
                continue
            busy = sum(1 for p in w.device_p95 if p >= s.device_p95_threshold)
            if busy == 0 or busy >= w.gpus_per_pod:
                continue  # all idle is reclaim_idle_gpu's finding; all busy is fine
            ok, ev = _coverage_ok(w, s.min_coverage, s.min_hours)
            if not ok:
                continue
            proposed = busy
            rate = gpu_cost_rate(w.hourly[-24:])
            saving = rate * HOURS_PER_MONTH * (w.gpus_per_pod - proposed) / w.gpus_per_pod
            ev.update(device_p95=[round(p, 4) for p in w.device_p95], device_p95_threshold=s.device_p95_threshold)
            out.append(Recommendation(
                kind="rightsize_gpu_count", cluster=w.cluster, namespace=w.namespace, workload=w.workload,
                tier=w.tier, current={"gpus_per_pod": w.gpus_per_pod, "replicas": w.replicas, "gpu_model": w.gpu_model},
                proposed={"gpus_per_pod": proposed, "resource": "nvidia.com/gpu"}, evidence=ev,
                est_monthly_savings_usd=saving, confidence=float(ev["coverage"]),
                risk="medium" if w.tier == "serving" else "low", created_at=data.now,
            ))
        return out


class FractionalSettings(StrategySettings):
    p95_threshold: float = Field(default=0.30, ge=0, le=1, description="p95 utilisation below this is 'low'")
    max_memory_share: float = Field(default=0.5, gt=0, le=1, description="peak memory at most this share of the device")
    memory_headroom: float = Field(default=0.20, ge=0, description="headroom over peak GPU memory")
    max_time_slicing_replicas: int = Field(default=4, ge=2)
    min_hours: float = Field(default=6, ge=0)
    min_coverage: float = Field(default=0.5, ge=0, le=1)


@register
class RightsizeFractional(Strategy[FractionalSettings]):
    """MIG where the GPU model has it (the smallest profile that fits peak memory with headroom and
    the p95 compute), time-slicing where it has not; savings from the GPU-equivalent change."""

    name = "rightsize_to_mig"
    kinds = ("rightsize_to_mig", "enable_time_slicing")
    settings_model = FractionalSettings

    def plan(self, data: RecommenderInput) -> list[Recommendation]:
        out = []
        for w in data.gpu_usage:
            rec = self._one(w, data)
            if rec is not None:
                out.append(rec)
        return out

    def _one(self, w: WorkloadGpuUsage, data: RecommenderInput) -> Recommendation | None:
        s = self.settings
        if (w.tier in _SKIP_TIERS or w.gpus_per_pod != 1 or w.util_p95 is None or w.util_p95 >= s.p95_threshold
                or not w.peak_fb_used_mib or not w.device_memory_mib):
            return None
        if w.peak_fb_used_mib > s.max_memory_share * w.device_memory_mib:
            return None
        ok, ev = _coverage_ok(w, s.min_coverage, s.min_hours)
        if not ok:
            return None
        ev.update(util_p95_window=round(w.util_p95, 4), peak_gpu_memory_mib=w.peak_fb_used_mib,
                  device_memory_mib=w.device_memory_mib, memory_headroom=s.memory_headroom)
        rate = gpu_cost_rate(w.hourly[-24:])
        per_gpu_rate = rate / max(w.gpu_equiv_per_pod * w.replicas, 1e-9)
        current = {"resource": "nvidia.com/gpu", "count": 1, "gpu_equiv": 1.0, "gpu_model": w.gpu_model,
                   "replicas": w.replicas}
        if has_mig(data.mig_profiles, w.gpu_family):
            prof = smallest_fitting_profile(data.mig_profiles, w.gpu_family, w.peak_fb_used_mib, headroom=s.memory_headroom,
                                            compute_p95=w.util_p95)
            if prof is None or prof.gpu_equiv >= 1.0:
                return None
            new_equiv, kind = prof.gpu_equiv, "rightsize_to_mig"
            proposed: dict[str, object] = {"resource": prof.resource, "count": 1, "mig_profile": prof.profile,
                                           "gpu_equiv": round(new_equiv, 4)}
        else:
            need = max(w.util_p95, w.peak_fb_used_mib * (1 + s.memory_headroom) / w.device_memory_mib)
            replicas = min(s.max_time_slicing_replicas, int(math.floor(1.0 / max(need, 1e-9))))
            if replicas < 2:
                return None
            new_equiv, kind = 1.0 / replicas, "enable_time_slicing"
            proposed = {"resource": "nvidia.com/gpu", "count": 1, "time_slicing_replicas": replicas,
                        "gpu_equiv": round(new_equiv, 4)}
        saving = (1.0 - new_equiv) * per_gpu_rate * w.replicas * HOURS_PER_MONTH
        return Recommendation(
            kind=kind, cluster=w.cluster, namespace=w.namespace, workload=w.workload, tier=w.tier,
            current=current, proposed=proposed, evidence=ev, est_monthly_savings_usd=saving,
            confidence=float(ev["coverage"]) * 0.9,
            risk="medium", created_at=data.now,
        )
