"""Kubernetes snapshots (``k8s_nodes``, ``k8s_pods``, ``k8s_namespaces``) for one cluster-day.

Each object is built once as a static Arrow row per state (a pod Pending or Running, a node
schedulable or cordoned); a day's snapshots are then index arrays and one ``take()``.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from ingest.demo.fleet import Node
from ingest.demo.telemetry import expand_intervals
from ingest.demo.workload import PodSpec, namespace_objects
from ingest.schema import TABLES, TS

__all__ = ["ClusterSnapshots"]

_UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "value": None, "effect": "NoSchedule"}


def _ts(seconds: float | None):
    if seconds is None or not math.isfinite(seconds):
        return None
    return int(round(seconds * 1_000_000))


class ClusterSnapshots:
    def __init__(self, nodes: list[Node], pods: list[PodSpec], window_start: float):
        self.nodes = nodes
        self.pods = pods
        self.window_start = window_start
        self._node_table = self._static_nodes()
        # node states: row 2i = schedulable, 2i+1 = cordoned
        self.n_join = np.array([n.join_s for n in nodes], dtype=np.float64)
        self.n_leave = np.array([n.leave_s for n in nodes], dtype=np.float64)
        self.created = np.array([p.created for p in pods], dtype=np.float64)
        self.sched = np.array([p.sched for p in pods], dtype=np.float64)
        self.deleted = np.array([p.deleted for p in pods], dtype=np.float64)
        ns = namespace_objects()
        self._ns_table = pa.Table.from_pylist(
            [{"namespace": n, "labels": list(lab.items()), "annotations": list(ann.items())} for n, lab, ann in ns],
            schema=pa.schema([f for f in TABLES["k8s_namespaces"].schema if f.name != "snapshot_ts"]),
        )

    # -- nodes ------------------------------------------------------------------------------------
    def _static_nodes(self) -> pa.Table:
        rows = []
        for n in self.nodes:
            for cordoned in (False, True):
                taints = list(n.taints) + ([_UNSCHEDULABLE] if cordoned else [])
                rows.append({
                    "node": n.name, "uid": n.uid, "provider": n.provider, "provider_id": n.provider_id,
                    "instance_type": n.instance_type, "region": n.region, "zone": n.zone,
                    "capacity_type": n.capacity_type, "node_pool": n.pool, "labels": list(n.labels.items()),
                    "annotations": [("cluster-autoscaler.kubernetes.io/scale-down-disabled", "false")],
                    "taints": taints, "unschedulable": cordoned,
                    "capacity": list(n.capacity.items()), "allocatable": list(n.allocatable.items()),
                    "gpu_product": n.labels.get("nvidia.com/gpu.product"),
                    "gpu_count": n.gpu_count or None, "gpu_memory_mib": int(n.labels["nvidia.com/gpu.memory"]) if n.gpu_count else None,
                    "gpu_replicas": n.gpu_replicas, "mig_config": n.mig_config, "mig_strategy": n.mig_strategy,
                })
        schema = pa.schema([f for f in TABLES["k8s_nodes"].schema if f.name != "snapshot_ts"])
        return pa.Table.from_pylist(rows, schema=schema)

    def k8s_nodes(self, d0: float, d1: float, step: int) -> pa.Table:
        grid = d0 + step * np.arange(int(np.ceil((d1 - d0) / step)))
        alive = (grid[None, :] >= self.n_join[:, None]) & (grid[None, :] < self.n_leave[:, None])
        k, node_i = np.nonzero(alive.T)  # ordered by snapshot, then node
        cordoned = np.zeros(len(node_i), bool)
        for i, n in enumerate(self.nodes):
            if n.cordon:
                sel = node_i == i
                t = grid[k[sel]]
                cordoned[sel] = (t >= n.cordon[0]) & (t < n.cordon[1])
        rows = self._node_table.take(pa.array(2 * node_i + cordoned))
        return _with_ts(rows, d0, k, step)

    # -- namespaces -------------------------------------------------------------------------------
    def k8s_namespaces(self, d0: float, d1: float, step: int) -> pa.Table:
        n = int(np.ceil((d1 - d0) / step))
        k = np.repeat(np.arange(n), self._ns_table.num_rows)
        rows = self._ns_table.take(pa.array(np.tile(np.arange(self._ns_table.num_rows), n)))
        return _with_ts(rows, d0, k, step)

    # -- pods -------------------------------------------------------------------------------------
    def k8s_pods(self, d0: float, d1: float, step: int) -> pa.Table:
        n = int(np.ceil((d1 - d0) / step))
        # pod states as intervals on the snapshot grid: pending [created, sched|deleted), running [sched, deleted)
        scheduled = ~np.isnan(self.sched)
        pend_end = np.where(scheduled, self.sched, self.deleted)
        run_start = np.where(scheduled, self.sched, np.inf)

        def grid(t: np.ndarray) -> np.ndarray:
            return np.clip(np.ceil((t - d0) / step), 0, n).astype(np.int64)

        alive = (self.created < d1) & (self.deleted > d0)
        idx = np.flatnonzero(alive)
        lo_p, hi_p = grid(self.created[idx]), grid(pend_end[idx])
        lo_r, hi_r = grid(np.minimum(run_start[idx], 4e18)), grid(self.deleted[idx])
        lo_r = np.where(scheduled[idx], lo_r, 0)
        hi_r = np.where(scheduled[idx], hi_r, 0)
        # static rows of today's pods: 2j = pending, 2j+1 = running
        static = self._static_pods(idx)
        rep_p, k_p = expand_intervals(lo_p, hi_p)
        rep_r, k_r = expand_intervals(lo_r, hi_r)
        rows_i = np.concatenate([2 * rep_p, 2 * rep_r + 1])
        k = np.concatenate([k_p, k_r])
        order = np.argsort(k, kind="stable")
        rows = static.take(pa.array(rows_i[order]))
        return _with_ts(rows, d0, k[order], step)

    def _static_pods(self, idx: np.ndarray) -> pa.Table:
        rows = []
        for i in idx:
            p = self.pods[int(i)]
            containers = [
                {"name": name, "requests": list(req.items()), "limits": list(lim.items())}
                for name, req, lim in p.containers
            ]
            common = {
                "namespace": p.namespace, "pod": p.name, "uid": p.uid, "qos_class": p.qos_class,
                "priority": p.priority, "priority_class": p.priority_class, "owner_kind": p.owner_kind,
                "owner_name": p.owner_name, "labels": list(p.labels.items()),
                "annotations": list(p.annotations.items()), "containers": containers, "init_containers": [],
            }
            node = self.nodes[p.node].name if p.node >= 0 else None
            rows.append({**common, "node": None, "phase": "Pending", "start_time": None})
            rows.append({**common, "node": node, "phase": "Running", "start_time": _ts(p.sched)})
        schema = pa.schema([f for f in TABLES["k8s_pods"].schema if f.name != "snapshot_ts"])
        return pa.Table.from_pylist(rows, schema=schema)


def _with_ts(rows: pa.Table, d0: float, k: np.ndarray, step: int) -> pa.Table:
    ts = np.int64(round(d0 * 1_000_000)) + k.astype(np.int64) * step * 1_000_000
    return rows.add_column(0, pa.field("snapshot_ts", TS), pa.array(ts, type=TS))
