"""One simulated run: a seeded arrival of pods onto nodes under one scheduler policy.

The protocol is the FGD authors' (their ``generate_run_scripts.py`` and ``simulator.go``):

- the pods, sorted by name, are shuffled with the seed; the workload is then *tuned* to 1.3× the
  cluster's GPU capacity: pods drawn at random from the original list are appended while the total
  stays under the target, or random pods are removed while it is above;
- pods arrive one at a time and never leave; a pod that fits nowhere fails and is counted as
  arrived but not allocated;
- after every arrival the allocated GPU share and the fragmentation (the FGD measure over the
  original workload's task shapes, 95 % popularity, CPU-only shapes included) are recorded; the
  figures reported at X % arrival are the means over the arrivals whose requested GPUs round to
  X % of capacity. The authors' published table takes the fragmentation at 100 % arrival and the
  allocation at the end of the arrival (130 %): ``RunResult.at(100)`` and ``final_alloc()``.

Policies (score plugins of the authors' simulator; the highest score wins; scores are integers as
there). Ties go to the node with the lowest rank in a seeded random permutation of the nodes: the
authors prefix every node's name with a seeded random index before the run, so equal scores keep
resolving to the same nodes in a random order, rather than to a fresh draw each time (this is
what reproduces their FGD, BestFit and GpuClustering figures; a fresh draw spreads ties and costs
FGD about 6 points on openb default):

- ``random``: a random feasible node; a shared pod gets a random device that fits;
- ``dotprod`` (Tetris): 100·(1 − ½(cpu_free·cpu_req/128² + gpu_free·gpu_req/8²)), normalised by
  the largest node spec (128 cores, 8 GPUs);
- ``gpuclustering``: prefers nodes that already hold only pods of the same GPU kind (shared,
  1-GPU, 2-GPU, …), then mixed ones, then idle ones;
- ``gpupacking``: prefers using already-shared devices, then free devices of a used node, then
  idle nodes;
- ``bestfit``: 100·(1 − ½((cpu_free − req)/128 + (gpu_free − req)/8));
- ``fgd``: 100·sigmoid(F_before − F_after), F the node's fragmentation in GPUs; for a shared pod,
  each fitting device is tried and the best one taken.

Non-FGD policies put a shared pod on the fitting device with the least free share (best fit);
whole-GPU pods take the lowest-indexed free devices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufinops.capacity import EPS, FragModel, TaskShape, device_stats, task_distribution
from simulator.inputs import MILLI, Inventory, Workload

__all__ = ["POLICIES", "RunResult", "run_once", "tune_workload", "target_shapes"]

POLICIES = ("random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd")
MAX_CPU = 128000  # the authors' MaxSpecCpu (milli)
MAX_GPU = 8000  # MaxSpecGpu (milli)
TUNE_RATIO = 1.3
POPULARITY = 0.95


@dataclass
class RunResult:
    policy: str
    seed: int
    arrived_pct: np.ndarray  # after each arrival
    alloc_pct: np.ndarray
    frag_pct: np.ndarray  # fragmentation % of capacity before each arrival (see run_once)
    failed: int
    pods: int

    def at(self, pct: int) -> tuple[float, float]:
        """Mean (alloc %, frag % of capacity) over arrivals whose arrived share rounds to pct
        (falling back to pct ± 1, as the authors' merge scripts do)."""
        r = np.round(self.arrived_pct)
        sel = r == pct
        if not sel.any():
            sel = (r >= pct - 1) & (r <= pct + 1)
        if not sel.any():
            return float("nan"), float("nan")
        return float(self.alloc_pct[sel].mean()), float(self.frag_pct[sel].mean())

    def final_alloc(self) -> float:
        """Allocation % at the end of the arrival (the tuned workload, 130 % of capacity arrived):
        the authors' published allocation figure, their analysis_allo_discrete column 130 (the
        last arrival when no arrival rounds to it)."""
        a, _ = self.at(int(round(TUNE_RATIO * 100)))
        if a != a:
            return float(self.alloc_pct[-1]) if self.alloc_pct.size else float("nan")
        return a

    def curve(self, step: int = 5) -> list[list[float]]:
        out = []
        top = int(np.floor(self.arrived_pct.max())) if self.arrived_pct.size else 0
        for pct in range(0, min(top, 130) + 1, step):
            a, _ = self.at(pct)
            if a == a:
                out.append([float(pct), round(a, 2)])
        return out


def target_shapes(work: Workload) -> tuple[list[TaskShape], list[float]]:
    """The target workload M: task shapes of the original pods (CPU-only ones included)."""
    shapes = [
        TaskShape(cpu=int(c) / MILLI, gpus=int(k), per_gpu=(int(m) / MILLI if k else 0.0),
                  models=(frozenset(s.split("|")) - {""} or None) if k and s else None)
        for c, k, m, s in zip(work.cpu_milli, work.num_gpu, work.gpu_milli, work.gpu_spec, strict=True)
    ]
    return task_distribution(shapes, POPULARITY)


def tune_workload(work: Workload, capacity_milli: int, rng: np.random.Generator,
                  ratio: float = TUNE_RATIO) -> np.ndarray:
    """Arrival order (indices into ``work``): shuffled, then tuned to ``ratio`` × capacity."""
    order = list(rng.permutation(len(work)))
    tm = work.total_milli
    total = int(tm.sum())
    target = ratio * capacity_milli
    if total > target:
        while total > target and order:
            i = int(rng.integers(len(order)))
            total -= int(tm[order.pop(i)])
    elif total < target and len(work):
        while True:
            j = int(rng.integers(len(work)))
            if total + int(work.gpu_milli[j]) > target:  # the authors test the per-GPU share here
                break
            total += int(tm[j])
            order.append(j)
    return np.array(order, dtype=np.int64)


class _Cluster:
    """Mutable node state; device arrays in milli-GPU, absent devices have capacity 0."""

    def __init__(self, inv: Inventory, fm: FragModel):
        self.n = len(inv)
        self.g = max(int(inv.gpus.max(initial=0)), 1)
        cols = np.arange(self.g)
        self.present = cols[None, :] < inv.gpus[:, None]
        self.left = np.where(self.present, MILLI, 0).astype(np.int64)
        self.ngpu = inv.gpus.astype(np.int64)
        self.cpu_cap = inv.cpu_milli.astype(np.int64)
        self.cpu = inv.cpu_milli.astype(np.int64).copy()
        self.mem = inv.memory_mib.astype(np.int64).copy()
        self.quantum = inv.quantum.astype(np.int64)
        self.timeslice = inv.timeslice.astype(bool)
        self.fm = fm
        self.model_idx = fm.model_index(inv.models)
        self.pool_models = inv.models
        self.thr = fm.thresholds
        self.cnt_ge, self.sum_lt, self.total = device_stats(self._frac(self.left, self.present), self.thr)
        self.frag = fm.from_stats(self.cnt_ge, self.sum_lt, self.total, self.cpu / MILLI, self.model_idx)
        self.nfree = self.present.sum(axis=1).astype(np.int64)  # fully free devices
        self.maxleft = self.left.max(axis=1)
        # GPU-kind tags for gpuclustering: 0 = shared, k = k whole GPUs (capped at 9 = others)
        self.tags = np.zeros((self.n, 10), dtype=np.int64)
        self.used_milli = 0
        # Node states: nodes with equal (model, layout, free CPU, free devices as a multiset) score
        # alike under FGD, so scores are kept per state id and per pod shape.
        self._ids: dict[tuple, int] = {}
        self._stats: list[tuple[np.ndarray, np.ndarray, float, float]] = []
        self.sid = np.array([self._state_id(i) for i in range(self.n)], dtype=np.int64)
        for i in range(self.n):
            if len(self._stats) <= self.sid[i]:
                self._stats.append((self.cnt_ge[i].copy(), self.sum_lt[i].copy(), float(self.total[i]),
                                    float(self.frag[i])))
        self._memo: dict[tuple[int, int, int], np.ndarray] = {}
        self.frag_sum = float(self.frag.sum())

    def _state_id(self, i: int) -> int:
        key = (int(self.model_idx[i]), int(self.quantum[i]), bool(self.timeslice[i]), int(self.cpu[i]),
               tuple(sorted(self.left[i][self.present[i]].tolist())))
        sid = self._ids.get(key)
        if sid is None:
            sid = self._ids[key] = len(self._ids)
        return sid

    def memo(self, key: tuple[int, int, int]) -> np.ndarray:
        """Scores per state id for one pod shape (-1 = not computed yet), grown with the states."""
        arr = self._memo.get(key)
        need = len(self._ids)
        if arr is None or arr.size < need:
            new = np.full(max(2 * need, 1024), -1, dtype=np.int64)
            if arr is not None:
                new[: arr.size] = arr
            arr = self._memo[key] = new
        return arr

    @staticmethod
    def _frac(left: np.ndarray, present: np.ndarray) -> np.ndarray:
        return np.where(present, left / MILLI, np.nan)

    def refresh(self, i: int) -> None:
        row = self.left[i:i + 1]
        sid = self._state_id(i)
        self.sid[i] = sid
        if sid < len(self._stats):
            c0, s0, t0, f0 = self._stats[sid]
        else:
            c, s, t = device_stats(self._frac(row, self.present[i:i + 1]), self.thr)
            f = self.fm.from_stats(c, s, t, self.cpu[i:i + 1] / MILLI, self.model_idx[i:i + 1])[0]
            c0, s0, t0, f0 = c[0], s[0], float(t[0]), float(f)
            self._stats.append((c0, s0, t0, f0))
        self.cnt_ge[i], self.sum_lt[i], self.total[i] = c0, s0, t0
        self.frag_sum += f0 - float(self.frag[i])
        self.frag[i] = f0
        self.nfree[i] = int(((row[0] == MILLI) & self.present[i]).sum())
        self.maxleft[i] = int(row[0].max())


def _demand(cl: _Cluster, milli: int, k: int) -> np.ndarray:
    """Per-node milli demand per device: MIG rounds a share up to whole slices, time-slicing makes
    every device request one replica."""
    d = np.full(cl.n, milli, dtype=np.int64)
    q = cl.quantum
    mig = (q > 0) & ~cl.timeslice
    if mig.any() and milli < MILLI:
        d[mig] = np.minimum(MILLI, -(-milli // q[mig]) * q[mig])
    ts = cl.timeslice
    if ts.any() and k > 0:
        d[ts] = q[ts]
    return d


def _feasible(cl: _Cluster, cpu: int, mem: int, k: int, dem: np.ndarray, access: np.ndarray) -> np.ndarray:
    ok = (cl.cpu >= cpu) & (cl.mem >= mem)
    if k == 0:
        return ok
    ok &= access & (cl.ngpu > 0)
    whole = dem >= MILLI
    if k == 1:
        fits = np.where(whole, cl.nfree >= 1, cl.maxleft >= dem)
    else:
        fits = np.where(whole, cl.nfree >= k, (cl.left >= dem[:, None]).sum(axis=1) >= k)
    return ok & fits


def _sigmoid_score(delta: np.ndarray) -> np.ndarray:
    delta = np.round(delta, 9)
    return np.floor(100.0 / (1.0 + np.exp(-delta))).astype(np.int64)


def _fgd_whole(cl: _Cluster, idx: np.ndarray, cpu: int, k: int) -> np.ndarray:
    """FGD score on nodes ``idx`` for a pod taking k whole free devices (or no device)."""
    cnt = cl.cnt_ge[idx] - k if k else cl.cnt_ge[idx]
    after = cl.fm.from_stats(cnt, cl.sum_lt[idx], cl.total[idx] - k, (cl.cpu[idx] - cpu) / MILLI, cl.model_idx[idx])
    return _sigmoid_score(cl.frag[idx] - after)


def _fgd_share(cl: _Cluster, idx: np.ndarray, cpu: int, dem: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FGD score and best device on nodes ``idx`` for a pod using ``dem`` milli of one device."""
    left = cl.left[idx]
    d = dem[idx]
    fits = (left >= d[:, None]) & cl.present[idx]
    # one candidate per distinct free value on a node: equal devices score equally
    first = fits.copy()
    for g in range(1, cl.g):
        first[:, g] &= ~(left[:, :g] == left[:, g:g + 1]).any(axis=1)
    rows, cols = np.nonzero(first)
    a = left[rows, cols] / MILLI
    b = a - d[rows] / MILLI
    t = cl.thr[None, :]
    ge_a, ge_b = a[:, None] >= t - EPS, b[:, None] >= t - EPS
    cnt = cl.cnt_ge[idx[rows]] - ge_a + ge_b
    slt = cl.sum_lt[idx[rows]] - np.where(ge_a, 0.0, a[:, None]) + np.where(ge_b, 0.0, b[:, None])
    tot = cl.total[idx[rows]] - d[rows] / MILLI
    after = cl.fm.from_stats(cnt, slt, tot, (cl.cpu[idx[rows]] - cpu) / MILLI, cl.model_idx[idx[rows]])
    sc = _sigmoid_score(cl.frag[idx[rows]] - after)
    best = np.full(len(idx), -1, dtype=np.int64)
    dev = np.zeros(len(idx), dtype=np.int64)
    # rows/cols are in row-major order: the first maximum per node is the lowest device index
    order = np.lexsort((cols, -sc, rows))
    r_sorted = rows[order]
    firsts = np.ones(len(order), dtype=bool)
    firsts[1:] = r_sorted[1:] != r_sorted[:-1]
    pick = order[firsts]
    best[rows[pick]] = sc[pick]
    dev[rows[pick]] = cols[pick]
    return best, dev


def _scores(policy: str, cl: _Cluster, idx: np.ndarray, cpu: int, k: int, milli: int, dem: np.ndarray,
            tag: int) -> np.ndarray:
    if policy == "dotprod":
        gl = cl.left[idx].sum(axis=1)
        dot = (cl.cpu[idx] / MAX_CPU) * (cpu / MAX_CPU) + (gl / MAX_GPU) * (k * milli / MAX_GPU)
        return np.floor(100.0 * (1.0 - dot / 2.0) + 1e-9).astype(np.int64)
    if policy == "bestfit":
        gl = cl.left[idx].sum(axis=1)
        s = (cl.cpu[idx] - cpu) / MAX_CPU * 0.5 + (gl - k * milli) / MAX_GPU * 0.5
        return np.floor((1.0 - s) * 100.0 + 1e-9).astype(np.int64)
    if policy == "gpuclustering":
        if k == 0:
            return np.zeros(len(idx), dtype=np.int64)
        gl = cl.left[idx].sum(axis=1)
        base = 25 * (MAX_GPU - gl) // MAX_GPU
        tags = cl.tags[idx]
        kinds = (tags > 0).sum(axis=1)
        same = tags[:, tag] > 0
        return base + np.where(same, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
    if policy == "gpupacking":
        if k == 0:
            return np.zeros(len(idx), dtype=np.int64)
        nfree, ngpu = cl.nfree[idx], cl.ngpu[idx]
        left = cl.left[idx]
        idle = nfree == ngpu
        s3 = np.maximum(33 - nfree, nfree)
        d = dem[idx]
        if k == 1 and milli < MILLI:
            # case 1 (a shared device fits): the fullest fitting device, 100 - its free % / 10
            fit_shared = (left >= d[:, None]) & (left < MILLI) & cl.present[idx]
            best_left = np.where(fit_shared, left, MILLI + 1).min(axis=1)
            s1 = np.maximum(100 - (best_left * 100 // MILLI) // 10, 50)
            case1 = fit_shared.any(axis=1)
            s2 = np.maximum(50 - 1, 33)
            return np.where(idle, s3, np.where(case1, s1, s2))
        # whole GPUs: every device used is fully free (case 2 on a used node)
        s2 = np.maximum(50 - k, 33)
        return np.where(idle, s3, s2)
    raise ValueError(f"unknown policy {policy!r}")


def _pick_device_bestfit(cl: _Cluster, i: int, d: int) -> int:
    row = cl.left[i]
    ok = np.flatnonzero((row >= d) & cl.present[i])
    return int(ok[np.argmin(row[ok])])  # argmin takes the lowest index on ties


def run_once(inv: Inventory, work: Workload, policy: str, seed: int, fm: FragModel | None = None) -> RunResult:
    """One seeded run; ``fm`` is the compiled target workload (built from ``work`` if None)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    rng = np.random.default_rng(seed)
    if fm is None:
        shapes, probs = target_shapes(work)
        fm = FragModel(shapes, probs, sorted({m for m in inv.models if m}))
    cl = _Cluster(inv, fm)
    capacity = inv.total_gpus * MILLI
    # The authors rename the nodes with a seeded random prefix; among equal scores the scheduler
    # then takes the same node each time (a fixed random priority), not a fresh draw.
    rank = rng.permutation(cl.n)
    order = tune_workload(work, capacity, rng)
    n_models = len(fm.model_names)
    access_cache: dict[str, np.ndarray] = {}
    arrived_milli = 0
    arr, alloc, frag = np.empty(len(order)), np.empty(len(order)), np.empty(len(order))
    frag0 = 100.0 * cl.frag_sum / max(inv.total_gpus, 1)
    failed = 0
    for step, j in enumerate(order):
        cpu, mem, k, milli = int(work.cpu_milli[j]), int(work.memory_mib[j]), int(work.num_gpu[j]), int(work.gpu_milli[j])
        spec = work.gpu_spec[j]
        if spec not in access_cache:
            allowed = frozenset(spec.split("|")) - {""}
            row = np.array([not allowed or m in allowed for m in fm.model_names] + [not allowed])
            access_cache[spec] = row[cl.model_idx] & (cl.model_idx < n_models) if allowed else np.ones(cl.n, bool)
        dem = _demand(cl, milli, k) if k else np.zeros(cl.n, dtype=np.int64)
        ok = _feasible(cl, cpu, mem, k, dem, access_cache[spec])
        arrived_milli += k * milli
        idx = np.flatnonzero(ok)
        device = -1
        if idx.size:
            share = k == 1 and milli < MILLI
            tag = 0 if share else min(k, 9)
            if policy == "random":
                i = int(idx[rng.integers(idx.size)])
            else:
                if policy == "fgd":
                    memo = cl.memo((cpu, k, milli))
                    s_ids = cl.sid[idx]
                    todo = memo[s_ids] < 0
                    if todo.any():
                        u, first = np.unique(s_ids[todo], return_index=True)
                        reps = idx[todo][first]
                        memo[u] = _fgd_share(cl, reps, cpu, dem)[0] if share else _fgd_whole(cl, reps, cpu, k)
                    sc = memo[s_ids]
                else:
                    sc = _scores(policy, cl, idx, cpu, k, milli, dem, tag)
                top = np.flatnonzero(sc == sc.max())
                c = int(top[0]) if top.size == 1 else int(top[np.argmin(rank[idx[top]])])
                i = int(idx[c])
                if policy == "fgd" and share:
                    device = int(_fgd_share(cl, np.array([i]), cpu, dem)[1][0])
            d = int(dem[i])
            if k:
                if share or (k == 1 and d < MILLI):
                    if device < 0:
                        if policy == "random":
                            fit = np.flatnonzero((cl.left[i] >= d) & cl.present[i])
                            device = int(fit[rng.integers(fit.size)])
                        else:
                            device = _pick_device_bestfit(cl, i, d)
                    cl.left[i, device] -= d
                    used = d
                elif d >= MILLI:
                    free = np.flatnonzero((cl.left[i] == MILLI) & cl.present[i])[:k]
                    cl.left[i, free] = 0
                    used = k * MILLI
                else:  # time-sliced node: k replicas, best fit one at a time
                    used = 0
                    for _ in range(k):
                        g = _pick_device_bestfit(cl, i, d)
                        cl.left[i, g] -= d
                        used += d
                cl.used_milli += used
                cl.tags[i, tag] += 1
            cl.cpu[i] -= cpu
            cl.mem[i] -= mem
            cl.refresh(i)
        else:
            failed += 1
        arr[step] = 100.0 * arrived_milli / capacity
        alloc[step] = 100.0 * cl.used_milli / capacity
        frag[step] = 100.0 * cl.frag_sum / inv.total_gpus
    # The authors join their per-event allocation and fragmentation logs by row, and the
    # fragmentation log has one extra first row (the report before any pod): each arrival's
    # fragmentation is the one before it. Reported the same way so the figures compare.
    lagged = np.concatenate([[frag0], frag[:-1]]) if frag.size else frag
    return RunResult(policy, seed, arr, alloc, lagged, failed, len(order))
