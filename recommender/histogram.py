"""VPA-style decaying histogram: exponential buckets, sample weights that double every half-life.

Bucket ``i`` covers ``[first·ratio^i, first·ratio^(i+1))``. The warehouse counts samples per hour into
these buckets (``fct_container_usage_hourly``, macro ``vpa_bucket`` with the vars that must equal
:data:`CPU_SPEC` / :data:`MEMORY_SPEC`; a test checks); the loader decays the hourly counts with
:func:`decay_sql` (the same weight as :func:`decay_weight`) so no per-minute sample leaves DuckDB.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

__all__ = ["HistogramSpec", "DecayingHistogram", "CPU_SPEC", "MEMORY_SPEC", "decay_weight", "decay_sql"]


@dataclass(frozen=True)
class HistogramSpec:
    first_bucket: float  # upper edge of bucket 0
    ratio: float = 1.05
    max_value: float = 1e15

    def bucket_of(self, value: float | np.ndarray) -> np.ndarray:
        v = np.maximum(np.asarray(value, dtype=float), self.first_bucket)
        return np.floor(np.log(v / self.first_bucket) / math.log(self.ratio)).astype(int)

    def bucket_start(self, index: int) -> float:
        return 0.0 if index <= 0 else self.first_bucket * self.ratio**index

    def bucket_end(self, index: int) -> float:
        return self.first_bucket * self.ratio ** (index + 1)


CPU_SPEC = HistogramSpec(first_bucket=0.01)  # cores (VPA: 0.01 cores, ×1.05)
MEMORY_SPEC = HistogramSpec(first_bucket=1e7)  # bytes (VPA: 10 MB, ×1.05)


def decay_weight(ts_seconds: np.ndarray | float, reference_s: float, half_life_s: float) -> np.ndarray:
    """2^((t − reference)/half_life): a sample one half-life older counts half."""
    return np.power(2.0, (np.asarray(ts_seconds, dtype=float) - reference_s) / half_life_s)


def decay_sql(epoch_seconds_sql: str, reference_s: float, half_life_s: float) -> str:
    """:func:`decay_weight` as a DuckDB expression over a column of epoch seconds."""
    return f"pow(2.0, (({epoch_seconds_sql}) - {float(reference_s)!r}) / {float(half_life_s)!r})"


@dataclass
class DecayingHistogram:
    spec: HistogramSpec
    weights: dict[int, float] = field(default_factory=dict)

    @classmethod
    def from_buckets(cls, spec: HistogramSpec, buckets: Mapping[int, float]) -> DecayingHistogram:
        return cls(spec, {int(k): float(v) for k, v in buckets.items() if v > 0})

    def add(self, values: np.ndarray, times: list[datetime] | np.ndarray, *, reference: datetime,
            half_life_s: float = 24 * 3600.0) -> None:
        ts = np.array([t.timestamp() for t in times], dtype=float) if isinstance(times, list) else np.asarray(times, float)
        w = decay_weight(ts, reference.timestamp(), half_life_s)
        idx = self.spec.bucket_of(values)
        for i, wt in zip(*_sum_by(idx, w), strict=True):
            self.weights[i] = self.weights.get(i, 0.0) + wt

    @property
    def total_weight(self) -> float:
        return float(sum(self.weights.values()))

    def percentile(self, q: float) -> float:
        """VPA's rule: the end of the first bucket whose cumulative weight reaches q of the total."""
        total = self.total_weight
        if total <= 0:
            return 0.0
        acc = 0.0
        for i in sorted(self.weights):
            acc += self.weights[i]
            if acc >= q * total - 1e-12:
                return self.spec.bucket_end(i)
        return self.spec.bucket_end(max(self.weights))


def _sum_by(idx: np.ndarray, w: np.ndarray) -> tuple[list[int], list[float]]:
    uniq, inv = np.unique(idx, return_inverse=True)
    sums = np.bincount(inv, weights=w)
    return [int(u) for u in uniq], [float(s) for s in sums]
