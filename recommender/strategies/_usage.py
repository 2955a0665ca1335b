"""Window arithmetic shared by the GPU strategies (private)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from recommender.model import HourUsage

__all__ = ["IdleRun", "trailing_idle_run", "gpu_cost_rate", "window_evidence"]


@dataclass(frozen=True)
class IdleRun:
    hours: tuple[HourUsage, ...]

    @property
    def length_h(self) -> int:
        return len(self.hours)


def trailing_idle_run(hourly: Sequence[HourUsage], threshold: float, window_end: datetime,
                      max_staleness_h: float = 2.0) -> IdleRun:
    """The run of consecutive idle hours that ends at the workload's latest hour, provided that
    hour is recent (it still holds GPUs). An unmeasured hour ends the run: it is never read as 0%."""
    hours = sorted(hourly, key=lambda h: h.hour)
    if not hours or hours[-1].hour < window_end - timedelta(hours=max_staleness_h + 1):
        return IdleRun(())
    run: list[HourUsage] = []
    prev: datetime | None = None
    for h in reversed(hours):
        if h.util_mean is None or h.util_mean >= threshold:
            break
        if prev is not None and prev - h.hour > timedelta(hours=1):
            break  # a gap: the workload was not there, so the run is not sustained
        run.append(h)
        prev = h.hour
    return IdleRun(tuple(reversed(run)))


def gpu_cost_rate(hours: Sequence[HourUsage]) -> float:
    """GPU cost per hour over the given hours (the run rate a change would save)."""
    return sum(h.gpu_cost_usd for h in hours) / len(hours) if hours else 0.0


def window_evidence(hours: Sequence[HourUsage]) -> dict[str, Any]:
    """Mean (sample-weighted) and p95 (max of the hourly p95s: a conservative bound) utilisation,
    GPU memory used, sample count and coverage (samples / one sample per GPU-minute)."""
    samples = sum(h.samples for h in hours)
    measured = [h for h in hours if h.util_mean is not None and h.samples > 0]
    mean = sum(float(h.util_mean or 0.0) * h.samples for h in measured) / samples if samples else None
    p95 = max((h.util_p95 for h in measured if h.util_p95 is not None), default=None)
    fb = max((h.fb_used_max_mib for h in hours if h.fb_used_max_mib is not None), default=None)
    expected = sum(60.0 * h.gpu_hours for h in hours)
    return {
        "window_start": hours[0].hour.isoformat() if hours else None,
        "window_end": (hours[-1].hour + timedelta(hours=1)).isoformat() if hours else None,
        "window_hours": len(hours),
        "util_mean": None if mean is None else round(mean, 4),
        "util_p95": None if p95 is None else round(p95, 4),
        "gpu_memory_used_max_mib": fb,
        "samples": samples,
        "coverage": round(min(1.0, samples / expected), 3) if expected > 0 else 0.0,
        "gpu_hours": round(sum(h.gpu_hours for h in hours), 3),
    }
