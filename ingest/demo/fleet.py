"""The demo's clusters, node pools and nodes, sampled from the openb node list.

The trace's GPU-model mix sets how many nodes of each model a cluster gets; each node becomes a
real instance type of its cluster's provider (from the price card), so CPU, memory and price agree.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ingest.demo.catalog import (
    GPU_MODELS,
    MIG_CONFIG_NAME,
    MIG_LAYOUT,
    MIG_PROFILES,
    TRACE_MODEL_MAP,
    InstanceCatalog,
)

__all__ = ["ClusterSpec", "Node", "Fleet", "MigInstance", "build_fleet", "cluster_specs", "MODES"]

# How a pool hands out its GPUs (decides which pods it takes and what the device plugin advertises).
MODES = ("whole", "mig", "timeslice", "fractional", "cpu")
TIMESLICE_REPLICAS = 4
FRACTIONAL_SLOTS = 10  # nvidia.com/gpu.shared per physical GPU on the fractional pool
_GIB = 1 << 30
_MIB = 1 << 20

_PROVIDERS = [
    ("prod-aws", "aws", "us-east-1", ["us-east-1a", "us-east-1b", "us-east-1c"]),
    ("research-gcp", "gcp", "us-central1", ["us-central1-a", "us-central1-b", "us-central1-c"]),
    ("edge-azure", "azure", "eastus", ["eastus-1", "eastus-2", "eastus-3"]),
]


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    provider: str
    region: str
    zones: tuple[str, ...]
    index: int


@dataclass(frozen=True)
class MigInstance:
    gpu: int
    gi_id: int
    profile: str


@dataclass
class Node:
    cluster: str
    name: str
    uid: str
    provider: str
    provider_id: str
    region: str
    zone: str
    instance_type: str
    pool: str
    capacity_type: str  # on_demand | spot
    mode: str
    measured: bool  # dcgm-exporter runs here
    gpu_model: str  # price-card key, "" for CPU nodes
    gpu_count: int
    vcpu: int
    memory_bytes: float
    alloc_cpu: float
    alloc_memory: float
    labels: dict[str, str]
    taints: list[dict[str, str]]
    capacity: dict[str, float]
    allocatable: dict[str, float]
    gpu_replicas: int | None
    mig_config: str | None
    mig_strategy: str | None
    gpu_uuids: list[str]
    mig_instances: list[MigInstance] = field(default_factory=list)
    join_s: float = -math.inf  # epoch seconds the node exists from / until
    leave_s: float = math.inf
    cordon: tuple[float, float] | None = None


@dataclass
class Fleet:
    clusters: list[ClusterSpec]
    nodes: list[Node]

    def of(self, cluster: str) -> list[Node]:
        return [n for n in self.nodes if n.cluster == cluster]


def cluster_specs(n: int) -> list[ClusterSpec]:
    """prod-aws, research-gcp, edge-azure, then further clusters cycling the providers."""
    out = []
    for i in range(n):
        base, provider, region, zones = _PROVIDERS[i % len(_PROVIDERS)]
        name = base if i < len(_PROVIDERS) else f"{base}-{i // len(_PROVIDERS) + 1}"
        out.append(ClusterSpec(name, provider, region, tuple(zones), i))
    return out


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _quota(n: int, shares: dict[str, float], minimum: dict[str, int]) -> dict[str, int]:
    """Largest-remainder apportionment of ``n`` by ``shares`` after the minimums are met."""
    out = {k: min(minimum.get(k, 0), n) for k in shares}
    left = n - sum(out.values())
    if left < 0:  # too few nodes for the minimums: keep them in order of importance
        out, left = {}, n
        for k in minimum:
            take = min(minimum[k], left)
            out[k], left = take, left - take
        return {k: out.get(k, 0) for k in shares}
    raw = {k: left * s for k, s in shares.items()}
    for k in shares:
        out[k] += int(raw[k])
    rest = n - sum(out.values())
    for k in sorted(shares, key=lambda k: raw[k] - int(raw[k]), reverse=True)[:rest]:
        out[k] += 1
    return out


def _pool_of(spec: ClusterSpec, trace_model: str, i: int, n_of_model: int) -> tuple[str, str, str, bool]:
    """(pool, mode, capacity_type, measured) of the i-th node of a trace model in a cluster."""
    p = spec.provider
    if trace_model == "G2":
        if p == "aws" and i < max(1, round(0.3 * n_of_model)):
            return "a100mig", "mig", "on_demand", True
        if p == "gcp" and i < max(1, n_of_model // 2):
            return "a100spot", "whole", "spot", True
        return "a100", "whole", "on_demand", True
    if trace_model == "G3":
        return "h100", "whole", "on_demand", True
    if trace_model == "T4":
        if p == "gcp":
            return "t4frac", "fractional", "on_demand", True
        return "t4shared", "timeslice", "on_demand", True
    if trace_model == "A10":
        return "a10", "whole", "on_demand", True
    if trace_model == "P100" and p == "gcp":
        # This pool runs no dcgm-exporter: its GPU-hours are genuinely unmeasured.
        return "p100", "whole", "on_demand", False
    return "v100spot", "whole", "spot", True


def build_fleet(
    *,
    openb_dir: Path,
    catalog: InstanceCatalog,
    clusters: int,
    nodes: int,
    window_start: float,
    window_end: float,
    seed: int,
    gpus_per_node: int | None = None,
) -> Fleet:
    """Sample ``nodes`` nodes over ``clusters`` clusters, keeping openb's GPU-model mix."""
    if clusters < 1:
        raise ValueError("--clusters must be at least 1")
    if nodes < 4 * clusters:
        raise ValueError(f"--nodes must be at least 4 per cluster ({4 * clusters} for {clusters} clusters)")
    gpu_nodes = pd.read_csv(openb_dir / "openb_node_list_gpu_node.csv")
    all_nodes = pd.read_csv(openb_dir / "openb_node_list_all_node.csv")
    cpu_rows = all_nodes[all_nodes["gpu"] == 0]
    shares = (gpu_nodes["model"].value_counts(normalize=True)).to_dict()
    cpu_share = len(cpu_rows) / len(all_nodes)
    specs = cluster_specs(clusters)
    out: list[Node] = []
    for spec, n_c in zip(specs, _split(nodes, clusters), strict=True):
        rng = np.random.default_rng([seed, 101, spec.index])
        n_cpu = 0 if gpus_per_node else max(1, round(cpu_share * n_c * 0.6))
        minimum = {"G2": 2 if spec.provider == "aws" else 1, "T4": 1}
        minimum["P100" if spec.provider == "gcp" else "V100M16"] = 1
        quota = _quota(n_c - n_cpu, shares, minimum)
        counter = 0
        for model in sorted(quota, key=lambda m: (-quota[m], m)):
            rows = gpu_nodes[gpu_nodes["model"] == model]
            for i in range(quota[model]):
                row = rows.iloc[int(rng.integers(len(rows)))]
                pool, mode, ctype, measured = _pool_of(spec, model, i, quota[model])
                if gpus_per_node:
                    # The bench fleet: whole, measured GPUs only, so DCGM rows = GPUs × minutes.
                    pool, mode, measured = ("a100" if pool == "a100mig" else pool.replace("shared", "").replace("frac", "")), "whole", True
                gpu_model = TRACE_MODEL_MAP[model][spec.provider]
                count = gpus_per_node or int(row["gpu"])
                inst = catalog.gpu_instance(spec.provider, gpu_model, count, exact=bool(gpus_per_node))
                if inst is None:  # no 8-GPU type of this model here: the bench fleet uses A100s
                    gpu_model = "A100-80GB"
                    inst = catalog.gpu_instance(spec.provider, gpu_model, count, exact=bool(gpus_per_node))
                if inst is None:
                    raise ValueError(f"the price card has no {gpu_model} instance on {spec.provider}")
                out.append(_make_node(spec, inst, pool, mode, ctype, measured, counter, rng))
                counter += 1
        for _ in range(n_cpu):
            row = cpu_rows.iloc[int(rng.integers(len(cpu_rows)))]
            inst = catalog.cpu_instance(spec.provider, int(row["cpu_milli"]) // 1000, row["memory_mib"] / 1024)
            out.append(_make_node(spec, inst, "cpu", "cpu", "on_demand", False, counter, rng))
            counter += 1
    fleet = Fleet(specs, out)
    _autoscale_and_cordon(fleet, window_start, window_end)
    return fleet


def _make_node(spec: ClusterSpec, inst, pool: str, mode: str, ctype: str, measured: bool, i: int, rng) -> Node:
    zone = spec.zones[i % len(spec.zones)]
    hexid = rng.bytes(8).hex()
    if spec.provider == "aws":
        # one subnet per zone; the host part is a bijection of the node's number, so names are unique
        zi, k = i % len(spec.zones), i // len(spec.zones)
        ip = f"10.{spec.index % 256}.{16 * zi + k // 200}.{10 + (k * 37) % 200}"
        name = f"ip-{ip.replace('.', '-')}.ec2.internal"
        provider_id = f"aws:///{zone}/i-0{hexid[:16]}"
    elif spec.provider == "gcp":
        name = f"gke-{spec.name}-{pool}-{hexid[:8]}-{hexid[8:12]}"
        provider_id = f"gce://gpufinops-{spec.name}/{zone}/{name}"
    else:
        name = f"aks-{pool}-{int.from_bytes(bytes.fromhex(hexid[:8]), 'big') % 10**8:08d}-vmss{i:06d}"
        sub = uuid.UUID(bytes=bytes([spec.index + 1] * 16)).hex
        provider_id = (
            f"azure:///subscriptions/{sub[:8]}-{sub[8:12]}-{sub[12:16]}-{sub[16:20]}-{sub[20:]}/resourceGroups/"
            f"mc_gpufinops_{spec.name}_{spec.region}/providers/Microsoft.Compute/virtualMachineScaleSets/"
            f"{name.rsplit('-', 1)[0]}-vmss/virtualMachines/{i}"
        )
    uid = str(uuid.UUID(bytes=rng.bytes(16), version=4))
    model = GPU_MODELS.get(inst.gpu_model)
    mem_bytes = float(inst.memory_gib * _GIB)
    labels: dict[str, str] = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": inst.instance_type,
        "topology.kubernetes.io/region": spec.region,
        "topology.kubernetes.io/zone": zone,
        "gpufinops.io/node-pool": pool,
    }
    taints: list[dict[str, str]] = []
    spot = ctype == "spot"
    if spec.provider == "aws":
        labels["eks.amazonaws.com/nodegroup"] = pool
        labels["karpenter.sh/capacity-type"] = "spot" if spot else "on-demand"
        labels["eks.amazonaws.com/capacityType"] = "SPOT" if spot else "ON_DEMAND"
    elif spec.provider == "gcp":
        labels["cloud.google.com/gke-nodepool"] = pool
        if spot:
            labels["cloud.google.com/gke-spot"] = "true"
            taints.append({"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"})
    else:
        labels["kubernetes.azure.com/agentpool"] = pool
        labels["agentpool"] = pool
        if spot:
            labels["kubernetes.azure.com/scalesetpriority"] = "spot"
            taints.append({"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"})
    capacity: dict[str, float] = {
        "cpu": float(inst.vcpu),
        "memory": mem_bytes,
        "pods": 110.0,
        "ephemeral-storage": float(200 * _GIB),
    }
    alloc_cpu = round(inst.vcpu - 0.08 - 0.01 * inst.vcpu, 2)
    alloc_mem = float(int(mem_bytes * 0.93 - 100 * _MIB))
    gpu_count = inst.gpu_count
    gpu_replicas = mig_config = mig_strategy = None
    uuids = [f"GPU-{uuid.UUID(bytes=rng.bytes(16), version=4)}" for _ in range(gpu_count)]
    mig_instances: list[MigInstance] = []
    if model is not None:
        labels.update({
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": model.product,
            "nvidia.com/gpu.count": str(gpu_count),
            "nvidia.com/gpu.memory": str(model.memory_mib),
            "nvidia.com/gpu.family": _FAMILY.get(model.key, "unknown"),
        })
        if spec.provider == "gcp":
            labels["cloud.google.com/gke-accelerator"] = _GKE_ACCELERATOR.get(model.key, model.key.lower())
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
        if mode == "whole":
            capacity["nvidia.com/gpu"] = float(gpu_count)
        elif mode == "timeslice":
            gpu_replicas = TIMESLICE_REPLICAS
            capacity["nvidia.com/gpu"] = float(gpu_count * TIMESLICE_REPLICAS)
            labels["nvidia.com/gpu.replicas"] = str(TIMESLICE_REPLICAS)
            labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
        elif mode == "fractional":
            gpu_replicas = FRACTIONAL_SLOTS
            capacity["nvidia.com/gpu"] = 0.0
            capacity["nvidia.com/gpu.shared"] = float(gpu_count * FRACTIONAL_SLOTS)
            labels["nvidia.com/gpu.replicas"] = str(FRACTIONAL_SLOTS)
            labels["gpufinops.io/gpu-sharing"] = "fractional"
        elif mode == "mig":
            mig_config, mig_strategy = MIG_CONFIG_NAME, "mixed"
            labels["nvidia.com/mig.config"] = mig_config
            labels["nvidia.com/mig.strategy"] = mig_strategy
            labels["nvidia.com/mig.config.state"] = "success"
            capacity["nvidia.com/gpu"] = 0.0
            for g in range(gpu_count):
                for j, prof in enumerate(MIG_LAYOUT[g % len(MIG_LAYOUT)]):
                    mig_instances.append(MigInstance(g, j + 1, prof))
                    key = MIG_PROFILES[prof].resource
                    capacity[key] = capacity.get(key, 0.0) + 1.0
    allocatable = dict(capacity)
    allocatable["cpu"], allocatable["memory"] = alloc_cpu, alloc_mem
    return Node(
        cluster=spec.name, name=name, uid=uid, provider=spec.provider, provider_id=provider_id,
        region=spec.region, zone=zone, instance_type=inst.instance_type, pool=pool, capacity_type=ctype,
        mode=mode, measured=measured and model is not None, gpu_model=inst.gpu_model, gpu_count=gpu_count,
        vcpu=inst.vcpu, memory_bytes=mem_bytes, alloc_cpu=alloc_cpu, alloc_memory=alloc_mem, labels=labels,
        taints=taints, capacity=capacity, allocatable=allocatable, gpu_replicas=gpu_replicas,
        mig_config=mig_config, mig_strategy=mig_strategy, gpu_uuids=uuids, mig_instances=mig_instances,
    )


