"""Kubernetes objects (dicts as the API returns them in JSON) to landing rows.

Pure functions: no I/O, no clock. The dump reader and the live lister both hand their objects to
:func:`snapshot_rows`, so a dump and a live list of the same cluster land identical rows.
Errors are :class:`InputError` whose message names the object (``Pod team-a/trainer-0``); callers
add where it came from (file and item index, or API resource).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpufinops.errors import InputError
from ingest.k8s.providers import capacity_type_of, node_pool_of, provider_of
from ingest.quantity import parse_quantity, parse_quantity_map

__all__ = [
    "GPU_LABELS",
    "OwnerIndex",
    "describe",
    "namespace_row",
    "node_row",
    "parse_time",
    "pod_row",
]

# NVIDIA GPU feature discovery (GFD) labels.
GPU_LABELS = {
    "product": "nvidia.com/gpu.product",
    "count": "nvidia.com/gpu.count",
    "memory": "nvidia.com/gpu.memory",  # MiB per GPU
    "replicas": "nvidia.com/gpu.replicas",  # time-slicing / MPS replicas per GPU
    "mig_config": "nvidia.com/mig.config",
    "mig_strategy": "nvidia.com/mig.strategy",
}
# Device-plugin resources that count whole physical accelerators, used for ``gpu_count`` when GFD
# labels are absent (no GPU operator, or a non-NVIDIA vendor).
_WHOLE_DEVICE_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi", "aws.amazon.com/neuron")
_INSTANCE_TYPE = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
_REGION = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
_ZONE = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
_MAX_OWNER_DEPTH = 16


def describe(obj: Mapping[str, Any], kind: str | None = None) -> str:
    """``Kind namespace/name`` for messages."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name", "?")
    ns = meta.get("namespace")
    return f"{kind or obj.get('kind') or 'object'} {ns + '/' if ns else ''}{name}"


