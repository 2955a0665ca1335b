"""Typed inputs and outputs of the recommender: plain frozen dataclasses, no I/O.

The loader fills these from the warehouse marts; strategies, the packer and the
fragmentation measure read only these, so they can be tested with hand-made values.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = [
    "Taint",
    "Toleration",
    "NodeShape",
    "PodPlacement",
    "ClusterSnapshot",
    "HourUsage",
    "WorkloadGpuUsage",
    "ContainerUsage",
    "MigProfile",
    "RecommenderInput",
    "Recommendation",
    "stable_id",
    "HOURS_PER_MONTH",
    "TIERS",
]

# 365 × 24 / 12: the month every monthly saving is quoted in.
HOURS_PER_MONTH = 730.0
TIERS = ("serving", "training", "batch", "interactive", "system")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str | None = None
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class Toleration:
    key: str | None = None
    operator: str = "Equal"  # Equal | Exists
    value: str | None = None
    effect: str | None = None  # None = every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return self.key is None or self.key == taint.key
        return self.key == taint.key and (self.value or "") == (taint.value or "")


@dataclass(frozen=True)
class NodeShape:
    """One node at the latest snapshot. ``allocatable`` holds canonical floats under verbatim
    resource names (cpu in cores, memory in bytes, ``nvidia.com/gpu`` ... as counts)."""

    name: str
    cluster: str
    node_pool: str
    allocatable: dict[str, float]
    gpu_model: str | None = None
    gpu_count: int = 0  # physical devices
    gpu_memory_mib: float = 0.0
    gpu_replicas: int = 1  # time-slicing replicas; >1 = shared
    mig: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    capacity_type: str = "on_demand"
    instance_type: str | None = None
    provider: str | None = None
    region: str | None = None
    hourly_price_usd: float = 0.0

    @property
    def device_level_gpus(self) -> int:
        """Devices the packer tracks one by one (whole and fractional GPUs on unshared nodes)."""
        return 0 if (self.mig or self.gpu_replicas > 1) else self.gpu_count


@dataclass(frozen=True)
class PodPlacement:
    """One running pod at the latest snapshot, with what constrains where it may run."""

    cluster: str
    namespace: str
    pod: str
    node: str
    requests: dict[str, float]  # effective pod requests under verbatim resource names
    gpu_equiv: float = 0.0  # from the warehouse (DESIGN §3); used for the lower bound
    gpu_fraction: float = 0.0  # 0<f<1: a fractional (gpu-milli) pod holding one shared device
    tier: str | None = None
    owner_kind: str | None = None
    owner_name: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    gpu_models: frozenset[str] | None = None  # allowed GPU models; None = the current node's
    do_not_disrupt: bool = False  # karpenter.sh/do-not-disrupt
    pdb: str | None = None  # name of the PodDisruptionBudget covering the pod, if any
    checkpointed: bool = False
    warmup_seconds: float | None = None  # the gpufinops.io/warmup-seconds annotation (model load time)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod}"

    @property
    def is_daemonset(self) -> bool:
        return self.owner_kind == "DaemonSet"

    @property
    def whole_gpus(self) -> int:
        return int(round(self.requests.get("nvidia.com/gpu", 0.0)))


@dataclass(frozen=True)
class ClusterSnapshot:
    cluster: str
    at: datetime
    nodes: tuple[NodeShape, ...]
    pods: tuple[PodPlacement, ...]
    # PodDisruptionBudget name -> disruptions currently allowed (status.disruptionsAllowed)
    pdb_allowed: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class HourUsage:
    """GPU use of one workload in one hour (pods summed; utilisation over its sampled devices)."""

    hour: datetime
    util_mean: float | None  # None = no DCGM samples (unmeasured)
    util_p95: float | None
    samples: int
    fb_used_max_mib: float | None
    gpu_hours: float = 0.0
    gpu_cost_usd: float = 0.0
    total_cost_usd: float = 0.0


@dataclass(frozen=True)
class WorkloadGpuUsage:
    """A GPU workload over the analysis window."""

    cluster: str
    namespace: str
    workload: str
    tier: str
    workload_kind: str | None
    gpu_model: str | None
    gpu_resource: str | None
    hourly: tuple[HourUsage, ...]
    gpu_family: str | None = None  # the warehouse's gpu_family of the node it runs on (MIG table key)
    replicas: int = 1  # pods at the latest snapshot
    gpus_per_pod: int = 0  # whole devices per pod (nvidia.com/gpu on an unshared node)
    gpu_equiv_per_pod: float = 0.0
    device_p95: tuple[float, ...] = ()  # per-device p95 utilisation of its busiest pod
    util_p95: float | None = None  # over the window, per-minute samples
    util_mean: float | None = None
    peak_fb_used_mib: float | None = None
    device_memory_mib: float | None = None
    checkpointed: bool = False
    capacity_type: str | None = None
    instance_type: str | None = None
    on_demand_usd_per_hour: float | None = None  # node price now and its spot counterpart
    spot_usd_per_hour: float | None = None
    samples_per_hour_expected: float = 60.0  # per device (60 s DCGM)
    # requests per hour from fct_serving_requests_hourly (all models summed); None = no request counters.
    # An hour missing from it had no counter samples (unmeasured), which is not 0 requests.
    requests_hourly: dict[datetime, float] | None = None
    warmup_seconds: float | None = None  # the largest warm-up annotation of its pods


@dataclass(frozen=True)
class ContainerUsage:
    """CPU/memory of one container of a workload: decayed histograms built by the loader."""

    cluster: str
    namespace: str
    workload: str
    container: str
    tier: str
    cpu_request: float | None  # cores
    memory_request: float | None  # bytes
    memory_limit: float | None
    cpu_buckets: dict[int, float]  # histogram bucket index -> decayed weight
    memory_buckets: dict[int, float]
    samples: int
    first_sample: datetime
    last_sample: datetime
    memory_peak: float  # bytes, max working set seen
    cpu_cost_usd_per_core_hour: float = 0.0
    memory_cost_usd_per_gib_hour: float = 0.0
    replicas: int = 1


@dataclass(frozen=True)
class MigProfile:
    """One row of the warehouse's ``mig_profiles`` seed table."""

    gpu_family: str
    profile: str
    compute_slices: int  # of 7
    memory_slices: int  # of 8
    memory_gib: float  # nominal, from the profile name

    @property
    def gpu_equiv(self) -> float:
        """DESIGN §3 (macro mig_gpu_equiv): max(g/7, memory_slices/8), ranking profiles by size."""
        return max(self.compute_slices / 7.0, self.memory_slices / 8.0)

    @property
    def resource(self) -> str:
        return f"nvidia.com/mig-{self.profile}"


