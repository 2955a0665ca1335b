"""Land the bench's synthetic fleet (nodes, pod snapshots, namespaces, a price) in a lake through
the real :class:`ingest.lake.LakeWriter`, so the warehouse build sees what a cluster collector would.

One run per (cluster, day). Every node and every pod holding GPUs is snapshotted each ``step_s``
seconds: a snapshot at t_k covers [t_k, t_k+1) (DESIGN §3), so a pod present in the snapshots of
minutes [start, end) is allocated exactly ``gpus × (end − start) × step_s`` GPU-seconds — the same
minutes its request series and DCGM samples exist in Prometheus. Rows are built column-wise
(a one-row-per-object template repeated with ``take``): a week of a 200-GPU fleet is ~1 M rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa

from ingest.lake import LakeWriter
from ingest.schema import TS

__all__ = ["FleetPod", "land_fleet", "INSTANCE_TYPE", "GPUS_PER_NODE"]

GPUS_PER_NODE = 8
INSTANCE_TYPE = "p5.48xlarge"
_GIB = float(1 << 30)
_NODE_USD_PER_HOUR = 98.32  # list on-demand price of the instance type (us-east-1); any value would do
_GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"


class FleetPod(Protocol):
    """What the lake needs of a bench pod (bench.promql_vs_warehouse._Pod has these)."""

    namespace: str
    name: str
    node: str
    gpus: list[int]
    start: int  # snapshot index, inclusive
    end: int  # snapshot index, exclusive


def _node_template(nodes: int) -> pa.Table:
    cap = {"cpu": 192.0, "memory": 2048 * _GIB, "nvidia.com/gpu": float(GPUS_PER_NODE), "pods": 110.0}
    rows = [
        {"node": f"gpu-node-{n:04d}", "uid": f"uid-gpu-node-{n:04d}", "provider": "aws",
         "provider_id": f"aws:///us-east-1a/i-{n:017x}", "instance_type": INSTANCE_TYPE, "region": "us-east-1",
         "zone": "us-east-1a", "capacity_type": "on_demand", "node_pool": "h100",
         "labels": {"nvidia.com/gpu.product": _GPU_PRODUCT, "node.kubernetes.io/instance-type": INSTANCE_TYPE},
         "unschedulable": False, "capacity": cap, "allocatable": cap, "gpu_product": _GPU_PRODUCT,
         "gpu_count": GPUS_PER_NODE, "gpu_memory_mib": 81559}
        for n in range(nodes)
    ]
    return pa.Table.from_pylist(rows, schema=_schema("k8s_nodes", rows[0]))


def _pod_template(pods: Sequence[FleetPod], t0: datetime, step_s: int) -> pa.Table:
    rows = [
        {"namespace": p.namespace, "pod": p.name, "uid": f"uid-{p.name}", "node": p.node, "phase": "Running",
         "qos_class": "Burstable", "priority": 0, "owner_kind": "Job", "owner_name": p.name,
         "labels": {"team": p.namespace}, "annotations": {},
         "containers": [{"name": "main", "limits": {"nvidia.com/gpu": float(len(p.gpus))},
                         "requests": {"nvidia.com/gpu": float(len(p.gpus)), "cpu": 12.0 * len(p.gpus),
                                      "memory": 128 * _GIB * len(p.gpus)}}],
         "init_containers": [], "start_time": t0 + timedelta(seconds=step_s * p.start)}
        for p in pods
    ]
    return pa.Table.from_pylist(rows, schema=_schema("k8s_pods", rows[0]))


def _schema(table: str, row: dict[str, object]) -> pa.Schema:
    """The landing schema restricted to the template's columns (dicts become maps, not structs)."""
    from ingest.schema import get_table

    full = get_table(table).schema
    return pa.schema([full.field(name) for name in row])


def _snapshots(template: pa.Table, index: np.ndarray, minute: np.ndarray, t0: datetime, step_s: int) -> pa.Table:
    t0_us = int(t0.timestamp() * 1_000_000)
    ts = pa.array(t0_us + minute.astype(np.int64) * step_s * 1_000_000, type=pa.int64()).cast(TS)
    return template.take(pa.array(index)).append_column(pa.field("snapshot_ts", TS), ts)


def land_fleet(lake_dir: Path, pods: Sequence[FleetPod], gpus: int, steps: int, t0: datetime, *,
               step_s: int = 60, cluster: str = "bench", source: str = "k8s-bench") -> dict[str, int]:
    """Write ``k8s_nodes``, ``k8s_pods``, ``k8s_namespaces`` (and one ``prices`` row) for snapshots
    ``0 .. steps-1`` after ``t0``; one lake run per UTC day. Returns the rows landed per table."""
    nodes = gpus // GPUS_PER_NODE
    node_tpl = _node_template(nodes)
    pod_tpl = _pod_template(pods, t0, step_s)
    starts = np.array([p.start for p in pods], dtype=np.int64)
    ends = np.array([p.end for p in pods], dtype=np.int64)
    namespaces = sorted({p.namespace for p in pods})
    writer = LakeWriter(lake_dir)
    per_day = 86_400 // step_s
    counts = {"k8s_nodes": 0, "k8s_pods": 0, "k8s_namespaces": 0, "prices": 0}
    day0 = t0.replace(hour=0, minute=0, second=0, microsecond=0)
    first = int((t0 - day0).total_seconds()) // step_s  # t0 need not be midnight
    for d in range((first + steps + per_day - 1) // per_day):
        lo, hi = max(0, d * per_day - first), min(steps, (d + 1) * per_day - first)
        if lo >= hi:
            continue
        with writer.run(source, cluster, t0 + timedelta(seconds=step_s * lo), t0 + timedelta(seconds=step_s * hi)) as run:
            minutes = np.arange(lo, hi, dtype=np.int64)
            counts["k8s_nodes"] += run.add("k8s_nodes", _snapshots(
                node_tpl, np.tile(np.arange(nodes), len(minutes)), np.repeat(minutes, nodes), t0, step_s))
            p_lo, p_hi = np.maximum(starts, lo), np.minimum(ends, hi)
            live = np.nonzero(p_hi > p_lo)[0]
            lengths = (p_hi - p_lo)[live]
            index = np.repeat(live, lengths)
            offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            counts["k8s_pods"] += run.add("k8s_pods", _snapshots(pod_tpl, index, np.repeat(p_lo[live], lengths) + offsets, t0, step_s))
            at = t0 + timedelta(seconds=step_s * lo)
            counts["k8s_namespaces"] += run.add("k8s_namespaces", [
                {"snapshot_ts": at, "namespace": ns, "labels": {"team": ns, "tenant": "bench"}, "annotations": {}}
                for ns in namespaces])
            if d == 0:
                counts["prices"] += run.add("prices", [
                    {"provider": "aws", "region": "us-east-1", "instance_type": INSTANCE_TYPE,
                     "capacity_type": "on_demand", "usd_per_hour": _NODE_USD_PER_HOUR, "currency": "USD",
                     "effective_from": at, "source": "bench"}])
    return counts