def parse_time(value: Any, *, where: str = "") -> datetime | None:
    """RFC 3339 (``2026-11-29T16:50:00Z``, optional fraction and offset) to an aware UTC datetime."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InputError(f"{where}: invalid timestamp {value!r} (expected RFC 3339)")
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith(("Z", "z")) else value)
    except ValueError:
        raise InputError(f"{where}: invalid timestamp {value!r} (expected RFC 3339)") from None
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


# -- owners ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _OwnerRef:
    kind: str
    name: str
    uid: str | None


def _controller_ref(meta: Mapping[str, Any]) -> _OwnerRef | None:
    """The ``controller: true`` owner reference, else the first one, else None."""
    refs = meta.get("ownerReferences") or []
    if not isinstance(refs, list):
        return None
    chosen = next((r for r in refs if isinstance(r, Mapping) and r.get("controller")), None)
    if chosen is None:
        chosen = next((r for r in refs if isinstance(r, Mapping)), None)
    if chosen is None or not chosen.get("kind") or not chosen.get("name"):
        return None
    return _OwnerRef(str(chosen["kind"]), str(chosen["name"]), chosen.get("uid"))


class OwnerIndex:
    """Namespaced objects that can own pods (ReplicaSets, Jobs, custom resources...), by kind and name.

    :meth:`top_owner` follows controller references upwards through the objects it was given:
    Pod -> ReplicaSet -> Deployment, Pod -> Job -> CronJob, Pod -> RayCluster -> RayJob when the
    RayClusters were listed too. Where the chain leaves the index, the last reference reached is
    the answer, so an unlisted owner stays as the pod's own controller reference.
    """

    def __init__(self, objects: Iterable[Mapping[str, Any]] = ()):
        self._by_key: dict[tuple[str, str, str], tuple[str | None, _OwnerRef | None]] = {}
        for obj in objects:
            self.add(obj)

    def add(self, obj: Mapping[str, Any], kind: str | None = None) -> None:
        meta = obj.get("metadata") or {}
        kind = kind or obj.get("kind")
        if not kind or not isinstance(meta, Mapping) or not meta.get("name"):
            return
        key = (str(meta.get("namespace") or ""), str(kind), str(meta["name"]))
        self._by_key[key] = (meta.get("uid"), _controller_ref(meta))

    def __len__(self) -> int:
        return len(self._by_key)

    def top_owner(self, namespace: str, meta: Mapping[str, Any]) -> tuple[str | None, str | None]:
        ref = _controller_ref(meta)
        if ref is None:
            return None, None
        seen: set[tuple[str, str]] = set()
        for _ in range(_MAX_OWNER_DEPTH):
            seen.add((ref.kind, ref.name))
            entry = self._by_key.get((namespace, ref.kind, ref.name))
            if entry is None:
                break
            uid, parent = entry
            # Same name but another uid: the listed object is a successor of the one that owns
            # this pod (deleted and recreated); its owners say nothing about ours.
            if ref.uid and uid and ref.uid != uid:
                break
            if parent is None or (parent.kind, parent.name) in seen:
                break
            ref = parent
        return ref.kind, ref.name


# -- rows -----------------------------------------------------------------------------------------
def _meta(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise InputError(f"{kind} object has no metadata.name")
    return meta


def _str_map(value: Any, where: str) -> dict[str, str]:
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: expected a map of strings, got {type(value).__name__}")
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


def _required_node_affinity(affinity: Any, where: str) -> list[dict[str, Any]]:
    """The match expressions of the pod's required node affinity, flattened with their term index
    (terms are ORed, a term's expressions ANDed); values kept as a sorted set. Preferred affinity and
    matchFields are not scheduling constraints on labels and are left out."""
    if not affinity:
        return []
    if not isinstance(affinity, Mapping):
        raise InputError(f"{where}: expected an object, got {type(affinity).__name__}")
    node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {} \
        if isinstance(node_affinity, Mapping) else None
    terms = (required.get("nodeSelectorTerms") or []) if isinstance(required, Mapping) else None
    if not isinstance(terms, list):
        raise InputError(f"{where}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: "
                         "expected nodeSelectorTerms to be a list")
    out: list[dict[str, Any]] = []
    for i, term in enumerate(terms):
        exprs = (term.get("matchExpressions") or []) if isinstance(term, Mapping) else None
        if not isinstance(exprs, list):
            raise InputError(f"{where}.nodeAffinity nodeSelectorTerms[{i}]: expected matchExpressions to be a list")
        for j, e in enumerate(exprs):
            if not isinstance(e, Mapping) or not e.get("key") or not e.get("operator"):
                raise InputError(f"{where}.nodeAffinity nodeSelectorTerms[{i}].matchExpressions[{j}]: "
                                 "expected an object with key and operator")
            values = e.get("values") or []
            if not isinstance(values, list):
                raise InputError(f"{where}.nodeAffinity nodeSelectorTerms[{i}].matchExpressions[{j}].values: "
                                 f"expected a list, got {type(values).__name__}")
            out.append({"term": i, "key": str(e["key"]), "operator": str(e["operator"]),
                        "label_values": sorted({str(v) for v in values if v is not None})})
    return out


def _first(labels: Mapping[str, str], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = labels.get(key)
        if value:
            return value
    return None


def _int_label(labels: Mapping[str, str], key: str, where: str) -> int | None:
    raw = labels.get(key)
    if raw is None or raw == "":
        return None
    try:
        return int(parse_quantity(raw, where=f"{where} label {key}"))
    except InputError:
        raise
    except (OverflowError, ValueError):
        raise InputError(f"{where} label {key}: {raw!r} is not a whole number") from None


def _gpu_count(labels: Mapping[str, str], capacity: Mapping[str, float], replicas: int | None, where: str) -> int:
    counted = _int_label(labels, GPU_LABELS["count"], where)
    if counted is not None:
        return counted
    # Without GFD, time-sliced capacity is advertised as count x replicas, under nvidia.com/gpu or
    # (renameByDefault) nvidia.com/gpu.shared: undo that.
    shared = capacity.get("nvidia.com/gpu.shared")
    if shared and not capacity.get("nvidia.com/gpu"):
        return int(shared / replicas) if replicas and replicas > 1 else int(shared)
    for resource in _WHOLE_DEVICE_RESOURCES:
        if resource in capacity:
            n = capacity[resource]
            if resource == "nvidia.com/gpu" and replicas and replicas > 1:
                n = n / replicas
            return int(n)
    return 0


def node_row(obj: Mapping[str, Any], snapshot_ts: datetime) -> dict[str, Any]:
    meta = _meta(obj, "Node")
    where = describe(obj, "Node")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    labels = _str_map(meta.get("labels"), f"{where} metadata.labels")
    capacity = parse_quantity_map(status.get("capacity"), where=f"{where} status.capacity")
    allocatable = parse_quantity_map(status.get("allocatable"), where=f"{where} status.allocatable")
    replicas = _int_label(labels, GPU_LABELS["replicas"], where)
    memory = _int_label(labels, GPU_LABELS["memory"], where)
    provider_id = spec.get("providerID") or None
    taints = [
        {"key": t.get("key"), "value": t.get("value"), "effect": t.get("effect")}
        for t in spec.get("taints") or []
        if isinstance(t, Mapping)
    ]
    return {
        "snapshot_ts": snapshot_ts,
        "node": meta["name"],
        "uid": meta.get("uid"),
        "provider": provider_of(provider_id, labels),
        "provider_id": provider_id,
        "instance_type": _first(labels, _INSTANCE_TYPE),
        "region": _first(labels, _REGION),
        "zone": _first(labels, _ZONE),
        "capacity_type": capacity_type_of(labels),
        "node_pool": node_pool_of(labels),
        "labels": labels,
        "annotations": _str_map(meta.get("annotations"), f"{where} metadata.annotations"),
        "taints": taints,
        "unschedulable": bool(spec.get("unschedulable", False)),
        "capacity": capacity,
        "allocatable": allocatable,
        "gpu_product": labels.get(GPU_LABELS["product"]) or None,
        "gpu_count": _gpu_count(labels, capacity, replicas, where),
        "gpu_memory_mib": memory,
        "gpu_replicas": replicas,
        "mig_config": labels.get(GPU_LABELS["mig_config"]) or None,
        "mig_strategy": labels.get(GPU_LABELS["mig_strategy"]) or None,
    }


def _containers(items: Any, where: str) -> list[dict[str, Any]]:
    out = []
    for i, c in enumerate(items or []):
        if not isinstance(c, Mapping):
            raise InputError(f"{where}[{i}]: expected a container object")
        name = c.get("name") or f"#{i}"
        resources = c.get("resources") or {}
        out.append(
            {
                "name": name,
                "requests": parse_quantity_map(resources.get("requests"), where=f"{where} {name} requests"),
                "limits": parse_quantity_map(resources.get("limits"), where=f"{where} {name} limits"),
            }
        )
    return out


def pod_row(obj: Mapping[str, Any], snapshot_ts: datetime, owners: OwnerIndex) -> dict[str, Any]:
    meta = _meta(obj, "Pod")
    where = describe(obj, "Pod")
    namespace = meta.get("namespace") or "default"
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if not meta.get("uid"):
        # the uid tells a pod from its namesake recreated later (StatefulSets reuse names)
        raise InputError("has no metadata.uid")
    owner_kind, owner_name = owners.top_owner(namespace, meta)
    priority = spec.get("priority")
    return {
        "snapshot_ts": snapshot_ts,
        "namespace": namespace,
        "pod": meta["name"],
        "uid": meta.get("uid"),
        "node": spec.get("nodeName") or None,
        "phase": status.get("phase"),
        "qos_class": status.get("qosClass"),
        "priority": int(priority) if priority is not None else None,
        "priority_class": spec.get("priorityClassName") or None,
        "owner_kind": owner_kind,
        "owner_name": owner_name,
        "labels": _str_map(meta.get("labels"), f"{where} metadata.labels"),
        "annotations": _str_map(meta.get("annotations"), f"{where} metadata.annotations"),
        "containers": _containers(spec.get("containers"), f"{where} containers"),
        "init_containers": _containers(spec.get("initContainers"), f"{where} initContainers"),
        "start_time": parse_time(status.get("startTime"), where=f"{where} status.startTime"),
        "node_selector": _str_map(spec.get("nodeSelector"), f"{where} spec.nodeSelector"),
        "tolerations": [
            {"key": t.get("key"), "operator": t.get("operator"), "value": t.get("value"), "effect": t.get("effect")}
            for t in spec.get("tolerations") or []
            if isinstance(t, Mapping)
        ],
        "required_node_affinity": _required_node_affinity(spec.get("affinity"), f"{where} spec.affinity"),
    }


def namespace_row(obj: Mapping[str, Any], snapshot_ts: datetime) -> dict[str, Any]:
    meta = _meta(obj, "Namespace")
    where = describe(obj, "Namespace")
    return {
        "snapshot_ts": snapshot_ts,
        "namespace": meta["name"],
        "labels": _str_map(meta.get("labels"), f"{where} metadata.labels"),
        "annotations": _str_map(meta.get("annotations"), f"{where} metadata.annotations"),
    }