_FAMILY = {"A100-80GB": "ampere", "A100-40GB": "ampere", "H100-80GB": "hopper", "T4": "turing",
           "V100-16GB": "volta", "V100-32GB": "volta", "P100-16GB": "pascal", "A10G": "ampere",
           "A10": "ampere", "L4": "ada-lovelace"}
_GKE_ACCELERATOR = {"A100-80GB": "nvidia-a100-80gb", "A100-40GB": "nvidia-tesla-a100", "H100-80GB": "nvidia-h100-80gb",
                    "T4": "nvidia-tesla-t4", "V100-16GB": "nvidia-tesla-v100", "P100-16GB": "nvidia-tesla-p100",
                    "L4": "nvidia-l4"}


def _autoscale_and_cordon(fleet: Fleet, start: float, end: float) -> None:
    """A node joins and one leaves during the window in each cluster; one node is cordoned a while.

    Autoscaled nodes come from the largest whole-GPU pool (spot first: interruptions are the
    common reason a node leaves); the cordoned node is a whole-GPU node of the first cluster.
    """
    span = end - start
    for spec in fleet.clusters:
        nodes = [n for n in fleet.of(spec.name) if n.mode == "whole"]
        nodes.sort(key=lambda n: (n.capacity_type != "spot", n.pool, n.name))
        if len(nodes) >= 3:
            nodes[0].leave_s = start + 0.7 * span  # scaled down / interrupted
            nodes[1].join_s = start + 0.35 * span  # scaled up
        if spec.index == 0 and len(nodes) >= 3:
            nodes[2].cordon = (start + 0.4 * span, start + 0.55 * span)
