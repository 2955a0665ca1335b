"""The one capacity module: FGD fragmentation and the bin-packing lower bound (DESIGN §3).

Pure numpy (the pattern-LP bound imports OR-Tools' GLOP when called), no side effects on import: the capacity mart (a dbt Python model), the recommender's
packer and fragmentation view, and the placement simulator all call it, so the product's
fragmentation is the one the simulator validates against the FGD authors' results.

Fragmentation (Weng et al., "Beware of Fragmentation", USENIX ATC '23), following the authors'
simulator (``NodeGpuShareFragAmount``): a node has free fractions R_g per device (1 = a whole
device) and free CPU; a target workload M is a distribution of task shapes m = (CPU c, k devices
of d each, allowed GPU models) with probabilities p_m::

    F_n(m) = Σ_g R_g                 if m needs no GPU (the authors' XL/XR cases: every free GPU
                                     is stranded for a CPU-only task),
                                     or m may not use n's model, or n lacks CPU for m,
                                     or fewer than k devices have R_g >= d
           = Σ_g R_g · [R_g < d]     otherwise
    F_n(M) = Σ_m p_m F_n(m);  F = Σ_n F_n(M)

A shape's allowed models are a set (openb's ``V100M16|V100M32``; ``None`` = any model); a node
without a GPU model cannot host a shape that names one.

The evaluation is split in two so the simulator can update it per node incrementally:
:func:`device_stats` turns free fractions into per-threshold counts and sums, and
:meth:`FragModel.from_stats` applies the formula to them. :func:`node_fragmentation` chains both.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "TaskShape",
    "FragModel",
    "parse_gpu_models",
    "device_stats",
    "node_fragmentation",
    "fragmentation_report",
    "task_distribution",
    "place_fractions",
    "device_free_fractions",
    "pool_lower_bound",
    "device_lower_bound",
    "pattern_lp_bound",
    "mixed_pool_lower_bound",
]

EPS = 1e-9


def parse_gpu_models(constraint: str | Iterable[str] | None) -> frozenset[str] | None:
    """A GPU-model constraint as a set: ``"V100M16|V100M32"`` (the authors' form, also what a
    required node affinity ``In`` list on ``nvidia.com/gpu.product`` means), an iterable of
    models, or a single model. Empty or None = any model."""
    if constraint is None:
        return None
    items = constraint.split("|") if isinstance(constraint, str) else list(constraint)
    models = frozenset(m.strip() for m in items if m and m.strip())
    return models or None


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


def task_distribution(shapes: Iterable[TaskShape], cutoff: float = 0.95) -> tuple[list[TaskShape], list[float]]:
    """Distinct shapes by popularity, the most popular first, taken one at a time until their
    cumulative share reaches ``cutoff`` (the authors' popularity threshold, 95 %), renormalised.
    Ties in count are broken by the larger shape first (CPU, per-device share, device count)."""
    counts = Counter(shapes)
    if not counts:
        return [], []
    total = sum(counts.values())

    def order(kv: tuple[TaskShape, int]) -> tuple:
        s, n = kv
        return (-n, -s.cpu, -s.per_gpu, -s.gpus, "|".join(sorted(s.models or ())))

    kept: list[tuple[TaskShape, int]] = []
    acc = 0
    for shape, n in sorted(counts.items(), key=order):
        if acc >= cutoff * total - 1e-9:
            break
        kept.append((shape, n))
        acc += n
    s = sum(n for _, n in kept)
    return [k for k, _ in kept], [n / s for _, n in kept]


class FragModel:
    """A target workload compiled for vectorised evaluation over many nodes.

    ``thresholds`` are the distinct per-device demands d of the GPU shapes; every shape points at
    one of them, so a node's devices need summarising only once per threshold."""

    def __init__(self, shapes: Sequence[TaskShape], probs: Sequence[float], model_names: Sequence[str]):
        self.shapes = list(shapes)
        p = np.asarray(list(probs), dtype=float)
        if len(self.shapes) != p.size:
            raise ValueError(f"{len(self.shapes)} task shapes but {p.size} probabilities")
        self.model_names = list(model_names)
        gpu = [s for s in self.shapes if s.needs_gpu]
        self.p_cpu_only = float(sum(pi for s, pi in zip(self.shapes, p, strict=True) if not s.needs_gpu))
        self.thresholds = np.array(sorted({round(float(s.per_gpu), 9) for s in gpu}), dtype=float)
        idx = {t: j for j, t in enumerate(self.thresholds.tolist())}
        self.p = np.array([pi for s, pi in zip(self.shapes, p, strict=True) if s.needs_gpu], dtype=float)
        self.cpu = np.array([s.cpu for s in gpu], dtype=float)
        self.k = np.array([s.gpus for s in gpu], dtype=float)
        self.j = np.array([idx[round(float(s.per_gpu), 9)] for s in gpu], dtype=np.int64)
        # access[model index, shape]: the node's model is allowed; the last row is "no model"
        n_models = len(self.model_names)
        self.access = np.ones((n_models + 1, len(gpu)), dtype=bool)
        for c, s in enumerate(gpu):
            if s.models is not None:
                self.access[:n_models, c] = [m in s.models for m in self.model_names]
                self.access[n_models, c] = False

    def model_index(self, models: Sequence[str | None]) -> np.ndarray:
        pos = {m: i for i, m in enumerate(self.model_names)}
        none = len(self.model_names)
        return np.array([pos.get(m or "", none) if m else none for m in models], dtype=np.int64)

    def from_stats(self, cnt_ge: np.ndarray, sum_lt: np.ndarray, total: np.ndarray, free_cpu: np.ndarray,
                   model_idx: np.ndarray) -> np.ndarray:
        """F_n(M) for each row: ``cnt_ge``/``sum_lt`` (rows × thresholds) from :func:`device_stats`,
        ``total`` = Σ_g R_g, ``free_cpu`` in cores, ``model_idx`` from :meth:`model_index`."""
        total = np.asarray(total, dtype=float)
        out = self.p_cpu_only * total
        if self.p.size == 0:
            return out
        hosts = (cnt_ge[:, self.j] >= self.k - EPS) & (np.asarray(free_cpu, float)[:, None] >= self.cpu - EPS)
        hosts &= self.access[model_idx]
        per_shape = np.where(hosts, sum_lt[:, self.j], total[:, None])
        return out + per_shape @ self.p


def device_stats(free: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the count of devices with R >= d and the sum of R over devices with R < d for each
    threshold d, and the total free. NaN entries (no such device) count as absent."""
    r = np.clip(np.nan_to_num(np.asarray(free, dtype=float), nan=0.0), 0.0, None)
    present = ~np.isnan(np.asarray(free, dtype=float))
    t = np.asarray(thresholds, dtype=float)[None, None, :]
    ge = (r[:, :, None] >= t - EPS) & present[:, :, None]
    cnt_ge = ge.sum(axis=1).astype(float)
    sum_lt = np.where(ge, 0.0, r[:, :, None]).sum(axis=1)
    return cnt_ge, sum_lt, r.sum(axis=1)


def node_fragmentation(free: np.ndarray, free_cpu: np.ndarray, models: Sequence[str | None],
                       shapes: Sequence[TaskShape], probs: Sequence[float]) -> np.ndarray:
    """F_n(M) in GPUs for each node.

    ``free``: nodes × devices free fraction of each GPU, NaN where a node has fewer devices;
    ``free_cpu``: free cores per node; ``models``: GPU model per node.
    """
    free = np.clip(np.asarray(free, dtype=float), None, 1.0)
    names = sorted({m for m in models if m})
    fm = FragModel(shapes, probs, names)
    cnt_ge, sum_lt, total = device_stats(free, fm.thresholds)
    return fm.from_stats(cnt_ge, sum_lt, total, np.asarray(free_cpu, dtype=float), fm.model_index(models))


def place_fractions(free: np.ndarray, fractions: Sequence[float]) -> None:
    """Best-fit decreasing of fractional requests onto devices, in place. A request that fits
    nowhere (an over-allocated node, flagged by the warehouse) is charged to the freest device."""
    for f in sorted(fractions, reverse=True):
        ok = np.where(free >= f - EPS)[0]
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


def pool_lower_bound(demand: Sequence[float], shape: Sequence[float]) -> int:
    """Bin-packing lower bound of one node pool: max over resources of ⌈Σ demand / capacity⌉,
    the capacity being the pool's largest node per resource (valid for mixed pools). Resources
    with no capacity or no demand are skipped; an empty pool needs no node."""
    bound = 0
    for total, cap in zip(demand, shape, strict=True):
        if cap > 0 and total > 0:
            bound = max(bound, int(math.ceil(total / cap - EPS)))
    return bound


def device_lower_bound(whole: float, shares: Sequence[float], *, pattern_lp: bool = False) -> int:
    """Fewest GPU devices that hold ``whole`` whole GPUs and the fractional ``shares`` (each on one
    device): whole + the largest over α of :func:`_shares_bound_at` (Martello–Toth's L2 bound;
    α = 0 is one device per share above ½ plus what the rest need beyond the room those leave),
    and with ``pattern_lp`` the tighter of that and :func:`pattern_lp_bound`."""
    s = np.asarray(list(shares), dtype=float)
    alphas = np.unique(np.concatenate(([0.0], s[s <= 0.5 + EPS])))
    bound = max(_shares_bound_at(s, float(a)) for a in alphas)
    if pattern_lp and s.size:
        bound = max(bound, pattern_lp_bound(s))
    return int(math.ceil(whole - EPS)) + bound


_MILLI = 1000  # device capacity in the pattern LP's integer units


def pattern_lp_bound(shares: Sequence[float] | np.ndarray, max_rounds: int = 300) -> int:
    """Devices the fractional ``shares`` need, from the Gilmore–Gomory pattern LP (a pattern =
    shares that fit on one device together; minimise devices so that every share is covered),
    solved by column generation with OR-Tools' GLOP. Valid after any number of rounds: with
    duals π ≥ 0 and v = the best pattern's Σπ, π / max(v, 1) is dual-feasible, so
    Σ count·π / max(v, 1) ≤ LP ≤ the fewest devices (Farley's bound). A share's size is
    rounded down to 1/1000 for the pattern search, which only admits more patterns."""
    from ortools.linear_solver import pywraplp

    w_all = np.floor(np.asarray(shares, dtype=float) * _MILLI + 1e-6).astype(int).clip(0, _MILLI)
    sizes, counts = np.unique(w_all[w_all > 0], return_counts=True)
    if sizes.size == 0:
        return 0
    patterns = [np.where(np.arange(sizes.size) == i, min(_MILLI // w, c), 0) for i, (w, c) in enumerate(zip(sizes, counts, strict=True))]
    bound = 0
    for _ in range(max_rounds):
        pi = _pattern_lp_duals(pywraplp, patterns, counts)
        value, best = _best_pattern(sizes, counts, pi)
        bound = max(bound, int(math.ceil(float(counts @ pi) / max(value, 1.0) - 1e-6)))
        if value <= 1.0 + 1e-9:
            break
        patterns.append(best)
    return bound


def _pattern_lp_duals(pywraplp: Any, patterns: list[np.ndarray], counts: np.ndarray) -> np.ndarray:
    """Duals (clipped at 0) of min Σ x_p subject to Σ_p a_ip x_p ≥ count_i, x ≥ 0."""
    solver = pywraplp.Solver.CreateSolver("GLOP")
    x = [solver.NumVar(0.0, solver.infinity(), "") for _ in patterns]
    rows = [solver.Add(sum(float(p[i]) * x[k] for k, p in enumerate(patterns) if p[i]) >= float(c))
            for i, c in enumerate(counts)]
    solver.Minimize(sum(x))
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        return np.zeros(len(counts))
    return np.array([max(r.dual_value(), 0.0) for r in rows])


def _best_pattern(sizes: np.ndarray, counts: np.ndarray, value: np.ndarray) -> tuple[float, np.ndarray]:
    """The pattern (copies of each size, at most its count, total ≤ one device) of the largest
    total value: a 0/1 knapsack over the sizes split into binary bundles of copies."""
    items: list[tuple[int, int]] = []  # (size index, copies)
    for i, (w, c) in enumerate(zip(sizes, counts, strict=True)):
        left, k = min(int(c), _MILLI // int(w)), 1
        while left > 0:
            items.append((i, min(k, left)))
            left -= min(k, left)
            k *= 2
    best = np.zeros(_MILLI + 1)
    take = np.zeros((len(items), _MILLI + 1), bool)
    for n, (i, k) in enumerate(items):
        w = int(sizes[i]) * k
        cand = np.full(_MILLI + 1, -np.inf)
        cand[w:] = best[: _MILLI + 1 - w] + value[i] * k
        take[n] = cand > best + 1e-12
        best = np.maximum(best, cand)
    pattern = np.zeros(sizes.size, int)
    cap = int(np.argmax(best))
    for n in range(len(items) - 1, -1, -1):
        if take[n, cap]:
            i, k = items[n]
            pattern[i] += k
            cap -= int(sizes[i]) * k
    return float(best.max()), pattern


def _shares_bound_at(s: np.ndarray, alpha: float) -> int:
    """Devices the shares ``s`` need, counted at a threshold ``alpha`` ≤ ½: a share above 1 − α
    has a device of its own that no share of at least α can join; a share in (½, 1 − α] has a
    device of its own with 1 − s left; the shares in [α, ½] need what exceeds that room (shares
    below α are left out, which only lowers the count)."""
    alone = s > 1.0 - alpha + 2 * EPS  # with any share of at least α, above one device (the fit tolerance is EPS)
    big = (s > 0.5 + EPS) & ~alone
    small = (s >= alpha - EPS) & (s <= 0.5 + EPS)
    extra = float(s[small].sum() - (1.0 - s[big]).sum())
    return int(alone.sum() + big.sum()) + (int(math.ceil(extra - EPS)) if extra > EPS else 0)


def mixed_pool_lower_bound(capacities: np.ndarray, demand: Sequence[float]) -> int:
    """Fewest nodes of a mixed pool whose capacities can cover the demand, resource by resource:
    for each resource the smallest k with the k largest capacities summing to at least the
    demand. At least as tight as :func:`pool_lower_bound` (k largest ≤ k × the largest); -1 when
    even every node together falls short."""
    caps = np.asarray(capacities, dtype=float).reshape(len(capacities), -1)
    bound = 0
    for r, total in enumerate(demand):
        if total <= EPS:
            continue
        top = np.cumsum(np.sort(caps[:, r])[::-1])
        k = int(np.searchsorted(top, total - EPS) + 1)
        if k > len(top):
            return -1
        bound = max(bound, k)
    return bound
