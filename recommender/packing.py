"""Consolidation packer: repack the movable pods of one node pool onto fewer nodes.

Plan only (pure; nothing is applied here). Stages:

1. **Drain-FFD**: nodes are drained cheapest-to-drain first; each drained node's movable pods are
   placed largest-first onto the first node (fullest first) where every resource fits. A node
   whose pods do not all fit is left as it was.
2. **Best-fit repacks** of the whole pool and of its emptiest 1/8 … 7/8 (the other nodes keep
   their pods and take others into their room), pods home first; then pods go back home where
   they fit, or swap home with a guest there (fewer evictions, same nodes).
3. **Node-emptying search** from drain-FFD and from the best repack: nodes are closed one at a
   time, each pod to its best fit, or by an ejection chain (a pod moved off a node to make exactly
   the room and devices needed, itself by one more ejection); undone when a node cannot be emptied.
4. **CP-SAT improvement** (large-neighbourhood search, OR-Tools): a neighbourhood of nodes is
   re-solved exactly — minimise the price of open nodes, then the number of evictions — hinted
   with the current plan, until the time limit. Small pools are one neighbourhood (the whole pool).

The best plan wins: within the eviction cap (``max_evictions_per_node_freed``; a plan over it is
not proposed) first, then fewer nodes, then fewer evictions.

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
from collections.abc import Callable, Sequence
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
    time_limit_s: float = Field(default=3.0, ge=0, description="CP-SAT improvement budget per node pool")
    use_cp_sat: bool = True
    use_repack: bool = Field(default=True, description="also try a best-fit repack of the whole pool as the start")
    allow_serving_moves: bool = False
    movable_tiers: list[str] = Field(default_factory=lambda: ["training", "batch", "interactive", "serving"])
    search_time_s: float = Field(default=2.0, ge=0, description="budget per node pool of the node-emptying search (all its starts)")
    ejection_tries: int = Field(default=40, ge=0, description="pods tried for one ejection when a pod fits nowhere")
    ejection_depth: int = Field(default=2, ge=1, description="links of an ejection chain (an ejected pod may eject one more)")
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
      GPUs need (Martello–Toth's L2 over every threshold and the pattern LP of the shares), then
      the fewest nodes whose largest capacities cover that and the CPU and memory.
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
        devices = device_lower_bound(whole, shares, pattern_lp=True)
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
        self.dev0 = np.full(n_pods, -1, int)  # each pod's first device (-1: none), for vectorised checks
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

    def _place(self, j: int, i: int, *, force: bool = False, devs: list[int] | None = None) -> None:
        if devs is None:
            devs = self._device_choice(j, i, force=force) or []
        self.used[i] += self.req[j]
        for g in devs:
            self.dev_free[i, g] -= 1.0 if self.whole[j] > 0 else self.frac[j]
        self.devs[j] = devs
        self.dev0[j] = devs[0] if devs else -1
        self.assign[j] = i
        self.pods_on[i].add(j)

    def _remove(self, j: int) -> None:
        i = self.assign[j]
        self.used[i] -= self.req[j]
        for g in self.devs[j]:
            self.dev_free[i, g] += 1.0 if self.whole[j] > 0 else self.frac[j]
        self.devs[j] = []
        self.dev0[j] = -1
        self.pods_on[i].discard(j)

    def sync_first_devices(self) -> None:
        self.dev0 = np.array([d[0] if d else -1 for d in self.devs], int).reshape(len(self.devs))

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


def _fit_mask(st: _State, j: int, allowed: np.ndarray) -> np.ndarray:
    """The ``allowed`` nodes where pod ``j`` fits now: compatibility, every resource, and the
    device-level GPU fit (vectorised over nodes)."""
    ok = allowed & st.compat[j] & np.all(st.used + st.req[j] <= st.cap + 1e-6, axis=1)
    if st.whole[j] > 0:
        ok &= ~st.device_level | ((st.dev_free >= 1.0 - _EPS).sum(axis=1) >= st.whole[j])
    elif st.frac[j] > 0:
        ok &= ~st.device_level | (st.dev_free.max(axis=1) >= st.frac[j] - _EPS)
    return ok


def _room_left(st: _State, j: int, cand: np.ndarray) -> np.ndarray:
    """Normalised room each node of ``cand`` keeps after taking pod ``j`` (the simulator's
    BestFit score, DESIGN §3): the smaller, the better the fit."""
    size = np.where(st.cap[cand] > 0, st.cap[cand], 1.0)
    room = ((st.cap[cand] - st.used[cand] - st.req[j]) / size).sum(axis=1)
    ndev = np.maximum((st.dev_free[cand] >= -0.5).sum(axis=1), 1)
    gpu = (st.dev_free[cand].clip(0).sum(axis=1) - st.whole[j] - st.frac[j]) / ndev
    return room + np.where(st.device_level[cand], gpu, 0.0)


def _first_fit(st: _State, j: int, rank: np.ndarray) -> int | None:
    """The first open node in ``rank`` order where pod ``j`` fits."""
    ok = _fit_mask(st, j, st.open & st.target_ok)
    cand = rank[ok[rank]]
    return int(cand[0]) if cand.size else None


def _best_fit(st: _State, j: int) -> int | None:
    """The open node where pod ``j`` fits with the least room left."""
    cand = np.flatnonzero(_fit_mask(st, j, st.open & st.target_ok))
    return int(cand[np.argmin(_room_left(st, j, cand))]) if cand.size else None


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
        log: _Log = []
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
            _logged_move(st, j, dest, log)
            if pdb is not None and st.orig[j] == c:
                budget[pdb] = budget.get(pdb, 0) + 1
        if not ok:  # back onto the devices they held: a fresh best fit in reverse order may not find room
            _undo(st, log)
            st.open[c] = True


# ---------------------------------------------------------------------------------------------
# stage 3: empty nodes one at a time, making room by ejection chains (local search)

_Log = list[tuple[int, int, list[int]]]  # (pod, node it was on, its devices there): the undo log


def _logged_move(st: _State, j: int, dest: int, log: _Log) -> None:
    log.append((j, int(st.assign[j]), list(st.devs[j])))
    st.move(j, dest)


def _undo(st: _State, log: _Log) -> None:
    for j, node, devs in reversed(log):
        st._remove(j)
        st._place(j, node, devs=devs)
    log.clear()


def _eject_for(st: _State, j: int, log: _Log, tries: int, depth: int = 1, in_hand: bool = False) -> bool:
    """Make room for pod ``j`` on an open node by moving one of its pods (``k``) to another open
    node, itself by one more such ejection while ``depth`` allows: the nodes where ``j`` would fit
    without ``k`` (every resource, the devices) are tried, the smallest ``k`` first, up to
    ``tries`` of them. ``in_hand``: ``j`` is off its node already (an inner link of the chain).
    True when the chain was made; otherwise the state is as it was."""
    on = st.assign
    cand = np.flatnonzero(st.movable & ~st.ds & st.open[on] & st.target_ok[on] & st.compat[j, on] & (on != on[j])
                          & np.all(st.used[on] - st.req + st.req[j] <= st.cap[on] + 1e-6, axis=1))
    cand = cand[_frees_device_for(st, j, cand)]
    if st.has_pdb:
        cand = np.array([k for k in cand if st.pdb_of[k] is None], int)
    capmax = np.maximum(st.cap.max(axis=0), _EPS)
    small_first = cand[np.argsort(st.whole[cand] + st.frac[cand] + (st.req[cand] / capmax).sum(axis=1), kind="stable")]
    for k in (int(k) for k in small_first[:tries]):
        i, devs_k = int(on[k]), list(st.devs[k])
        st._remove(k)
        if st.fits(j, i) and _rehome(st, k, i, log, tries, depth):
            log.append((k, i, devs_k))
            if in_hand:
                st._place(j, i)
            else:
                _logged_move(st, j, i, log)
            return True
        st._place(k, i, devs=devs_k)
    return False


def _rehome(st: _State, k: int, i: int, log: _Log, tries: int, depth: int) -> bool:
    """Place the ejected pod ``k`` (off node ``i``, which it may not return to) where it fits
    best, or by a further ejection while ``depth`` allows."""
    st.open[i] = False
    dest = _best_fit(st, k)
    if dest is not None:
        st._place(k, dest)
    ok = dest is not None or (depth > 1 and _eject_for(st, k, log, max(1, tries // 4), depth - 1, in_hand=True))
    st.open[i] = True
    return ok


def _frees_device_for(st: _State, j: int, cand: np.ndarray) -> np.ndarray:
    """For each pod ``k`` of ``cand``: would pod ``j`` find its devices on ``k``'s node once ``k``
    left? (Device level only; a whole-GPU ``k`` frees whole devices, a share its device's room.)"""
    i = st.assign[cand]
    if st.whole[j] == 0 and st.frac[j] == 0:
        return np.ones(cand.size, bool)
    g = np.maximum(st.dev0[cand], 0)
    after = np.where(st.whole[cand] > 0, 1.0, st.dev_free[i, g] + st.frac[cand])  # k's (first) device, k gone
    after = np.where(st.dev0[cand] >= 0, after, -1.0)
    if st.whole[j] > 0:
        idle = (st.dev_free[i] >= 1.0 - _EPS).sum(axis=1)
        gained = np.where(st.whole[cand] > 0, st.whole[cand], after >= 1.0 - _EPS)
        ok = idle + gained >= st.whole[j]
    else:
        ok = np.maximum(st.dev_free[i].max(axis=1), after) >= st.frac[j] - _EPS
    return ok | ~st.device_level[i]


def _ejection_phases(tries: int, depth: int) -> list[tuple[int, int]]:
    """(tries, depth) of the ejections to try in turn: one link with every try first, then the
    longer chains with fewer tries per link (their cost multiplies)."""
    return [(tries, 1)] + [(max(1, tries // 4), d) for d in range(2, depth + 1)]


def _try_empty(st: _State, c: int, max_evictions: float, tries: int, depth: int) -> bool:
    """Close node ``c`` by moving each of its pods (largest first) to the open node it fits best,
    or with one ejection; undone unless all leave within ``max_evictions`` new evictions."""
    before = int((st.assign != st.orig).sum())
    st.open[c] = False
    log: _Log = []
    for j in sorted((j for j in st.pods_on[c] if not st.ds[j]), key=lambda j: -_size_key(st, j)):
        if st.pdb_of[j] is not None:
            break
        dest = _best_fit(st, j)
        if dest is not None:
            _logged_move(st, j, dest, log)
        elif not any(_eject_for(st, j, log, t, d) for t, d in _ejection_phases(tries, depth)):
            break
        if int((st.assign != st.orig).sum()) - before > max_evictions:
            break
    else:
        return True
    _undo(st, log)
    st.open[c] = True
    return False


def _empty_nodes(st: _State, settings: PackingSettings, max_evictions: float, deadline: float) -> int:
    """Stage 3: passes over the open drainable nodes (fewest pods, emptiest first), closing each
    that :func:`_try_empty` can, until a pass closes none or the ``deadline`` (monotonic clock)
    passes. Returns the number of nodes closed."""
    closed = 0
    progress = True
    while progress:
        progress = False
        order = sorted((i for i in range(len(st.nodes)) if st.open[i] and st.drainable(i)),
                       key=lambda i: (sum(1 for j in st.pods_on[i] if not st.ds[j]), st.fill(i)))
        for c in order:
            if time.monotonic() > deadline:
                return closed
            if st.open[c] and _try_empty(st, c, max_evictions, settings.ejection_tries, settings.ejection_depth):
                closed += 1
                progress = True
    return closed


# ---------------------------------------------------------------------------------------------
# stage 2: best-fit repacks (the whole pool or its emptiest part), then pods back home


def _repack(st: _State, order_by: str = "gpu", among: set[int] | None = None, home_first: bool = False) -> bool:
    """Every movable pod (of the nodes ``among``; None = all) taken off and placed again, largest
    GPU request first, on the open node
    it fits best (least normalised room left: the simulator's BestFit score, DESIGN §3), a node
    opening only when none fits (the biggest first; the pod's own node when it is one of them).
    Nodes of one shape are then relabelled so that each keeps as many of its own pods as
    possible. The other nodes keep their pods and take others into their room first (a partial
    repack: fewer evictions). Returns False (state untouched) when a pod fits nowhere or a
    PodDisruptionBudget is involved (the drain stage respects those budgets move by move)."""
    if st.has_pdb:
        return False
    snap = _snapshot(st)
    opened0 = st.open.copy()
    movable = [j for j in range(len(st.pods))
               if st.movable[j] and not st.ds[j] and (among is None or st.assign[j] in among)]
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
    node_rank = np.lexsort((-(st.cap / capmax).sum(axis=1), -st.dev_free.clip(0).sum(axis=1)))
    opened = fixed.copy()
    ok_all = st.target_ok | fixed
    for j in order:
        fit = _fit_mask(st, j, ok_all)
        cand = np.flatnonzero(fit & opened)
        if home_first and opened[st.orig[j]] and fit[st.orig[j]]:
            i = int(st.orig[j])
        elif cand.size:
            i = int(cand[np.argmin(_room_left(st, j, cand))])
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
# stage 4: CP-SAT large-neighbourhood search


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
    st.sync_first_devices()
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
              pdb_allowed: dict[str, int] | None = None, max_evictions_per_node_freed: float | None = None) -> PackingPlan:
    """Plan a consolidation of one node pool (``pods`` = the pods running on ``nodes``).

    The start is the best verified one of drain-FFD and the best-fit repacks, then the
    node-emptying search, then CP-SAT. "Best": within ``max_evictions_per_node_freed`` (a plan
    that churns more is not proposed; None = no cap) first, then fewer nodes, then fewer
    evictions. A stage's result that is not better is dropped."""
    settings = settings or PackingSettings()
    pdb_allowed = pdb_allowed or {}
    cap = math.inf if max_evictions_per_node_freed is None else max_evictions_per_node_freed
    names = {n.name for n in nodes}
    pods = [p for p in pods if p.node in names]
    t0 = time.perf_counter()
    st = _State(nodes, pods, settings, pdb_allowed)
    for i in range(len(st.nodes)):  # nodes with nothing but DaemonSets are free already
        if not any(not st.ds[j] for j in st.pods_on[i]):
            st.open[i] = False
    start = _snapshot(st)
    bound = lower_bound(nodes, pods)

    def verified(solver: str) -> PackingPlan | None:
        plan = _plan_of(st, nodes, pods, solver, bound)
        return None if check_plan(nodes, pods, plan, settings, pdb_allowed) else plan

    _drain_ffd(st)
    drain = (_snapshot(st), _plan_of(st, nodes, pods, "ffd", bound))
    repack, repack_after = _best_repack(st, start, settings, cap, verified)
    t_start = time.perf_counter() - t0
    best, best_plan, closed = _best_searched(st, [drain] + ([repack] if repack else []), settings, cap, verified)
    _restore(st, _copy(best))
    t_search = time.perf_counter() - t0 - t_start
    rounds = improved = 0
    at_bound = best_plan.nodes_after <= best_plan.lower_bound and not best_plan.moves  # nothing left to gain
    if settings.use_cp_sat and settings.time_limit_s > 0 and len(nodes) > 1 and not at_bound:
        rounds, improved = _improve(st, settings, best_plan.lower_bound)
        plan = verified(best_plan.solver + "+cp-sat")  # never return a plan that fails its own verification
        if plan is not None and _rank(plan, cap) <= _rank(best_plan, cap):
            best_plan = plan
    if check_plan(nodes, pods, best_plan, settings, pdb_allowed):
        best_plan = _plan_of(_State(nodes, pods, settings, pdb_allowed), nodes, pods, "none", bound)
    best_plan.stats = {
        "start_s": round(t_start, 3), "search_s": round(t_search, 3), "total_s": round(time.perf_counter() - t0, 3),
        "search_closed": closed, "cp_sat_rounds": rounds, "cp_sat_improvements": improved,
        "ffd_nodes_after": drain[1].nodes_after, "ffd_evictions": len(drain[1].moves),
        "repack_nodes_after": repack_after,
    }
    return best_plan


_Start = tuple[tuple, PackingPlan]  # a state snapshot and its plan


def _best_repack(st: _State, start: tuple, settings: PackingSettings, cap: float,
                 verified: Callable[[str], PackingPlan | None]) -> tuple[_Start | None, int]:
    """The best verified repack of :func:`_repack_variants` from ``start`` (pods then sent home),
    and the fewest nodes any repack reached (-1: none succeeded)."""
    best: _Start | None = None
    fewest = -1
    for order_by, among, home_first in _repack_variants(st, settings):
        _restore(st, _copy(start))
        if not _repack(st, order_by, among, home_first):
            continue
        _fewer_evictions(st)
        plan = verified("repack")
        if plan is None:
            continue
        fewest = plan.nodes_after if fewest < 0 else min(fewest, plan.nodes_after)
        if best is None or _rank(plan, cap) < _rank(best[1], cap):
            best = (_snapshot(st), plan)
    return best, fewest


def _best_searched(st: _State, starts: list[_Start], settings: PackingSettings, cap: float,
                   verified: Callable[[str], PackingPlan | None]) -> tuple[tuple, PackingPlan, int]:
    """The best of the ``starts`` (the first is the default) and of the node-emptying search from
    each of them, all within ``search_time_s``: (snapshot, plan, nodes the search closed for it)."""
    best, best_plan = starts[0]
    closed = 0
    deadline = time.monotonic() + settings.search_time_s
    for snap, plan in starts:
        _restore(st, _copy(snap))
        n_closed = _empty_nodes(st, settings, cap, deadline) if time.monotonic() < deadline else 0
        _fewer_evictions(st)
        searched = verified(plan.solver + "+search") if n_closed else None
        if _rank(plan, cap) < _rank(best_plan, cap):
            best, best_plan, closed = snap, plan, 0
        if searched is not None and _rank(searched, cap) < _rank(best_plan, cap):
            best, best_plan, closed = _snapshot(st), searched, n_closed
    return best, best_plan, closed


def _return_home(st: _State) -> int:
    """Pods moved away from a node that stays open go back where they fit there (largest
    first, until a pass returns none): the same nodes, fewer evictions. Returns how many."""
    back = 0
    while True:
        away = [j for j in range(len(st.pods)) if st.assign[j] != st.orig[j] and st.open[st.orig[j]]]
        home = [j for j in sorted(away, key=lambda j: -_size_key(st, j)) if st.fits(j, int(st.orig[j])) and _go_home(st, j)]
        back += len(home)
        if not home:
            return back


def _fewer_evictions(st: _State) -> None:
    """:func:`_return_home` and :func:`_swap_home` in turn until neither changes anything."""
    while _return_home(st) + _swap_home(st):
        pass


def _swap_home(st: _State) -> int:
    """A pod away from its (open) home trades places with a guest of that home (a pod not on its
    own node): one eviction fewer, two when the guest lands on its own home. Returns the swaps."""
    swaps = 0
    away = [j for j in range(len(st.pods)) if st.assign[j] != st.orig[j] and st.open[st.orig[j]] and st.pdb_of[j] is None]
    for j in sorted(away, key=lambda j: -_size_key(st, j)):
        home, here = int(st.orig[j]), int(st.assign[j])
        guests = [k for k in st.pods_on[home] if st.assign[k] != st.orig[k] and st.movable[k] and st.pdb_of[k] is None
                  and st.compat[k, here] and (st.target_ok[here] or here == st.orig[k])]
        swaps += any(_swap(st, j, k) for k in guests)
    return swaps


def _swap(st: _State, j: int, k: int) -> bool:
    """Pods ``j`` and ``k`` trade nodes when both fit so; otherwise nothing changes."""
    a, b = int(st.assign[j]), int(st.assign[k])
    devs_j, devs_k = list(st.devs[j]), list(st.devs[k])
    st._remove(j)
    st._remove(k)
    if st.fits(j, b):
        st._place(j, b)
        if st.fits(k, a):
            st._place(k, a)
            return True
        st._remove(j)
    st._place(j, a, devs=devs_j)
    st._place(k, b, devs=devs_k)
    return False


def _go_home(st: _State, j: int) -> bool:
    if st.pdb_of[j] is not None or not st.fits(j, int(st.orig[j])):  # a pod moved earlier may have taken the room
        return False
    st.move(j, int(st.orig[j]))
    return True


def _repack_variants(st: _State, settings: PackingSettings) -> list[tuple[str, set[int] | None, bool]]:
    """The repacks to try (pod order, nodes repacked, pods home first): GPUs first with pods home
    first over the whole pool and over its emptiest 1/8, 2/8, ..., 7/8 of the nodes (drain
    order: fewest pods, then least full), and the hardest first over the whole pool."""
    if not settings.use_repack:
        return []
    drain = sorted((i for i in range(len(st.nodes)) if st.open[i] and st.drainable(i)),
                   key=lambda i: (sum(1 for j in st.pods_on[i] if not st.ds[j]), st.fill(i)))
    subsets: list[set[int] | None] = [None]
    if len(drain) >= 8:
        subsets += [set(drain[: len(drain) * q // 8]) for q in range(1, 8)]
    return [("gpu", among, True) for among in subsets] + [("hardest", None, False)]


def _rank(plan: PackingPlan, max_evictions_per_node_freed: float) -> tuple[bool, int, int]:
    """Plans compare by: within the eviction cap, nodes after, evictions (smaller is better)."""
    return plan.evictions_per_node_freed > max_evictions_per_node_freed, plan.nodes_after, len(plan.moves)


def _snapshot(st: _State) -> tuple:
    return (st.assign.copy(), [list(d) for d in st.devs], st.open.copy(), st.used.copy(), st.dev_free.copy(),
            [set(s) for s in st.pods_on])


def _restore(st: _State, snap: tuple) -> None:
    st.assign, st.devs, st.open, st.used, st.dev_free, st.pods_on = snap
    st.sync_first_devices()


def _copy(snap: tuple) -> tuple:
    assign, devs, open_, used, dev_free, pods_on = snap
    return (assign.copy(), [list(d) for d in devs], open_.copy(), used.copy(), dev_free.copy(),
            [set(x) for x in pods_on])


def _plan_of(st: _State, nodes: Sequence[NodeShape], pods: Sequence[PodPlacement], solver: str, bound: int) -> PackingPlan:
    if solver == "none":
        for i in range(len(st.nodes)):
            st.open[i] = any(not st.ds[j] for j in st.pods_on[i])
    freed = [st.nodes[i].name for i in range(len(st.nodes)) if not st.open[i]]
    moves = [Move(p.namespace, p.pod, p.node, st.nodes[st.assign[j]].name)
             for j, p in enumerate(st.pods) if st.assign[j] != st.orig[j]]
    return PackingPlan(
        cluster=nodes[0].cluster if nodes else "", node_pool=nodes[0].node_pool if nodes else "",
        nodes_before=len(nodes), nodes_after=len(nodes) - len(freed), freed_nodes=freed, moves=moves,
        lower_bound=bound, hourly_savings_usd=float(st.price[~st.open].sum()),
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
