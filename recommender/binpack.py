"""The binpack view of one cluster snapshot: fragmentation (DESIGN §3) and suggested moves."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from gpufinops.settings import Settings
from recommender.fragmentation import TaskShape, device_free_fractions, fragmentation_report, task_distribution
from recommender.model import ClusterSnapshot, PodPlacement
from recommender.packing import PackingSettings
from recommender.strategies.consolidate import plan_snapshot

__all__ = ["task_shape_of", "snapshot_fragmentation", "binpack_view", "load_binpack"]


_PRODUCT_LABEL = "nvidia.com/gpu.product"


def task_shape_of(pod: PodPlacement) -> TaskShape:
    if pod.gpu_fraction > 0:
        gpus, per = 1, pod.gpu_fraction
    elif pod.whole_gpus > 0:
        gpus, per = pod.whole_gpus, 1.0
    elif pod.gpu_equiv > 0:  # MIG / time-sliced: a share of one device
        gpus, per = 1, min(1.0, pod.gpu_equiv)
    else:
        gpus, per = 0, 0.0
    # The task's model constraint is what the pod asks for (explicit models or a nodeSelector on the
    # GFD product label), not the model it happens to run on: M describes the work that may arrive.
    sel = pod.node_selector.get(_PRODUCT_LABEL)
    models = pod.gpu_models if pod.gpu_models is not None else (frozenset([sel]) if sel and gpus else None)
    return TaskShape(cpu=round(pod.requests.get("cpu", 0.0), 3), gpus=gpus, per_gpu=round(per, 3), models=models)


def snapshot_fragmentation(snap: ClusterSnapshot) -> dict[str, Any]:
    """F per node and for the cluster; the target workload M = the pods present in the snapshot."""
    nodes = [n for n in snap.nodes if n.gpu_count > 0]
    by_node: dict[str, list[PodPlacement]] = defaultdict(list)
    for p in snap.pods:
        by_node[p.node].append(p)
    gmax = max((n.gpu_count for n in nodes), default=0)
    free = np.full((len(nodes), max(gmax, 1)), np.nan)
    free_cpu = np.zeros(len(nodes))
    for i, n in enumerate(nodes):
        ps = by_node.get(n.name, [])
        whole = sum(p.whole_gpus for p in ps) if n.device_level_gpus else 0
        # On device-level nodes whole GPUs take devices; every other share (fractional, MIG,
        # time-sliced) is placed best-fit onto devices (DESIGN §3).
        shares = [p.gpu_fraction or p.gpu_equiv for p in ps
                  if p.gpu_equiv > 0 and not (n.device_level_gpus and p.whole_gpus > 0)]
        free[i, : n.gpu_count] = device_free_fractions(n.gpu_count, whole, shares)
        free_cpu[i] = n.allocatable.get("cpu", 0.0) - sum(p.requests.get("cpu", 0.0) for p in ps)
    shapes, probs = task_distribution(task_shape_of(p) for p in snap.pods if p.gpu_equiv > 0)
    rep = fragmentation_report(free, free_cpu, [n.gpu_model for n in nodes], float(sum(n.gpu_count for n in nodes)),
                               shapes, probs)
    per_node = rep.pop("per_node_gpus")
    rep["nodes"] = [{"node": n.name, "gpu_model": n.gpu_model, "fragmentation_gpus": round(float(f), 4)}
                    for n, f in zip(nodes, per_node, strict=True)]
    rep["task_shapes"] = len(shapes)
    return rep


def binpack_view(snap: ClusterSnapshot, settings: PackingSettings | None = None) -> dict[str, Any]:
    """What the API's binpack endpoint serves: ``fragmentation`` and ``suggested_moves``."""
    plans = plan_snapshot(snap, settings or PackingSettings(time_limit_s=2.0))
    return {
        "cluster": snap.cluster,
        "snapshot_at": snap.at.isoformat(),
        "fragmentation": snapshot_fragmentation(snap),
        "suggested_moves": [{"pod": f"{m.namespace}/{m.pod}", "from": m.from_node, "to": m.to_node}
                            for p in plans for m in p.moves],
        "pools": [{"node_pool": p.node_pool, "nodes_before": p.nodes_before, "nodes_after": p.nodes_after,
                   "lower_bound": p.lower_bound, "gap": p.gap, "freed_nodes": p.freed_nodes,
                   "monthly_savings_usd": round(p.monthly_savings_usd, 2)} for p in plans],
    }


def load_binpack(settings: Settings, cluster: str | None = None,
                 packing: PackingSettings | None = None) -> list[dict[str, Any]]:
    """The binpack view of every cluster (or one) at its latest snapshot, read from the warehouse."""
    from recommender.loader import Loader

    with Loader(settings) as ld:
        snaps = ld.snapshots()
    return [binpack_view(s, packing) for s in snaps if cluster is None or s.cluster == cluster]
