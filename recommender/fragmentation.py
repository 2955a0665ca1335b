"""GPU fragmentation (Weng et al., "Beware of Fragmentation", USENIX ATC '23), DESIGN §3.

Pure numpy and importable without side effects (a dbt-duckdb Python model may call it)::

    F_n(m) = Σ_g R_{n,g}                    if m cannot run on n, or m needs no GPU
           = Σ_g R_{n,g} · [R_{n,g} < d_m]  otherwise
    F_n(M) = Σ_m p_m F_n(m);   F = Σ_n F_n(M);   rate = F / Σ_n Σ_g R_{n,g}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "TaskShape",
    "node_fragmentation",
    "fragmentation_report",
    "task_distribution",
    "device_free_fractions",
    "place_fractions",
]

_EPS = 1e-9


@dataclass(frozen=True)
class TaskShape:
    """A task: ``cpu`` cores, ``gpus`` devices of ``per_gpu`` each (1 = whole, <1 = a share of one),
    and the GPU models it may use (None = any)."""

    cpu: float
    gpus: int
    per_gpu: float
    models: frozenset[str] | None = None

    @property
    def needs_gpu(self) -> bool:
        return self.gpus > 0 and self.per_gpu > 0


def node_fragmentation(free: np.ndarray, free_cpu: np.ndarray, models: Sequence[str | None],
                       shapes: Sequence[TaskShape], probs: Sequence[float]) -> np.ndarray:
    """F_n(M) in GPUs for each node.

    ``free``: nodes × devices free fraction of each GPU, NaN where a node has fewer devices;
    ``free_cpu``: free cores per node; ``models``: GPU model per node.
    """
    r = np.nan_to_num(np.asarray(free, dtype=float), nan=0.0)
    r = np.clip(r, 0.0, 1.0)
    free_cpu = np.asarray(free_cpu, dtype=float)
    total = r.sum(axis=1)
    out = np.zeros(r.shape[0])
    model_arr = np.array([m or "" for m in models], dtype=object)
    for shape, p in zip(shapes, probs, strict=True):
        if p == 0:
            continue
        if not shape.needs_gpu:
            out += p * total
            continue
        fits_dev = r >= shape.per_gpu - _EPS
        can_run = (fits_dev.sum(axis=1) >= shape.gpus) & (free_cpu >= shape.cpu - _EPS)
        if shape.models is not None:
            can_run &= np.isin(model_arr, list(shape.models))
        stranded = np.where(fits_dev, 0.0, r).sum(axis=1)
        out += p * np.where(can_run, stranded, total)
    return out


def task_distribution(shapes: Iterable[TaskShape], cutoff: float = 0.95) -> tuple[list[TaskShape], list[float]]:
    """Distinct shapes by popularity, truncated at ``cutoff`` cumulative share, renormalised."""
    counts = Counter(shapes)
    if not counts:
        return [], []
    total = sum(counts.values())
    kept: list[tuple[TaskShape, int]] = []
    acc = 0
    for shape, n in sorted(counts.items(), key=lambda kv: (-kv[1], repr(kv[0]))):
        kept.append((shape, n))
        acc += n
        if acc / total >= cutoff - 1e-12:
            break
    s = sum(n for _, n in kept)
    return [k for k, _ in kept], [n / s for _, n in kept]


def place_fractions(free: np.ndarray, fractions: Sequence[float]) -> None:
    """Best-fit decreasing of fractional requests onto devices, in place. A request that fits
    nowhere (an over-allocated node, flagged by the warehouse) is charged to the freest device."""
    for f in sorted(fractions, reverse=True):
        ok = np.where(free >= f - _EPS)[0]
        g = ok[np.argmin(free[ok])] if ok.size else int(np.argmax(free))
        free[g] = max(0.0, free[g] - f)


def device_free_fractions(n_devices: int, whole: int, fractions: Sequence[float]) -> np.ndarray:
    """Free fraction per device when device assignment is unknown: whole GPUs first, then the
    fractional requests best-fit onto devices in descending size (DESIGN §3)."""
    free = np.ones(n_devices)
    free[: min(whole, n_devices)] = 0.0
    place_fractions(free, fractions)
    return free


def fragmentation_report(free: np.ndarray, free_cpu: np.ndarray, models: Sequence[str | None],
                         capacity_gpus: float, shapes: Sequence[TaskShape], probs: Sequence[float]) -> dict[str, Any]:
    """Per-node F and the cluster figures: F in GPUs, the rate, and F as a share of capacity."""
    per_node = node_fragmentation(free, free_cpu, models, shapes, probs)
    free_total = float(np.nan_to_num(np.asarray(free, float), nan=0.0).clip(0, 1).sum())
    f = float(per_node.sum())
    return {
        "per_node_gpus": per_node,
        "fragmentation_gpus": f,
        "free_gpus": free_total,
        "fragmentation_rate": f / free_total if free_total > 0 else 0.0,
        "fragmentation_share_of_capacity": f / capacity_gpus if capacity_gpus > 0 else 0.0,
    }
