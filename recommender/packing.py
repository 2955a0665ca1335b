"""Consolidation packer: repack the movable pods of one node pool onto fewer nodes.

Plan only (pure; nothing is applied here). Two stages:

1. **Drain-FFD**: nodes are drained cheapest-to-drain first; each drained node's movable pods are
   placed largest-first onto the first node (fullest first) where every resource fits. A node
   whose pods do not all fit is left as it was.
2. **CP-SAT improvement** (large-neighbourhood search, OR-Tools): a neighbourhood of nodes is
   re-solved exactly — minimise the price of open nodes, then the number of evictions — hinted
   with the current plan, until the time limit. Small pools are one neighbourhood (the whole pool).

Constraints everywhere: the allocatable capacity of every resource the pods request, device-level
GPU fit (whole GPUs need free devices; fractional pods need room on one device), the GPU model,
node selectors, taints/tolerations, cordoned nodes are never targets, DaemonSet pods stay (and
vanish with their node), ``karpenter.sh/do-not-disrupt`` and PodDisruptionBudgets, serving pods
move only when the ``allow_serving_moves`` setting says so. Every plan is re-verified from scratch
by :func:`check_plan` before it is returned.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, Field

from gpufinops.capacity import device_lower_bound, mixed_pool_lower_bound, pool_lower_bound
from recommender.model import HOURS_PER_MONTH, NodeShape, PodPlacement

__all__ = [
    "PackingSettings",
    "Move",
    "PackingPlan",
    "pack_pool",
    "check_plan",
    "lower_bound",
    "is_movable",
    "can_run_on",
]

_EPS = 1e-9
_GPU = "nvidia.com/gpu"
_HARD_EFFECTS = ("NoSchedule", "NoExecute")


class PackingSettings(BaseModel):
    time_limit_s: float = Field(default=5.0, ge=0, description="CP-SAT improvement budget per node pool")
    use_cp_sat: bool = True
    use_repack: bool = Field(default=True, description="also try a best-fit repack of the whole pool as the start")
    allow_serving_moves: bool = False
    movable_tiers: list[str] = Field(default_factory=lambda: ["training", "batch", "interactive", "serving"])
    neighbourhood_nodes: int = Field(default=24, ge=2, description="nodes per CP-SAT neighbourhood")
    neighbourhood_pods: int = Field(default=240, ge=1, description="cap on pods per neighbourhood")
    workers: int = Field(default=2, ge=1)
    seed: int = 0


@dataclass(frozen=True)
class Move:
    namespace: str
    pod: str
    from_node: str
    to_node: str


@dataclass
class PackingPlan:
    cluster: str
    node_pool: str
    nodes_before: int
    nodes_after: int
    freed_nodes: list[str]
    moves: list[Move]
    lower_bound: int
    hourly_savings_usd: float
    solver: str
    unmovable_pods: int
    assignment: dict[str, str] = field(default_factory=dict)  # pod key -> final node (all pods)
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def gap(self) -> int:
        return self.nodes_after - self.lower_bound

    @property
    def monthly_savings_usd(self) -> float:
        return self.hourly_savings_usd * HOURS_PER_MONTH

    @property
    def evictions_per_node_freed(self) -> float:
        return len(self.moves) / len(self.freed_nodes) if self.freed_nodes else 0.0


# ---------------------------------------------------------------------------------------------
# constraints


def is_movable(pod: PodPlacement, settings: PackingSettings, pdb_allowed: dict[str, int] | None = None) -> bool:
    if pod.is_daemonset or pod.do_not_disrupt or not pod.owner_kind:
        return False  # a bare pod would not be recreated elsewhere
    if pod.tier not in settings.movable_tiers:
        return False
    if pod.tier == "serving" and not settings.allow_serving_moves:
        return False
    if pod.pdb is not None and (pdb_allowed or {}).get(pod.pdb, 0) <= 0:
        return False
    return True


def _needs_gpu(pod: PodPlacement) -> bool:
    return pod.gpu_equiv > 0 or pod.gpu_fraction > 0 or any(
        k.startswith("nvidia.com/") and v > 0 for k, v in pod.requests.items()
    )


def can_run_on(pod: PodPlacement, node: NodeShape, current: NodeShape | None = None) -> bool:
    """Scheduling predicates other than capacity: selector, taints, GPU model, cordon."""
    if node.unschedulable and node.name != pod.node:
        return False
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return False
    for t in node.taints:
        if t.effect in _HARD_EFFECTS and not any(tol.tolerates(t) for tol in pod.tolerations):
            return False
    if pod.gpu_fraction > 0 and node.device_level_gpus == 0 and node.name != pod.node:
        return False  # a fractional (gpu-milli) share needs a physical device to share
    if _needs_gpu(pod):
        allowed = pod.gpu_models
        if allowed is None:
            allowed = frozenset([current.gpu_model]) if current is not None and current.gpu_model else None
        if allowed is not None and node.gpu_model not in allowed:
            return False
    return True


def lower_bound(nodes: Sequence[NodeShape], pods: Sequence[PodPlacement]) -> int:
    """The pool's node lower bound (DaemonSet pods excluded: they leave with their node); at least
    one node when there is work. The tighter of

    - DESIGN §3: max(⌈ΣGPU/G⌉, ⌈ΣCPU/C⌉, ⌈ΣMem/M⌉) with the pool's largest node as the shape
      (:func:`gpufinops.capacity.pool_lower_bound`), and
    - per-device fit on a mixed pool (:func:`gpufinops.capacity.device_lower_bound`,
      :func:`gpufinops.capacity.mixed_pool_lower_bound`): the devices the whole and fractional
      GPUs need (two shares above ½ never share a device), then the fewest nodes whose largest
      capacities cover that and the CPU and memory.
    """
    work = [p for p in pods if not p.is_daemonset]
    if not work or not nodes:
        return 0
    cpu = sum(p.requests.get("cpu", 0.0) for p in work)
    mem = sum(p.requests.get("memory", 0.0) for p in work)
    demand = (sum(p.gpu_equiv for p in work), cpu, mem)
    shape = (max(n.gpu_count for n in nodes), max(n.allocatable.get("cpu", 0.0) for n in nodes),
             max(n.allocatable.get("memory", 0.0) for n in nodes))
    bound = max(1, pool_lower_bound(demand, shape))
    if all(n.device_level_gpus == n.gpu_count for n in nodes):
        whole = sum(p.whole_gpus for p in work)
        shares = [p.gpu_fraction if p.gpu_fraction > 0 else p.gpu_equiv for p in work
                  if p.whole_gpus == 0 and (p.gpu_fraction > 0 or p.gpu_equiv > 0)]
        devices = device_lower_bound(whole, shares)
        caps = np.array([[n.gpu_count, n.allocatable.get("cpu", 0.0), n.allocatable.get("memory", 0.0)]
                         for n in nodes], dtype=float)
        tight = mixed_pool_lower_bound(caps, (devices, cpu, mem))
        bound = max(bound, tight)
    return bound


# ---------------------------------------------------------------------------------------------
# state


class _State:
    """Arrays for one pool: scalar resources (N×D), per-device free fractions (N×G), assignment."""

    def __init__(self, nodes: Sequence[NodeShape], pods: Sequence[PodPlacement], settings: PackingSettings,
                 pdb_allowed: dict[str, int]):
        self.nodes = list(nodes)
        self.pods = list(pods)
        self.node_ix = {n.name: i for i, n in enumerate(self.nodes)}
        dims = sorted({k for p in self.pods for k, v in p.requests.items() if v > 0} | {"cpu", "memory"})
        self.dims = dims
        n_nodes, n_pods = len(self.nodes), len(self.pods)
        self.cap = np.array([[n.allocatable.get(d, 0.0) for d in dims] for n in self.nodes], float).reshape(n_nodes, len(dims))
        self.req = np.array([[p.requests.get(d, 0.0) for d in dims] for p in self.pods], float).reshape(n_pods, len(dims))
        gmax = max([n.device_level_gpus for n in self.nodes] + [0])
        self.dev_free = np.full((n_nodes, max(gmax, 1)), -1.0)
        for i, n in enumerate(self.nodes):
            self.dev_free[i, : n.device_level_gpus] = 1.0
        self.whole = np.array([p.whole_gpus for p in self.pods], int)
        self.frac = np.array([p.gpu_fraction for p in self.pods], float)
        self.orig = np.array([self.node_ix[p.node] for p in self.pods], int)
        self.assign = self.orig.copy()
        self.devs: list[list[int]] = [[] for _ in self.pods]
        self.used = np.zeros_like(self.cap)
        self.ds = np.array([p.is_daemonset for p in self.pods], bool)
        self.movable = np.array([is_movable(p, settings, pdb_allowed) for p in self.pods], bool)
        self.pdb_allowed = dict(pdb_allowed)
        self.pdb_of = [p.pdb for p in self.pods]
        self.has_pdb = any(self.pdb_of)
        self.open = np.ones(n_nodes, bool)
        self.target_ok = np.array([not n.unschedulable for n in self.nodes], bool)
        self.price = np.array([n.hourly_price_usd for n in self.nodes], float)
        self.device_level = np.array([n.device_level_gpus > 0 for n in self.nodes], bool)
        self.compat = np.zeros((n_pods, n_nodes), bool)
        cache: dict[tuple, np.ndarray] = {}
        for j, p in enumerate(self.pods):
            cur = self.nodes[self.orig[j]]
            sig = (tuple(sorted(p.node_selector.items())), p.tolerations, p.gpu_models, _needs_gpu(p), cur.gpu_model)
            if sig not in cache:
                cache[sig] = np.array([can_run_on(p, n, cur) and not n.unschedulable for n in self.nodes], bool)
            self.compat[j] = cache[sig]
            self.compat[j, self.orig[j]] = True  # staying put is always allowed
        self.pods_on: list[set[int]] = [set() for _ in self.nodes]
        # Place the current pods (whole GPUs first, then fractions largest first) to learn device use.
        for j in sorted(range(n_pods), key=lambda j: (-self.whole[j], -self.frac[j])):
            self._place(j, self.orig[j], force=True)

    # -- device-level fit ------------------------------------------------------------------------
    def _device_choice(self, j: int, i: int, *, force: bool = False) -> list[int] | None:
        if not self.device_level[i] or (self.whole[j] == 0 and self.frac[j] == 0):
            return []
        free = self.dev_free[i]
        if self.whole[j] > 0:
            idle = [g for g in range(free.size) if free[g] >= 1.0 - _EPS]
            if len(idle) >= self.whole[j]:
                return idle[: self.whole[j]]
            if force:  # recorded over-allocation in the data: take the emptiest devices
                return [int(g) for g in np.argsort(-free)[: self.whole[j]]]
            return None
        f = self.frac[j]
        ok = [g for g in range(free.size) if free[g] >= f - _EPS]
        if ok:
            return [min(ok, key=lambda g: free[g])]  # best fit: the fullest device that still fits
        return [int(np.argmax(free))] if force else None

    def fits(self, j: int, i: int) -> bool:
        if not np.all(self.used[i] + self.req[j] <= self.cap[i] + 1e-6):
            return False
        return self._device_choice(j, i) is not None

    def _place(self, j: int, i: int, *, force: bool = False) -> None:
        devs = self._device_choice(j, i, force=force) or []
        self.used[i] += self.req[j]
        for g in devs:
            self.dev_free[i, g] -= 1.0 if self.whole[j] > 0 else self.frac[j]
        self.devs[j] = devs
        self.assign[j] = i
        self.pods_on[i].add(j)

    def _remove(self, j: int) -> None:
        i = self.assign[j]
        self.used[i] -= self.req[j]
        for g in self.devs[j]:
            self.dev_free[i, g] += 1.0 if self.whole[j] > 0 else self.frac[j]
        self.devs[j] = []
        self.pods_on[i].discard(j)

    def move(self, j: int, i: int) -> None:
        self._remove(j)
        self._place(j, i)

    # -- bookkeeping ---------------------------------------------------------------------------
    def fill(self, i: int) -> float:
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(self.cap[i] > 0, self.used[i] / self.cap[i], 0.0)
        gpu = 0.0
        if self.device_level[i]:
            live = self.dev_free[i][self.dev_free[i] >= -0.5]
            gpu = float(1.0 - live.mean()) if live.size else 0.0
        return float(max(share.max(initial=0.0), gpu))

    def drainable(self, i: int) -> bool:
        return all(self.movable[j] or self.ds[j] for j in self.pods_on[i])

    def moves_used(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if not self.has_pdb:
            return out
        for j, pdb in enumerate(self.pdb_of):
            if pdb is not None and self.assign[j] != self.orig[j]:
                out[pdb] = out.get(pdb, 0) + 1
        return out

    def objective(self) -> tuple[float, int]:
        return float(self.price[self.open].sum()) + float(self.open.sum()) * 1e-6, int((self.assign != self.orig).sum())


# ---------------------------------------------------------------------------------------------
# stage 1: drain-FFD


def _size_key(st: _State, j: int) -> float:
    capmax = np.maximum(st.cap.max(axis=0), _EPS)
    return float(st.whole[j] + st.frac[j] + (st.req[j] / capmax).sum())


def _first_fit(st: _State, j: int, rank: np.ndarray) -> int | None:
    """The first node in ``rank`` order where pod ``j`` fits (vectorised over nodes)."""
    ok = st.open & st.target_ok & st.compat[j] & np.all(st.used + st.req[j] <= st.cap + 1e-6, axis=1)
    if st.whole[j] > 0:
        ok &= ~st.device_level | ((st.dev_free >= 1.0 - _EPS).sum(axis=1) >= st.whole[j])
    elif st.frac[j] > 0:
        ok &= ~st.device_level | (st.dev_free.max(axis=1) >= st.frac[j] - _EPS)
    cand = rank[ok[rank]]
    return int(cand[0]) if cand.size else None


def _drain_ffd(st: _State) -> None:
    order = sorted(
        (i for i in range(len(st.nodes)) if st.drainable(i)),
        key=lambda i: (sum(1 for j in st.pods_on[i] if not st.ds[j]), st.fill(i), st.price[i] * -1),
    )
    target_rank = np.array(sorted(range(len(st.nodes)), key=lambda i: -st.fill(i)), int)
    for c in order:
        if not st.open[c] or not st.drainable(c):
            continue
        st.open[c] = False
        todo = sorted((j for j in st.pods_on[c] if not st.ds[j]), key=lambda j: -_size_key(st, j))
        done: list[tuple[int, int]] = []
        budget = st.moves_used()
        ok = True
        for j in todo:
            pdb = st.pdb_of[j]
            if pdb is not None and st.orig[j] == c and budget.get(pdb, 0) >= st.pdb_allowed.get(pdb, 0):
                ok = False
                break
            dest = _first_fit(st, j, target_rank)
            if dest is None:
                ok = False
                break
            done.append((j, st.assign[j]))
            st.move(j, dest)
            if pdb is not None and st.orig[j] == c:
                budget[pdb] = budget.get(pdb, 0) + 1
        if not ok:
            for j, src in reversed(done):
                st.move(j, src)
            st.open[c] = True


# ---------------------------------------------------------------------------------------------
# stage 1b: repack from scratch (best-fit decreasing), then keep pods where they are


def _repack(st: _State, order_by: str = "gpu") -> bool:
    """Every movable pod taken off and placed again, largest GPU request first, on the open node
    it fits best (least normalised room left: the simulator's BestFit score, DESIGN §3), a node
    opening only when none fits (the biggest first; the pod's own node when it is one of them).
    Nodes of one shape are then relabelled so that each keeps as many of its own pods as
    possible. Returns False (state untouched) when a pod fits nowhere or a PodDisruptionBudget
    is involved (the drain stage respects those budgets move by move)."""
    if st.has_pdb:
        return False
    snap = _snapshot(st)
    opened0 = st.open.copy()
    movable = [j for j in range(len(st.pods)) if st.movable[j] and not st.ds[j]]
    for j in movable:
        st._remove(j)
    fixed = np.zeros(len(st.nodes), bool)
    for i in range(len(st.nodes)):
        fixed[i] = any(not st.ds[j] for j in st.pods_on[i])
    capmax = np.maximum(st.cap.max(axis=0), _EPS)
    if order_by == "gpu":  # GPUs first: whole, then shares largest first (device best-fit decreasing)
        order = sorted(movable, key=lambda j: (-st.whole[j], -st.frac[j], -float((st.req[j] / capmax).sum())))
    else:  # the hardest first: the largest share of the smallest node's capacity, any resource
        capmin = np.maximum(np.where(st.cap > 0, st.cap, np.inf).min(axis=0), _EPS)
        ndev_min = max(int((st.dev_free >= -0.5).sum(axis=1).min()), 1)
        order = sorted(movable, key=lambda j: -max(float((st.req[j] / capmin).max(initial=0.0)),
                                                   (st.whole[j] + st.frac[j]) / ndev_min))
    size = np.where(st.cap > 0, st.cap, 1.0)
    ndev = np.maximum((st.dev_free >= -0.5).sum(axis=1), 1)
    node_rank = np.lexsort((-(st.cap / capmax).sum(axis=1), -st.dev_free.clip(0).sum(axis=1)))
    opened = fixed.copy()
    ok_all = st.target_ok | fixed
    for j in order:
        fit = ok_all & st.compat[j] & np.all(st.used + st.req[j] <= st.cap + 1e-6, axis=1)
        if st.whole[j] > 0:
            fit &= ~st.device_level | ((st.dev_free >= 1.0 - _EPS).sum(axis=1) >= st.whole[j])
        elif st.frac[j] > 0:
            fit &= ~st.device_level | (st.dev_free.max(axis=1) >= st.frac[j] - _EPS)
        cand = np.flatnonzero(fit & opened)
        if cand.size:
            room = ((st.cap[cand] - st.used[cand] - st.req[j]) / size[cand]).sum(axis=1)
            room += np.where(st.device_level[cand], (st.dev_free[cand].clip(0).sum(axis=1) - st.whole[j] - st.frac[j])
                             / ndev[cand], 0.0)
            i = int(cand[np.argmin(room)])
        else:
            closed = node_rank[(fit & ~opened)[node_rank]]
            if not closed.size:
                _restore(st, snap)
                st.open = opened0
                return False
            i = int(st.orig[j]) if fit[st.orig[j]] and not opened[st.orig[j]] else int(closed[0])
            opened[i] = True
        st._place(j, i)
    st.open = opened
    _relabel(st, order, fixed)
    return True


def _relabel(st: _State, order: list[int], fixed: np.ndarray) -> None:
    """Swap the contents of interchangeable nodes (same capacities, devices and pod
    compatibility, none holding an unmovable pod) so that pods stay on their own node where the
    packing allows: greedily, the (content, node) pairs sharing the most pods first."""
    groups: dict[tuple, list[int]] = {}
    for i in range(len(st.nodes)):
        if fixed[i] or any(st.ds[j] and st.devs[j] for j in st.pods_on[i]):
            continue
        ds_used = tuple(sum((st.req[j] for j in st.pods_on[i] if st.ds[j]), np.zeros(st.cap.shape[1])))
        key = (tuple(st.cap[i]), ds_used, int((st.dev_free[i] >= -0.5).sum()), bool(st.target_ok[i]),
               st.compat[:, i].tobytes(), float(st.price[i]))
        groups.setdefault(key, []).append(i)
    target = st.assign.copy()
    moved = set(order)
    for members in groups.values():
        if len(members) < 2:
            continue
        contents = {i: [j for j in st.pods_on[i] if j in moved] for i in members}
        pairs = []
        for src in members:
            counts: dict[int, int] = {}
            for j in contents[src]:
                if st.orig[j] in contents:
                    counts[int(st.orig[j])] = counts.get(int(st.orig[j]), 0) + 1
            pairs += [(-c, src, dst) for dst, c in counts.items()]
        pairs.sort()
        src_done: set[int] = set()
        dst_done: set[int] = set()
        mapping: dict[int, int] = {}
        for _, src, dst in pairs:
            if src not in src_done and dst not in dst_done:
                mapping[src] = dst
                src_done.add(src)
                dst_done.add(dst)
        rest_src = [i for i in members if i not in src_done and (contents[i] or st.open[i])]
        rest_dst = [i for i in members if i not in dst_done]
        # contents without a match go to the free interchangeable nodes, open ones first
        rest_dst.sort(key=lambda i: not st.open[i])
        for src, dst in zip(rest_src, rest_dst, strict=False):
            mapping[src] = dst
        for src, dst in mapping.items():
            for j in contents[src]:
                target[j] = dst
        new_open = st.open.copy()
        for i in members:
            new_open[i] = False
        for src, dst in mapping.items():
            new_open[dst] = bool(st.open[src])
        if int(new_open[members].sum()) != int(st.open[members].sum()):
            continue
        st.open[members] = new_open[members]
    # replay the placement in the same order onto the relabelled nodes (device choice included)
    for j in order:
        st._remove(j)
    for j in order:
        st._place(j, int(target[j]))


# ---------------------------------------------------------------------------------------------
# stage 2: CP-SAT large-neighbourhood search


def _scale(dim: str) -> float:
    return 1000.0 if dim == "cpu" else (1.0 / 2**20 if dim == "memory" else 1000.0)


def _solve_neighbourhood(st: _State, nb: list[int], time_limit: float, settings: PackingSettings) -> bool:
    from ortools.sat.python import cp_model

    nbset = set(nb)
    pods = [j for i in nb for j in st.pods_on[i] if not st.ds[j]]
    if not pods:
        return False
    movable = [j for j in pods if st.movable[j]]
    fixed = [j for j in pods if not st.movable[j]]
    m = cp_model.CpModel()
    y = {i: m.new_bool_var(f"y{i}") for i in nb}
    x: dict[tuple[int, int], cp_model.IntVar] = {}
    for j in movable:
        for i in nb:
            if st.compat[j, i] and (st.target_ok[i] or i == st.assign[j]):
                x[j, i] = m.new_bool_var(f"x{j}_{i}")
        if not any((j, i) in x for i in nb):
            return False
        m.add_exactly_one(x[j, i] for i in nb if (j, i) in x)
    for i in nb:
        if any(st.assign[j] == i for j in fixed):
            m.add(y[i] == 1)
    for (_j, i), v in x.items():
        m.add_implication(v, y[i])
    # A valid bound on the open nodes helps CP-SAT prove optimality instead of running out the clock.
    nb_bound = 1
    for d in range(len(st.dims)):
        cap = max(st.cap[i, d] for i in nb)
        if cap > 0:
            nb_bound = max(nb_bound, math.ceil(sum(st.req[j, d] for j in pods) / cap - 1e-6))
    m.add(sum(y.values()) >= min(nb_bound, len(nb)))
    # Scalar resources; DaemonSet and fixed pods are a base load (requests rounded up, capacity down).
    for d, dim in enumerate(st.dims):
        sc = _scale(dim)
        for i in nb:
            base = sum(math.ceil(st.req[j, d] * sc - 1e-6) for j in st.pods_on[i] if st.ds[j] or not st.movable[j])
            cap = math.floor(st.cap[i, d] * sc + 1e-6) - base
            terms = [(math.ceil(st.req[j, d] * sc - 1e-6), x[j, i]) for j in movable if (j, i) in x and st.req[j, d] > 0]
            if terms:
                m.add(sum(c * v for c, v in terms) <= max(cap, 0) * y[i])
    # Device level: whole-GPU pods take idle devices; fractions share one device each.
    w: dict[tuple[int, int], cp_model.IntVar] = {}
    z: dict[tuple[int, int, int], cp_model.IntVar] = {}
    for i in nb:
        if not st.device_level[i]:
            continue
        ndev = st.nodes[i].device_level_gpus
        fixed_milli = np.zeros(ndev)
        for j in st.pods_on[i]:
            if not st.movable[j] or st.ds[j]:
                for g in st.devs[j]:
                    fixed_milli[g] += 1000 if st.whole[j] > 0 else math.ceil(st.frac[j] * 1000 - 1e-6)
        whole_terms = [(int(st.whole[j]), x[j, i]) for j in movable if (j, i) in x and st.whole[j] > 0]
        frac_pods = [j for j in movable if (j, i) in x and st.frac[j] > 0 and st.whole[j] == 0]
        for g in range(ndev):
            if fixed_milli[g] == 0:
                w[i, g] = m.new_bool_var(f"w{i}_{g}")
            for j in frac_pods:
                z[j, i, g] = m.new_bool_var(f"z{j}_{i}_{g}")
        m.add(sum(c * v for c, v in whole_terms) == sum(w[i, g] for g in range(ndev) if (i, g) in w))
        for j in frac_pods:
            m.add(sum(z[j, i, g] for g in range(ndev)) == x[j, i])
        for g in range(ndev):
            load = sum(math.ceil(st.frac[j] * 1000 - 1e-6) * z[j, i, g] for j in frac_pods)
            room = 1000 - int(fixed_milli[g])
            if (i, g) in w:
                m.add(load + 1000 * w[i, g] <= room)
            elif frac_pods:
                m.add(load <= max(room, 0))
    # PodDisruptionBudgets: evictions (from the original node) within what is still allowed.
    used = st.moves_used()
    pdbs: set[str] = {p for j in movable if (p := st.pdb_of[j]) is not None}
    for pdb in pdbs:
        members = [j for j in movable if st.pdb_of[j] == pdb]
        inside = sum(1 for j in members if st.assign[j] != st.orig[j])
        budget = st.pdb_allowed.get(pdb, 0) - (used.get(pdb, 0) - inside)
        moved = [1 - x[j, st.orig[j]] if (j, st.orig[j]) in x else 1 for j in members]
        m.add(sum(moved) <= max(budget, 0))
    # Objective: node price first (every node costs at least one unit), then evictions.
    big = len(movable) + 1
    weight = {i: int(round(st.price[i] * 100)) + 1 for i in nb}
    evict = [1 - x[j, st.orig[j]] if (j, st.orig[j]) in x else 1 for j in movable]
    m.minimize(sum(big * weight[i] * y[i] for i in nb) + sum(evict))
    for (j, i), v in x.items():
        m.add_hint(v, 1 if st.assign[j] == i else 0)
    for i in nb:
        m.add_hint(y[i], 1 if st.open[i] else 0)
    current = sum(big * weight[i] * int(st.open[i]) for i in nb) + sum(1 for j in movable if st.assign[j] != st.orig[j])
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit, 0.05)
    solver.parameters.num_workers = settings.workers
    solver.parameters.random_seed = settings.seed
    status = solver.solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE) or solver.objective_value >= current - 0.5:
        return False
    # Apply: move pods, then give whole-GPU pods and fractions the devices the solver chose.
    for j in movable:
        dest = next(i for i in nb if (j, i) in x and solver.boolean_value(x[j, i]))
        st._remove(j)
        st.assign[j] = dest
    for j in movable:
        i = st.assign[j]
        st.used[i] += st.req[j]
        st.pods_on[i].add(j)
        st.devs[j] = []
    for i in nb:
        if not st.device_level[i]:
            continue
        chosen = [g for g in range(st.nodes[i].device_level_gpus) if (i, g) in w and solver.boolean_value(w[i, g])]
        for j in movable:
            if st.assign[j] != i:
                continue
            if st.whole[j] > 0:
                st.devs[j], chosen = chosen[: st.whole[j]], chosen[st.whole[j]:]
                for g in st.devs[j]:
                    st.dev_free[i, g] -= 1.0
            elif st.frac[j] > 0:
                g = next(g for g in range(st.nodes[i].device_level_gpus) if (j, i, g) in z and solver.boolean_value(z[j, i, g]))
                st.devs[j] = [g]
                st.dev_free[i, g] -= st.frac[j]
    for i in nb:
        st.open[i] = bool(solver.boolean_value(y[i])) or any(not st.ds[j] for j in st.pods_on[i])
    assert nbset  # neighbourhood used
    return True


def _improve(st: _State, settings: PackingSettings, bound: int) -> tuple[int, int]:
    deadline = time.monotonic() + settings.time_limit_s
    rng = random.Random(settings.seed)
    improved = 0
    rounds = 0
    while time.monotonic() < deadline - 0.05:
        open_nodes = [i for i in range(len(st.nodes)) if st.open[i]]
        if len(open_nodes) <= 1 or (len(open_nodes) <= bound and rounds > 0):
            break  # at the lower bound: no node left to free
        whole_pool = len(open_nodes) <= settings.neighbourhood_nodes
        if whole_pool:
            nb = open_nodes
        else:
            drain = sorted((i for i in open_nodes if st.drainable(i)), key=st.fill)
            half = settings.neighbourhood_nodes // 2
            seeds = drain[: max(2, half // 2)] + rng.sample(drain, min(len(drain), half // 2))
            rest = [i for i in open_nodes if i not in seeds and st.target_ok[i]]
            nb = list(dict.fromkeys(seeds + rng.sample(rest, min(len(rest), settings.neighbourhood_nodes - len(set(seeds))))))
        pods_in = sum(len(st.pods_on[i]) for i in nb)
        while pods_in > settings.neighbourhood_pods and len(nb) > 2:
            nb.pop()
            pods_in = sum(len(st.pods_on[i]) for i in nb)
        remaining = deadline - time.monotonic()
        budget = remaining if whole_pool else min(remaining, max(0.5, settings.time_limit_s / 10))
        if _solve_neighbourhood(st, nb, budget, settings):
            improved += 1
        rounds += 1
        if whole_pool:
            break  # the whole pool was solved (optimal or out of time)
    return rounds, improved


# ---------------------------------------------------------------------------------------------
# public entry points


def pack_pool(nodes: Sequence[NodeShape], pods: Sequence[PodPlacement], settings: PackingSettings | None = None,
              pdb_allowed: dict[str, int] | None = None) -> PackingPlan:
    """Plan a consolidation of one node pool (``pods`` = the pods running on ``nodes``)."""
    settings = settings or PackingSettings()
    pdb_allowed = pdb_allowed or {}
    names = {n.name for n in nodes}
    pods = [p for p in pods if p.node in names]
    t0 = time.perf_counter()
    st = _State(nodes, pods, settings, pdb_allowed)
    for i in range(len(st.nodes)):  # nodes with nothing but DaemonSets are free already
        if not any(not st.ds[j] for j in st.pods_on[i]):
            st.open[i] = False
    start = _snapshot(st)
    _drain_ffd(st)
    ffd = _snapshot(st)
    ffd_plan = drain_plan = _plan_of(st, nodes, pods, "ffd")
    repack_after = -1
    solver = "ffd"
    # the better of drain-FFD and a best-fit repack (fewer nodes, then fewer evictions) starts
    # the improvement; the repack is verified like any plan
    for order_by in ("gpu", "hardest") if settings.use_repack else ():
        _restore(st, _copy(start))
        if not _repack(st, order_by):
            continue
        repack_plan = _plan_of(st, nodes, pods, "repack")
        repack_after = repack_plan.nodes_after if repack_after < 0 else min(repack_after, repack_plan.nodes_after)
        if (not check_plan(nodes, pods, repack_plan, settings, pdb_allowed)
                and (repack_plan.nodes_after, len(repack_plan.moves)) < (ffd_plan.nodes_after, len(ffd_plan.moves))):
            ffd, ffd_plan, solver = _snapshot(st), repack_plan, "repack"
    _restore(st, _copy(ffd))
    t_ffd = time.perf_counter() - t0
    rounds = improved = 0
    at_bound = ffd_plan.nodes_after <= ffd_plan.lower_bound and not ffd_plan.moves  # nothing left to gain
    if settings.use_cp_sat and settings.time_limit_s > 0 and len(nodes) > 1 and not at_bound:
        rounds, improved = _improve(st, settings, ffd_plan.lower_bound)
        solver += "+cp-sat"
    plan = _plan_of(st, nodes, pods, solver)
    if check_plan(nodes, pods, plan, settings, pdb_allowed):
        _restore(st, ffd)
        plan = ffd_plan  # never return a plan that fails its own verification
    if check_plan(nodes, pods, plan, settings, pdb_allowed):
        plan = _plan_of(_State(nodes, pods, settings, pdb_allowed), nodes, pods, "none")
    plan.stats = {
        "ffd_s": round(t_ffd, 3), "total_s": round(time.perf_counter() - t0, 3), "cp_sat_rounds": rounds, "cp_sat_improvements": improved,
        "ffd_nodes_after": drain_plan.nodes_after, "ffd_evictions": len(drain_plan.moves),
        "repack_nodes_after": repack_after,
    }
    return plan


def _snapshot(st: _State) -> tuple:
    return (st.assign.copy(), [list(d) for d in st.devs], st.open.copy(), st.used.copy(), st.dev_free.copy(),
            [set(s) for s in st.pods_on])


def _restore(st: _State, snap: tuple) -> None:
    st.assign, st.devs, st.open, st.used, st.dev_free, st.pods_on = snap


def _copy(snap: tuple) -> tuple:
    assign, devs, open_, used, dev_free, pods_on = snap
    return (assign.copy(), [list(d) for d in devs], open_.copy(), used.copy(), dev_free.copy(),
            [set(x) for x in pods_on])


def _plan_of(st: _State, nodes: Sequence[NodeShape], pods: Sequence[PodPlacement], solver: str) -> PackingPlan:
    if solver == "none":
        for i in range(len(st.nodes)):
            st.open[i] = any(not st.ds[j] for j in st.pods_on[i])
    freed = [st.nodes[i].name for i in range(len(st.nodes)) if not st.open[i]]
    moves = [Move(p.namespace, p.pod, p.node, st.nodes[st.assign[j]].name)
             for j, p in enumerate(st.pods) if st.assign[j] != st.orig[j]]
    return PackingPlan(
        cluster=nodes[0].cluster if nodes else "", node_pool=nodes[0].node_pool if nodes else "",
        nodes_before=len(nodes), nodes_after=len(nodes) - len(freed), freed_nodes=freed, moves=moves,
        lower_bound=lower_bound(nodes, pods), hourly_savings_usd=float(st.price[~st.open].sum()),
        solver=solver, unmovable_pods=int((~st.movable & ~st.ds).sum()),
        assignment={p.key: st.nodes[st.assign[j]].name for j, p in enumerate(st.pods)},
    )


def check_plan(nodes: Sequence[NodeShape], pods: Sequence[PodPlacement], plan: PackingPlan,
               settings: PackingSettings | None = None, pdb_allowed: dict[str, int] | None = None) -> list[str]:
    """Every violation of the plan, re-derived from the inputs alone (empty = valid)."""
    settings = settings or PackingSettings()
    pdb_allowed = pdb_allowed or {}
    by_name = {n.name: n for n in nodes}
    freed = set(plan.freed_nodes)
    errors: list[str] = []
    final: dict[str, list[PodPlacement]] = {n.name: [] for n in nodes}
    evictions: dict[str, int] = {}
    for p in pods:
        dest = plan.assignment.get(p.key, p.node)
        if p.is_daemonset:
            if dest != p.node:
                errors.append(f"daemonset pod {p.key} moved")
            if p.node not in freed:
                final[p.node].append(p)
            continue
        if dest in freed:
            errors.append(f"pod {p.key} left on freed node {dest}")
        if dest != p.node:
            if not is_movable(p, settings, pdb_allowed):
                errors.append(f"unmovable pod {p.key} moved")
            if not can_run_on(p, by_name[dest], by_name[p.node]) or by_name[dest].unschedulable:
                errors.append(f"pod {p.key} cannot run on {dest}")
            if p.pdb:
                evictions[p.pdb] = evictions.get(p.pdb, 0) + 1
        final[dest].append(p)
    for pdb, n in evictions.items():
        if n > pdb_allowed.get(pdb, 0):
            errors.append(f"PodDisruptionBudget {pdb}: {n} evictions > {pdb_allowed.get(pdb, 0)} allowed")
    for name, ps in final.items():
        node = by_name[name]
        totals: dict[str, float] = {}
        for p in ps:
            for k, v in p.requests.items():
                totals[k] = totals.get(k, 0.0) + v
        moved_in = any(plan.assignment.get(p.key, p.node) != p.node for p in ps)
        for k, v in totals.items():
            if v > node.allocatable.get(k, 0.0) + 1e-6 and moved_in:
                errors.append(f"node {name} over {k}: {v} > {node.allocatable.get(k, 0.0)}")
        if moved_in and node.device_level_gpus > 0 and not _devices_fit(node.device_level_gpus, ps):
            errors.append(f"node {name}: GPUs do not fit device by device")
    if plan.nodes_after < plan.lower_bound:
        errors.append(f"nodes after {plan.nodes_after} below the lower bound {plan.lower_bound}")
    return errors


def _devices_fit(ndev: int, pods: Sequence[PodPlacement]) -> bool:
    """Whole GPUs take idle devices, then fractions best-fit decreasing (exact for the cases the
    packer produces: it places fractions best-fit itself)."""
    whole = sum(p.whole_gpus for p in pods)
    fracs = sorted((p.gpu_fraction for p in pods if p.gpu_fraction > 0 and p.whole_gpus == 0), reverse=True)
    free = [1.0] * (ndev - whole) if whole <= ndev else None
    if free is None:
        return False
    for f in fracs:
        ok = [g for g in range(len(free)) if free[g] >= f - _EPS]
        if not ok:
            return _fracs_fit_exact(ndev - whole, fracs)
        g = min(ok, key=lambda g: free[g])
        free[g] -= f
    return True


def _fracs_fit_exact(ndev: int, fracs: list[float]) -> bool:
    """Bin packing of fractions into ``ndev`` unit devices by a small CP-SAT model (rarely needed)."""
    from ortools.sat.python import cp_model

    if ndev <= 0:
        return not fracs
    m = cp_model.CpModel()
    z = {(j, g): m.new_bool_var("") for j in range(len(fracs)) for g in range(ndev)}
    for j in range(len(fracs)):
        m.add_exactly_one(z[j, g] for g in range(ndev))
    for g in range(ndev):
        m.add(sum(math.ceil(fracs[j] * 1000 - 1e-6) * z[j, g] for j in range(len(fracs))) <= 1000)
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = 5
    return s.solve(m) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
