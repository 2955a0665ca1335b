"""A synthetic ``kubectl get ... -o json`` dump of any size, and a throughput measurement on it.

    python -m testsupport.k8s_synthetic --pods 10000 --nodes 500

writes the dump to a temporary folder, ingests it the way ``gpufinops ingest k8s --from-dump``
does (parse, map, land through the lake writer and its quality gate) and prints pods/s per stage.
Nothing is left behind. The objects are shaped like the recorded fixtures (GPU nodes with GFD
labels, Deployment/Job/CronJob owned pods with requests and limits), not validated ones.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["synthetic_dump"]


def _node(i: int, rng: random.Random) -> dict[str, Any]:
    gpus = rng.choice([0, 4, 8, 8])
    labels = {
        "kubernetes.io/hostname": f"node-{i:05d}",
        "node.kubernetes.io/instance-type": "p4d.24xlarge" if gpus == 8 else "g5.12xlarge" if gpus else "m6i.4xlarge",
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": f"us-east-1{'abc'[i % 3]}",
        "eks.amazonaws.com/capacityType": rng.choice(["ON_DEMAND", "SPOT"]),
        "eks.amazonaws.com/nodegroup": f"pool-{gpus}",
    }
    capacity = {"cpu": "96", "memory": "1176937920Ki", "pods": "250", "ephemeral-storage": "524275692Ki"}
    if gpus:
        labels |= {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.count": str(gpus),
                   "nvidia.com/gpu.memory": "40960"}
        capacity["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": f"node-{i:05d}", "uid": f"node-uid-{i}", "labels": labels},
        "spec": {"providerID": f"aws:///us-east-1a/i-{i:017x}",
                 "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}] if gpus else []},
        "status": {"capacity": capacity, "allocatable": dict(capacity, cpu="95690m")},
    }


def _pod(i: int, nodes: int, rng: random.Random) -> tuple[dict[str, Any], dict[str, Any] | None]:
    ns = f"team-{i % 40:02d}"
    kind = rng.choice(["ReplicaSet", "ReplicaSet", "Job", "PyTorchJob", "DaemonSet"])
    workload = f"wl-{i // 4:05d}"
    owner_name = f"{workload}-7d9f8b6c5d" if kind == "ReplicaSet" else workload
    requests = {"cpu": rng.choice(["500m", "2", "8"]), "memory": rng.choice(["1Gi", "16Gi", "64Gi"])}
    if kind != "DaemonSet" and rng.random() < 0.6:
        requests["nvidia.com/gpu"] = rng.choice(["1", "1", "2", "4", "8"])
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{owner_name}-{i:06d}", "namespace": ns, "uid": f"pod-uid-{i}",
            "labels": {"app": workload, "team": f"team-{i % 40:02d}", "pod-template-hash": "7d9f8b6c5d"},
            "annotations": {"kubectl.kubernetes.io/default-container": "main"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "uid": f"o-{owner_name}",
                                 "controller": True}],
        },
        "spec": {
            "nodeName": f"node-{rng.randrange(nodes):05d}",
            "priority": 0,
            "containers": [{"name": "main", "image": "img", "resources": {"requests": requests, "limits": dict(requests)}},
                           {"name": "sidecar", "image": "img", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "status": {"phase": "Running", "qosClass": "Burstable", "startTime": "2026-11-28T07:00:00Z"},
    }
    owner = None
    if kind == "ReplicaSet":
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                 "metadata": {"name": owner_name, "namespace": ns, "uid": f"o-{owner_name}",
                              "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": workload,
                                                   "uid": f"d-{workload}", "controller": True}]}}
    return pod, owner


def synthetic_dump(pods: int, nodes: int, *, seed: int = 42) -> dict[str, Any]:
    """A kubectl ``List`` with ``nodes`` nodes, ``pods`` pods, 40 namespaces and the pods' ReplicaSets."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = [_node(i, rng) for i in range(nodes)]
    owners: dict[str, dict[str, Any]] = {}
    for i in range(pods):
        pod, owner = _pod(i, nodes, rng)
        items.append(pod)
        if owner is not None:
            owners[owner["metadata"]["namespace"] + "/" + owner["metadata"]["name"]] = owner
    items += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{n:02d}", "labels": {"team": f"t{n}"}}}
              for n in range(40)]
    items += list(owners.values())
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def _warm_up() -> None:
    """Pay one-off import costs (pyarrow pulls in pandas on first use) outside the timings."""
    import pyarrow as pa

    pa.Table.from_pylist([{"a": {"k": 1.0}}])


def _measure(pods: int, nodes: int) -> None:
    from ingest.k8s.dump import read_dump
    from ingest.k8s.snapshot import land_snapshot, snapshot_tables
    from ingest.lake import LakeWriter

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dump.json"
        path.write_text(json.dumps(synthetic_dump(pods, nodes)))
        size_mb = path.stat().st_size / 1e6
        at = datetime(2026, 11, 28, 8, tzinfo=UTC)
        _warm_up()
        stages: dict[str, tuple[float, float]] = {}

        def timed(name: str, fn: Any) -> Any:
            w, c = time.perf_counter(), time.process_time()
            out = fn()
            stages[name] = (time.perf_counter() - w, time.process_time() - c)
            return out

        snap = timed("parse JSON", lambda: read_dump(path, at))
        timed("map to Arrow", lambda: snapshot_tables(snap))  # alone; land_snapshot maps again
        record = timed("map + land (gate)", lambda: land_snapshot(LakeWriter(Path(tmp) / "lake"), "bench", snap))
        stages["end to end"] = tuple(  # type: ignore[assignment]
            stages["parse JSON"][i] + stages["map + land (gate)"][i] for i in (0, 1)
        )
        print(f"dump: {pods} pods, {nodes} nodes, {size_mb:.1f} MB; landed {record.rows}")
        print(f"{'stage':<20}{'wall s':>8}{'pods/s':>10}{'cpu s':>8}{'pods/cpu-s':>12}")
        for name, (wall, cpu) in stages.items():
            print(f"{name:<20}{wall:8.2f}{pods / wall:10,.0f}{cpu:8.2f}{pods / cpu:12,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=500)
    args = parser.parse_args()
    _measure(args.pods, args.nodes)


if __name__ == "__main__":
    main()