@dataclass(frozen=True)
class RecommenderInput:
    now: datetime
    window_start: datetime
    window_end: datetime
    gpu_usage: tuple[WorkloadGpuUsage, ...] = ()
    container_usage: tuple[ContainerUsage, ...] = ()
    snapshots: tuple[ClusterSnapshot, ...] = ()
    # GPU family -> MIG profiles, smallest first (the warehouse's mig_profiles seed; recommender.mig)
    mig_profiles: dict[str, tuple[MigProfile, ...]] = field(default_factory=dict)


def stable_id(kind: str, cluster: str, namespace: str | None, workload: str | None, *extra: str) -> str:
    """The same finding on the next run gets the same id, so the store updates it."""
    parts = [kind, cluster, namespace or "", workload or "", *extra]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]


@dataclass
class Recommendation:
    """DESIGN §5. ``current``/``proposed``/``evidence`` are JSON-able dicts."""

    kind: str
    cluster: str
    namespace: str | None
    workload: str | None
    tier: str | None
    current: dict[str, Any]
    proposed: dict[str, Any]
    evidence: dict[str, Any]
    est_monthly_savings_usd: float
    confidence: float  # 0..1
    risk: str  # low | medium | high
    created_at: datetime
    id_extra: tuple[str, ...] = ()
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            self.id = stable_id(self.kind, self.cluster, self.namespace, self.workload, *self.id_extra)
        self.est_monthly_savings_usd = round(float(self.est_monthly_savings_usd), 2)
        self.confidence = round(min(1.0, max(0.0, float(self.confidence))), 3)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "cluster": self.cluster,
            "namespace": self.namespace,
            "workload": self.workload,
            "tier": self.tier,
            "current": self.current,
            "proposed": self.proposed,
            "evidence": self.evidence,
            "est_monthly_savings_usd": self.est_monthly_savings_usd,
            "confidence": self.confidence,
            "risk": self.risk,
            "created_at": self.created_at,
        }
