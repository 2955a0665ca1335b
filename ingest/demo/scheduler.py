"""A small event-driven scheduler: places each pod on a node and on concrete devices.

Best-fit on GPUs (the node with the fewest free whole GPUs that still fits, the device with the
least free share that still fits), then CPU and memory; pools by sharing mode. A pod that fits
nowhere waits ``Pending`` (retried every few minutes) and is given up after ``max_pending_s``.
Spot nodes that leave take their pods with them. Devices are tracked so telemetry can follow them.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from ingest.demo.catalog import MIG_PROFILES
from ingest.demo.fleet import FRACTIONAL_SLOTS, TIMESLICE_REPLICAS, Node
from ingest.demo.workload import PodSpec

__all__ = ["ClusterLayout", "ScheduleStats", "schedule"]

_EPS = 1e-6
_RETRY_S = 300.0
_MODE_CODE = {"whole": 0, "mig": 1, "timeslice": 2, "fractional": 3, "cpu": 4}
_PROFILE_CODE = {name: i for i, name in enumerate(MIG_PROFILES)}


@dataclass
class ClusterLayout:
    """Device and MIG-instance tables of one cluster (ids index these arrays)."""

    dev_node: np.ndarray  # device id -> node index
    dev_index: np.ndarray  # device id -> GPU index on its node
    inst_node: np.ndarray  # MIG instance id -> node index
    inst_dev: np.ndarray  # MIG instance id -> device id
    inst_profile: np.ndarray  # MIG instance id -> profile code
    inst_gi: np.ndarray  # MIG instance id -> GPU_I_ID

    @classmethod
    def of(cls, nodes: list[Node]) -> ClusterLayout:
        dev_node: list[int] = []
        dev_index: list[int] = []
        inst_node: list[int] = []
        inst_dev: list[int] = []
        inst_prof: list[int] = []
        inst_gi: list[int] = []
        for i, n in enumerate(nodes):
            base = len(dev_node)
            for g in range(n.gpu_count):
                dev_node.append(i)
                dev_index.append(g)
            for inst in n.mig_instances:
                inst_node.append(i)
                inst_dev.append(base + inst.gpu)
                inst_prof.append(_PROFILE_CODE[inst.profile])
                inst_gi.append(inst.gi_id)
        a = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
        return cls(a(dev_node), a(dev_index), a(inst_node), a(inst_dev), a(inst_prof), a(inst_gi))


@dataclass
class ScheduleStats:
    placed: int = 0
    gave_up: int = 0
    waited: int = 0
    evicted: int = 0


def schedule(nodes: list[Node], pods: list[PodSpec], window_end: float, *, max_pending_s: float = 3 * 3600) -> tuple[ClusterLayout, ScheduleStats]:
    """Fill in ``sched``, ``deleted``, ``node`` and ``devices`` of every pod (in place)."""
    lay = ClusterLayout.of(nodes)
    st = _State(nodes, lay)
    stats = ScheduleStats()
    events: list[tuple[float, int, int, int]] = []  # (time, kind, seq, payload)
    seq = 0

    def push(t: float, kind: int, payload: int) -> None:
        nonlocal seq
        heapq.heappush(events, (t, kind, seq, payload))
        seq += 1

    # kinds, in the order they apply at the same instant
    DEPART, LEAVE, JOIN, CORDON, UNCORDON, ARRIVE, RETRY = range(7)
    for i, n in enumerate(nodes):
        if n.join_s > -math.inf:
            st.active[i] = False
            push(n.join_s, JOIN, i)
        if n.leave_s < math.inf:
            push(n.leave_s, LEAVE, i)
        if n.cordon:
            push(n.cordon[0], CORDON, i)
            push(n.cordon[1], UNCORDON, i)
    for k, p in enumerate(pods):
        if p.created < window_end:
            push(p.created, ARRIVE, k)
    pending: list[int] = []
    retry_armed = False
    while events:
        t, kind, _, x = heapq.heappop(events)
        if t >= window_end:
            break
        if kind == DEPART:
            p = pods[x]
            if p.node >= 0 and p.deleted == t and x in st.on_node[p.node]:
                st.release(p, x)
        elif kind == LEAVE:
            st.active[x] = False
            for k in list(st.on_node[x]):
                p = pods[k]
                p.deleted = t
                st.release(p, k)
                stats.evicted += 1
        elif kind == JOIN:
            st.active[x] = True
        elif kind == CORDON:
            st.cordoned[x] = True
        elif kind == UNCORDON:
            st.cordoned[x] = False
        elif kind == ARRIVE:
            p = pods[x]
            if st.place(p, x, t):
                stats.placed += 1
                p.deleted = min(window_end, t + p.duration)
                push(p.deleted, DEPART, x)
            else:
                pending.append(x)
                stats.waited += 1
                if not retry_armed:
                    push(t + _RETRY_S, RETRY, 0)
                    retry_armed = True
        elif kind == RETRY:
            retry_armed = False
            still: list[int] = []
            failed: set[tuple] = set()
            for k in sorted(pending, key=lambda k: (-pods[k].priority, pods[k].created)):
                p = pods[k]
                if t - p.created >= max_pending_s:
                    p.deleted = p.created + max_pending_s
                    stats.gave_up += 1
                    continue
                shape = (p.cls, p.n_gpu, p.mig_profile, p.milli)
                if shape not in failed and st.place(p, k, t):
                    stats.placed += 1
                    p.deleted = min(window_end, t + p.duration)
                    push(p.deleted, DEPART, k)
                else:
                    failed.add(shape)
                    still.append(k)
            pending = still
            if pending:
                push(t + _RETRY_S, RETRY, 0)
                retry_armed = True
    for k in pending:  # still waiting at the window's end or gave up inside it
        p = pods[k]
        p.deleted = min(window_end, p.created + max_pending_s)
    for p in pods:
        if math.isnan(p.deleted):
            p.deleted = window_end if p.created < window_end else p.created
    return lay, stats


class _State:
    def __init__(self, nodes: list[Node], lay: ClusterLayout):
        n = len(nodes)
        self.nodes = nodes
        self.lay = lay
        self.mode = np.array([_MODE_CODE[x.mode] for x in nodes], dtype=np.int64)
        self.free_cpu = np.array([x.alloc_cpu for x in nodes], dtype=float)
        self.free_mem = np.array([x.alloc_memory for x in nodes], dtype=float)
        self.active = np.ones(n, dtype=bool)
        self.cordoned = np.zeros(n, dtype=bool)
        d = len(lay.dev_node)
        self.dev_free = np.full(d, 1000, dtype=np.int64)  # milli-GPU free per device
        self.dev_slots = np.zeros(d, dtype=np.int64)  # pods sharing the device
        slot_limit = {"timeslice": TIMESLICE_REPLICAS, "fractional": FRACTIONAL_SLOTS}
        self.dev_slot_limit = np.array([slot_limit.get(nodes[i].mode, 1) for i in lay.dev_node], dtype=np.int64)
        self.whole_free = np.array([x.gpu_count if x.mode == "whole" else 0 for x in nodes], dtype=np.int64)
        self.share_max = np.array([1000 if x.mode in ("timeslice", "fractional") and x.gpu_count else 0 for x in nodes], dtype=np.int64)
        self.inst_busy = np.zeros(len(lay.inst_node), dtype=bool)
        self.node_devs = [np.flatnonzero(lay.dev_node == i) for i in range(n)]
        self.on_node: list[set[int]] = [set() for _ in range(n)]
        # CPU pods (and system Deployments) use the CPU pool; a fleet without one runs them anywhere
        self.cpu_pool = self.mode == 4 if (self.mode == 4).any() else np.ones(n, dtype=bool)

    def _ok(self, p: PodSpec) -> np.ndarray:
        return self.active & ~self.cordoned & (self.free_cpu >= p.cpu - _EPS) & (self.free_mem >= p.memory - _EPS)

    def place(self, p: PodSpec, k: int, t: float) -> bool:
        if p.pin_node is not None:
            node = p.pin_node
            if not self.active[node]:
                return False
            self._take(p, k, node, [])
            p.sched = t
            return True
        ok = self._ok(p)
        devices: list[int] = []
        if p.cls == "whole":
            cand = np.flatnonzero(ok & (self.mode == 0) & (self.whole_free >= p.n_gpu))
            if not len(cand):
                return False
            node = int(cand[np.argmin(self.whole_free[cand])])
            devs = self.node_devs[node]
            devices = [int(d) for d in devs[self.dev_free[devs] == 1000][: p.n_gpu]]
            self.dev_free[devices] = 0
            self.whole_free[node] -= p.n_gpu
        elif p.cls in ("timeslice", "fractional"):
            code = _MODE_CODE[p.cls]
            cand = np.flatnonzero(ok & (self.mode == code) & (self.share_max >= p.milli))
            if not len(cand):
                return False
            node = int(cand[np.argmin(self.share_max[cand])])
            devs = self.node_devs[node]
            fits = devs[(self.dev_free[devs] >= p.milli) & (self.dev_slots[devs] < self.dev_slot_limit[devs])]
            dev = int(fits[np.argmin(self.dev_free[fits])])
            self.dev_free[dev] -= p.milli
            self.dev_slots[dev] += 1
            devices = [dev]
            self._refresh_share(node)
        elif p.cls == "mig":
            code = _PROFILE_CODE[p.mig_profile or ""]
            lay = self.lay
            cand = np.flatnonzero(~self.inst_busy & (lay.inst_profile == code) & ok[lay.inst_node])
            if not len(cand):
                return False
            # pack: prefer the node that already has the most busy instances
            busy_per_node = np.bincount(lay.inst_node[self.inst_busy], minlength=len(self.nodes))
            inst = int(cand[np.argmax(busy_per_node[lay.inst_node[cand]])])
            node = int(lay.inst_node[inst])
            self.inst_busy[inst] = True
            devices = [inst]
        else:  # cpu
            cand = np.flatnonzero(ok & self.cpu_pool)
            if not len(cand):
                return False
            node = int(cand[np.argmin(self.free_cpu[cand])])
        self._take(p, k, node, devices)
        p.sched = t
        return True

    def _take(self, p: PodSpec, k: int, node: int, devices: list[int]) -> None:
        self.free_cpu[node] -= p.cpu
        self.free_mem[node] -= p.memory
        p.node = node
        p.devices = devices
        self.on_node[node].add(k)

    def _refresh_share(self, node: int) -> None:
        devs = self.node_devs[node]
        usable = devs[self.dev_slots[devs] < self.dev_slot_limit[devs]]
        self.share_max[node] = int(self.dev_free[usable].max()) if len(usable) else 0

    def release(self, p: PodSpec, k: int) -> None:
        node = p.node
        self.free_cpu[node] += p.cpu
        self.free_mem[node] += p.memory
        if p.cls == "whole":
            self.dev_free[p.devices] = 1000
            self.whole_free[node] += len(p.devices)
        elif p.cls in ("timeslice", "fractional"):
            for d in p.devices:
                self.dev_free[d] += p.milli
                self.dev_slots[d] -= 1
            self._refresh_share(node)
        elif p.cls == "mig":
            self.inst_busy[p.devices] = False
        self.on_node[node].discard(k)
