"""The pure planner: one change (+ the live objects it touches) -> the Kubernetes operations to send.

No I/O here: the executor reads the live objects, this module decides what to send, and the same
ops are printed by ``--dry-run``, sent as server-side dry-runs, then for real. Every op names the
fields it sets as JSON pointers (``expect``): verification compares them with a GET afterwards and
rollback restores exactly those fields from the prior spec (a JSON patch built per object).

Op types per change kind (docs/controller.md has the table):
- container resources (rightsize_cpu_mem, rightsize_gpu_count, rightsize_to_mig, enable_time_slicing)
  and move_to_spot: a strategic-merge patch of the pod template (containers merged by name) of a
  Deployment / StatefulSet / Job / CronJob (jobTemplate);
- reclaim_idle_gpu: scale a Deployment / StatefulSet to 0, suspend a Job / CronJob;
- scale_to_zero_window / set_autoscaling: HPA min/max (merge patch) or the workload's replicas;
- the custom kinds (``controller.crds``: Kubeflow Notebook / PyTorchJob, RayJob, KServe
  InferenceService) get JSON patches of every pod template they embed (containers by index, guarded by
  ``test`` ops on the names) and merge patches for stop / suspend / min-max: a CR has no strategic merge;
- consolidate_nodes / cordon_drain_node: cordon every node first, then policy/v1 Evictions of the
  pods on them (DaemonSet and mirror pods stay; ``karpenter.sh/do-not-disrupt`` refuses the plan);
- set_mig_config: the ``nvidia.com/mig.config`` label on every node of the pool (merge patch).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from controller.crds import (
    CUSTOM_KINDS,
    NOTEBOOK_STOPPED,
    RESOURCES,
    ContainerSlot,
    PodSpecSlot,
    container_slots,
    pod_spec_slots,
)
from gpufinops.errors import InputError, TerminalError
from ingest.k8s.providers import node_pool_of
from ingest.quantity import parse_quantity

__all__ = [
    "DO_NOT_DISRUPT",
    "MIG_CONFIG_LABEL",
    "NODE_CHANGE_KINDS",
    "WORKLOAD_CHANGE_KINDS",
    "Op",
    "PlanError",
    "PlanRefused",
    "api_path",
    "format_cpu",
    "format_memory",
    "format_plan",
    "pdbs_covering",
    "plan",
    "pointer",
    "template_spec_path",
]

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
WHOLE_GPU = "nvidia.com/gpu"

WORKLOAD_CHANGE_KINDS = (
    "rightsize_cpu_mem", "rightsize_gpu_count", "rightsize_to_mig", "enable_time_slicing", "reclaim_idle_gpu",
    "scale_to_zero_window", "set_autoscaling", "move_to_spot",
)
NODE_CHANGE_KINDS = ("consolidate_nodes", "cordon_drain_node", "set_mig_config")

_TEMPLATE_SPEC: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
_SCALABLE = ("Deployment", "StatefulSet")
# how a template change reaches the pods of a CR (the description says so)
_RESTART_NOTE = {
    "Notebook": "; the notebook controller rolls its StatefulSet: the notebook restarts",
    "PyTorchJob": "; a running job keeps its pods: takes effect when they are recreated (restart / resume)",
    "RayJob": "; a running job keeps its RayCluster: takes effect on the next run (or suspend + resume)",
    "InferenceService": "; KServe rolls out a new predictor revision",
}
_SUSPENDABLE = ("Job", "CronJob")
_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-\d+g\.\d+gb(?:\.[a-z0-9+]+)?$")


class PlanRefused(TerminalError):
    """The change must not be applied as things stand (e.g. a pod marked do-not-disrupt)."""


class PlanError(InputError):
    """The change cannot be turned into requests: a field of ``proposed`` or the live object is wrong."""


@dataclass(frozen=True)
class Op:
    """One request. ``expect``: JSON pointer -> value the object holds afterwards (None = field absent);
    ``guards``: pointer -> value that must still hold for index-based pointers (container names)."""

    verb: str  # patch | create | evict | cordon | uncordon | scale
    api_path: str
    kind: str
    namespace: str | None
    name: str
    patch_type: str | None  # strategic | merge | json; None for create / evict
    body: Any
    reversible: bool
    description: str
    expect: dict[str, Any] = field(default_factory=dict)
    guards: dict[str, Any] = field(default_factory=dict)
    pdbs: tuple[str, ...] = ()

    @property
    def object_path(self) -> str:
        """The path to GET the object this op changes (an eviction's pod)."""
        return self.api_path.removesuffix("/eviction")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pdbs"] = list(self.pdbs)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Op:
        return cls(**{**d, "pdbs": tuple(d.get("pdbs") or ())})


# -- small pure helpers ---------------------------------------------------------------------------
def pointer(*parts: str | int) -> str:
    """RFC 6901 JSON pointer from path parts (``/`` and ``~`` escaped)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def api_path(kind: str, namespace: str | None, name: str) -> str:
    try:
        prefix, plural, namespaced = RESOURCES[kind]
    except KeyError:
        raise PlanError(f"target_kind {kind!r} is not one the controller can change; known: {sorted(RESOURCES)}") from None
    if namespaced:
        if not namespace:
            raise PlanError(f"{kind}/{name} is namespaced but the change has no namespace")
        return f"{prefix}/namespaces/{namespace}/{plural}/{name}"
    return f"{prefix}/{plural}/{name}"


def template_spec_path(kind: str) -> tuple[str, ...]:
    try:
        return _TEMPLATE_SPEC[kind]
    except KeyError:
        raise PlanError(f"target_kind {kind!r} has no pod template; container changes apply to "
                        f"{', '.join(_TEMPLATE_SPEC)}") from None


def format_cpu(cores: float) -> str:
    """Cores -> a canonical quantity, rounded up to whole millicores (``250m``, ``2``)."""
    milli = math.ceil(round(cores * 1000, 6))
    if milli <= 0:
        raise PlanError(f"cpu {cores!r} cores is not positive")
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_memory(n_bytes: float) -> str:
    """Bytes -> a canonical quantity, rounded up to whole MiB (``512Mi``, ``4Gi``)."""
    mib = math.ceil(round(n_bytes / 2**20, 6))
    if mib <= 0:
        raise PlanError(f"memory {n_bytes!r} bytes is not positive")
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def _nest(path: tuple[str | int, ...], leaf: Any) -> dict[str, Any]:
    out: Any = leaf
    for part in reversed(path):
        out = {str(part): out}
    return dict(out)


def _get(obj: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        if isinstance(part, int):
            obj = obj[part] if isinstance(obj, list) and part < len(obj) else None
        elif not isinstance(obj, Mapping):
            return None
        else:
            obj = obj.get(part)
    return obj


def _selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector; an empty selector matches everything (as in a policy/v1 PDB)."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def pdbs_covering(pod: Mapping[str, Any], pdbs: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return [p for p in pdbs if (p.get("metadata") or {}).get("namespace") == meta.get("namespace")
            and _selector_matches((p.get("spec") or {}).get("selector"), labels)]


# -- the change, whatever shape it comes in -------------------------------------------------------
@dataclass(frozen=True)
class _Change:
    id: str
    kind: str
    cluster: str
    namespace: str | None
    target_kind: str
    target_name: str
    current: Mapping[str, Any]
    proposed: Mapping[str, Any]


def _as_change(change: Any) -> _Change:
    get = change.get if isinstance(change, Mapping) else (lambda k, d=None: getattr(change, k, d))
    missing = [k for k in ("kind", "target_kind", "target_name") if not get(k)]
    if missing:
        raise PlanError(f"change {get('id', '?')} lacks {', '.join(missing)}")
    return _Change(id=str(get("id", "") or ""), kind=str(get("kind")), cluster=str(get("cluster", "") or ""),
                   namespace=get("namespace"), target_kind=str(get("target_kind")),
                   target_name=str(get("target_name")), current=get("current") or {},
                   proposed=get("proposed") or {})


def _target(c: _Change, live: Mapping[str, Any] | None) -> dict[str, Any]:
    obj = (live or {}).get("target")
    if not isinstance(obj, Mapping):
        raise PlanError(f"{c.kind} of {c.target_kind} {c.namespace}/{c.target_name} needs the live object "
                        "(the container names and current resources); none was read")
    if obj.get("kind") and obj["kind"] != c.target_kind:
        raise PlanError(f"change {c.id} targets a {c.target_kind} but the live object is a {obj['kind']}")
    return dict(obj)


def _where(c: _Change) -> str:
    return f"{c.target_kind} {c.namespace}/{c.target_name}" if c.namespace else f"{c.target_kind} {c.target_name}"


# -- container resources --------------------------------------------------------------------------
Resources = dict[str, dict[str, str | None]]


def _containers(c: _Change, target: Mapping[str, Any]) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
    spec_path = template_spec_path(c.target_kind)
    containers = _get(target, (*spec_path, "containers"))
    if not isinstance(containers, list) or not containers:
        raise PlanError(f"{_where(c)} has no containers at {'.'.join(spec_path)}.containers")
    return spec_path, containers


def _groups(c: _Change, target: Mapping[str, Any]) -> list[list[ContainerSlot]]:
    """The containers of every pod template of the target, one list per template."""
    if c.target_kind in CUSTOM_KINDS:
        groups = [g for g in container_slots(c.target_kind, target) if g]
        if not groups:
            raise PlanError(f"{_where(c)} has no containers in its pod templates")
        return groups
    spec_path, containers = _containers(c, target)
    group = PodSpecSlot(spec_path, "")
    return [[ContainerSlot((*spec_path, "containers", i), str(x.get("name")), x, group)
             for i, x in enumerate(containers)]]


def _pick_container(c: _Change, containers: list[Mapping[str, Any]], name: str | None,
                    holding: str | None = None, *, optional: bool = False,
                    names: list[str] | None = None) -> int | None:
    """The index of the container to change; ``optional``: None when this template lacks the named
    container or one holding the resource (another template of the object may have it)."""
    names = names or [str(x.get("name")) for x in containers]
    if name:
        if name not in names:
            if optional:
                return None
            raise PlanError(f"{_where(c)} has no container {name!r} (containers: {', '.join(names)})")
        return names.index(name)
    if holding:
        idx = [i for i, x in enumerate(containers) if holding in ((x.get("resources") or {}).get("limits") or {})
               or holding in ((x.get("resources") or {}).get("requests") or {})]
        if len(idx) == 1:
            return idx[0]
        if not idx:
            if optional:
                return None
            raise PlanError(f"no container of {_where(c)} requests {holding}")
        raise PlanError(f"several containers of {_where(c)} request {holding} "
                        f"({', '.join(names[i] for i in idx)}); name one in proposed.container")
    if len(containers) == 1:
        return 0
    raise PlanError(f"{_where(c)} has {len(containers)} containers ({', '.join(names)}); "
                    "name one in proposed.container")


def _picks(c: _Change, groups: list[list[ContainerSlot]], name: str | None,
           holding: str | None = None) -> list[ContainerSlot]:
    """One container per template: every template of a CR that has the named (or GPU-holding) one."""
    if len(groups) == 1:
        idx = _pick_container(c, [s.container for s in groups[0]], name, holding, names=[s.name for s in groups[0]])
        assert idx is not None
        return [groups[0][idx]]
    out = []
    for g in groups:
        idx = _pick_container(c, [s.container for s in g], name, holding, optional=True, names=[s.name for s in g])
        if idx is not None:
            out.append(g[idx])
    if not out:
        names = ", ".join(sorted({s.name for g in groups for s in g}))
        what = f"no container {name!r}" if name else f"no container requesting {holding}"
        raise PlanError(f"{_where(c)} has {what} in any of its pod templates (containers: {names})")
    return out


def _slot_guards(slot: ContainerSlot) -> dict[str, Any]:
    guards = {pointer(*p): v for p, v in slot.group.guards}
    if isinstance(slot.path[-1], int):
        guards[pointer(*slot.path, "name")] = slot.name
    return guards


def _json_resources(slot: ContainerSlot, resources: Resources) -> list[dict[str, Any]]:
    """RFC 6902 ops setting (None: removing) resource keys of one container, parents created as needed."""
    cur = slot.container.get("resources")
    if not isinstance(cur, Mapping):
        new = {s: {k: v for k, v in vals.items() if v is not None} for s, vals in resources.items()}
        return [{"op": "add", "path": pointer(*slot.path, "resources"), "value": {s: v for s, v in new.items() if v}}]
    ops: list[dict[str, Any]] = []
    for section, vals in resources.items():
        have = cur.get(section)
        if not isinstance(have, Mapping):
            add = {k: v for k, v in vals.items() if v is not None}
            if add:
                ops.append({"op": "add", "path": pointer(*slot.path, "resources", section), "value": add})
            continue
        for key, value in vals.items():
            ptr = pointer(*slot.path, "resources", section, key)
            if value is not None:
                ops.append({"op": "add", "path": ptr, "value": value})  # add replaces an existing member
            elif key in have:
                ops.append({"op": "remove", "path": ptr})
    return ops


def _resources_op(c: _Change, changes: list[tuple[ContainerSlot, Resources, str]]) -> Op:
    """Built-ins: a strategic-merge patch of one container (merged by name; None deletes a key).
    Custom kinds: one JSON patch over every template, ``test`` ops guarding the list indexes first."""
    expect: dict[str, Any] = {}
    guards: dict[str, Any] = {}
    for slot, resources, _ in changes:
        expect.update({pointer(*slot.path, "resources", section, res): value
                       for section, values in resources.items() for res, value in values.items()})
        guards.update(_slot_guards(slot))
    description = f"{_where(c)}: " + "; ".join(
        f"{slot.group.label + ': ' if slot.group.label else ''}container {slot.name}: {what}" for slot, _, what in changes
    ) + _RESTART_NOTE.get(c.target_kind, "")
    body: Any
    if c.target_kind in CUSTOM_KINDS:
        patch_type = "json"
        body = [{"op": "test", "path": p, "value": v} for p, v in sorted(guards.items())]
        for slot, resources, _ in changes:
            body.extend(_json_resources(slot, resources))
    else:
        ((slot, resources, _),) = changes
        patch_type = "strategic"
        body = _nest(slot.group.path, {"containers": [{"name": slot.name, "resources": resources}]})
    return Op(verb="patch", api_path=api_path(c.target_kind, c.namespace, c.target_name), kind=c.target_kind,
              namespace=c.namespace, name=c.target_name, patch_type=patch_type, body=body, reversible=True,
              description=description, expect=expect, guards=guards)


def _number(value: Any, where: str) -> float:
    if isinstance(value, Mapping):
        value = value.get("target")
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise PlanError(f"{where} must be a positive number, got {value!r}")
    return float(value)


def _rightsize_cpu_mem(c: _Change, live: Mapping[str, Any] | None) -> list[Op]:
    p = c.proposed
    requests: dict[str, str] = {}
    if p.get("cpu") is not None:
        requests["cpu"] = format_cpu(_number(p["cpu"], "proposed.cpu"))
    mem_bytes: float | None = None
    if p.get("memory") is not None:
        mem_bytes = _number(p["memory"], "proposed.memory")
    elif p.get("mem_gb") is not None:
        mem_bytes = _number(p["mem_gb"], "proposed.mem_gb") * 2**30
    if mem_bytes is not None:
        requests["memory"] = format_memory(mem_bytes)
    if not requests:
        raise PlanError(f"change {c.id}: proposed has neither cpu nor memory (nor mem_gb)")
    target = _target(c, live)
    changes = []
    for slot in _picks(c, _groups(c, target), p.get("container")):
        limits = (slot.container.get("resources") or {}).get("limits") or {}
        new_limits = {k: v for k, v in requests.items()  # a request above the limit is invalid: raise the limit
                      if k in limits and parse_quantity(limits[k]) < parse_quantity(v)}
        resources: Resources = {"requests": dict(requests)}
        if new_limits:
            resources["limits"] = dict(new_limits)
        what = "requests " + ", ".join(f"{k}={v}" for k, v in requests.items())
        if new_limits:
            what += "; limits raised to " + ", ".join(f"{k}={v}" for k, v in new_limits.items())
        changes.append((slot, resources, what))
    return [_resources_op(c, changes)]


def _swap_gpu_resource(c: _Change, live: Mapping[str, Any] | None, new_resource: str, count: int, what: str) -> Op:
    target = _target(c, live)
    old = str(c.current.get("resource") or WHOLE_GPU)
    changes = []
    for slot in _picks(c, _groups(c, target), c.proposed.get("container"), holding=old):
        res = slot.container.get("resources") or {}
        resources: Resources = {}
        for section in ("limits", "requests"):
            values = res.get(section) or {}
            if old in values or section == "limits":  # extended resources live in limits; requests default to them
                change: dict[str, str | None] = {new_resource: str(count)}
                if old != new_resource and old in values:
                    change[old] = None  # null deletes the key
                resources[section] = change
        changes.append((slot, resources, what))
    return _resources_op(c, changes)


def _count(value: Any, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PlanError(f"{where} must be an integer >= {minimum}, got {value!r}")
    return value


def _rightsize_gpu_count(c: _Change, live: Mapping[str, Any] | None) -> list[Op]:
    n = _count(c.proposed.get("gpus_per_pod"), "proposed.gpus_per_pod")
    resource = str(c.proposed.get("resource") or WHOLE_GPU)
    return [_swap_gpu_resource(c, live, resource, n, f"{resource} {c.current.get('gpus_per_pod', '?')} -> {n}")]


def _rightsize_to_mig(c: _Change, live: Mapping[str, Any] | None) -> list[Op]:
    resource = str(c.proposed.get("resource") or "")
    if not _MIG_RESOURCE.match(resource):
        raise PlanError(f"proposed.resource {resource!r} is not a MIG resource (nvidia.com/mig-<g>g.<m>gb)")
    n = _count(c.proposed.get("count", 1), "proposed.count")
    old = c.current.get("resource") or WHOLE_GPU
    return [_swap_gpu_resource(c, live, resource, n, f"{old} -> {resource}: {n}")]


def _enable_time_slicing(c: _Change, live: Mapping[str, Any] | None) -> list[Op]:
    # The GPU operator advertises time-sliced GPUs as nvidia.com/gpu.shared (renameByDefault): asking for
    # it lands the pod on a shared device; the pool's time-slicing config is a platform setting.
    resource = str(c.proposed.get("shared_resource") or SHARED_GPU_RESOURCE)
    n = _count(c.proposed.get("count", 1), "proposed.count")
    replicas = c.proposed.get("time_slicing_replicas")
    return [_swap_gpu_resource(c, live, resource, n,
                               f"{WHOLE_GPU} -> {resource}: {n} (time-sliced, {replicas or '?'} per GPU)")]


def _move_to_spot(c: _Change, live: Mapping[str, Any] | None) -> list[Op]:
    selector = c.proposed.get("node_selector") or {"karpenter.sh/capacity-type": "spot"}
    if not isinstance(selector, Mapping) or not all(isinstance(v, str) for v in selector.values()):
        raise PlanError(f"proposed.node_selector must map label keys to strings, got {selector!r}")
    target = _target(c, live)
    _groups(c, target)  # a pod template must be there
    shown = ", ".join(f"{k}={v}" for k, v in selector.items())
    if c.target_kind not in CUSTOM_KINDS:
        spec_path = template_spec_path(c.target_kind)
        body: Any = _nest(spec_path, {"nodeSelector": dict(selector)})
        expect = {pointer(*spec_path, "nodeSelector", k): v for k, v in selector.items()}
        return [Op(verb="patch", api_path=api_path(c.target_kind, c.namespace, c.target_name), kind=c.target_kind,
                   namespace=c.namespace, name=c.target_name, patch_type="strategic", body=body, reversible=True,
                   description=f"{_where(c)}: nodeSelector {shown}", expect=expect)]
    # every pod template of the CR (each PyTorchJob replica, every Ray group): one JSON patch
    slots = [s for s in pod_spec_slots(c.target_kind, target) if isinstance(_get(target, s.path), Mapping)]
    guards = {pointer(*p): v for s in slots for p, v in s.guards}
    body = [{"op": "test", "path": p, "value": v} for p, v in sorted(guards.items())]
    expect = {}
    for s in slots:
        have = _get(target, s.path).get("nodeSelector")
        if isinstance(have, Mapping):
            body.extend({"op": "add", "path": pointer(*s.path, "nodeSelector", k), "value": v} for k, v in selector.items())
        else:
            body.append({"op": "add", "path": pointer(*s.path, "nodeSelector"), "value": dict(selector)})
        expect.update({pointer(*s.path, "nodeSelector", k): v for k, v in selector.items()})
    labels = ", ".join(s.label for s in slots if s.label)
    return [Op(verb="patch", api_path=api_path(c.target_kind, c.namespace, c.target_name), kind=c.target_kind,
               namespace=c.namespace, name=c.target_name, patch_type="json", body=body, reversible=True,
               description=f"{_where(c)}: nodeSelector {shown}" + (f" ({labels})" if labels else "")
               + _RESTART_NOTE.get(c.target_kind, ""), expect=expect, guards=guards)]


# -- replicas and autoscaling ---------------------------------------------------------------------
def _scale(c: _Change, replicas: int, why: str) -> Op:
    if c.target_kind not in _SCALABLE:
        raise PlanError(f"{c.kind}: cannot scale a {c.target_kind}; scaling applies to {', '.join(_SCALABLE)}")
    return Op(verb="scale", api_path=api_path(c.target_kind, c.namespace, c.target_name), kind=c.target_kind,
              namespace=c.namespace, name=c.target_name, patch_type="merge", body={"spec": {"replicas": replicas}},
              reversible=True, description=f"{_where(c)}: replicas -> {replicas} ({why})",
              expect={"/spec/replicas": replicas})


def _hpa_op(c: _Change, hpa_name: str, minimum: int | None, maximum: int | None, why: str) -> Op:
    spec: dict[str, int] = {}
    if minimum is not None:
        spec["minReplicas"] = minimum
    if maximum is not None:
        spec["maxReplicas"] = maximum
    return Op(verb="patch", api_path=api_path("HorizontalPodAutoscaler", c.namespace, hpa_name),
              kind="HorizontalPodAutoscaler", namespace=c.namespace, name=hpa_name, patch_type="merge",
              body={"spec": spec}, reversible=True,
              description=f"HorizontalPodAutoscaler {c.namespace}/{hpa_name}: "
                          + ", ".join(f"{k}={v}" for k, v in spec.items()) + f" ({why})",
              expect={f"/spec/{k}": v for k, v in spec.items()})


def _hpa_name(c: _Change, live: Mapping[str, Any] | None) -> str | None:
    if c.target_kind == "HorizontalPodAutoscaler":
        return c.target_name
    hpa = (live or {}).get("hpa")
    return str(hpa["metadata"]["name"]) if isinstance(hpa, Mapping) else None


def _reclaim_idle(c: _Change, live: Mapping[str, Any] | None) -> list[Op]:
    action = c.proposed.get("action", "reclaim")
    if action == "flag_owner":
        raise PlanRefused(f"change {c.id}: reclaim_idle_gpu action flag_owner is advice for the owner of "
                          f"{_where(c)} (training without checkpoints is never stopped); nothing to apply")
    if action not in ("reclaim", "stop", "stop_notebook"):
        raise PlanError(f"proposed.action {action!r} of reclaim_idle_gpu is unknown")
    if c.target_kind in CUSTOM_KINDS:
        return [_stop_custom(c, live)]
    if c.target_kind in _SUSPENDABLE:
        return [Op(verb="patch", api_path=api_path(c.target_kind, c.namespace, c.target_name), kind=c.target_kind,
                   namespace=c.namespace, name=c.target_name, patch_type="merge", body={"spec": {"suspend": True}},
                   reversible=True, description=f"{_where(c)}: suspend (releases its GPUs; resume = rollback)",
                   expect={"/spec/suspend": True})]
    return [_scale(c, 0, "idle GPUs released")]


def _merge_op(c: _Change, body: dict[str, Any], expect: dict[str, Any], what: str) -> Op:
    return Op(verb="patch", api_path=api_path(c.target_kind, c.namespace, c.target_name), kind=c.target_kind,
              namespace=c.namespace, name=c.target_name, patch_type="merge", body=body, reversible=True,
              description=f"{_where(c)}: {what}", expect=expect)


def _now(live: Mapping[str, Any] | None) -> str:
    """RFC 3339 UTC time for the stop annotation: ``live["now"]`` (the executor's clock) or now."""
    now = (live or {}).get("now")
    if isinstance(now, str) and now:
        return now
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _stop_custom(c: _Change, live: Mapping[str, Any] | None) -> Op:
    """Reclaim a CR's GPUs the way its operator understands: stop annotation, suspend, or min 0."""
    target = _target(c, live)
    if c.target_kind == "Notebook":
        when = _now(live)
        already = (_get(target, ("metadata", "annotations")) or {}).get(NOTEBOOK_STOPPED)
        return _merge_op(c, {"metadata": {"annotations": {NOTEBOOK_STOPPED: when}}},
                         {pointer("metadata", "annotations", NOTEBOOK_STOPPED): when},
                         f"stop: annotation {NOTEBOOK_STOPPED}={when} (the notebook controller scales it to 0 and "
                         "releases its GPUs; start again = rollback)" + (f"; already stopped since {already}"
                                                                          if already else ""))
    if c.target_kind == "PyTorchJob":
        return _merge_op(c, {"spec": {"runPolicy": {"suspend": True}}}, {"/spec/runPolicy/suspend": True},
                         "suspend: runPolicy.suspend=true (the training operator deletes its pods; resume = rollback)")
    if c.target_kind == "RayJob":
        return _merge_op(c, {"spec": {"suspend": True}}, {"/spec/suspend": True},
                         "suspend: spec.suspend=true (KubeRay deletes its RayCluster; resume = rollback)")
    return _isvc_min_max(c, target, 0, None, "reclaim: minReplicas=0 (serving scales to zero when idle)")


def _isvc_min_max(c: _Change, target: Mapping[str, Any], lo: int | None, hi: int | None, why: str) -> Op:
    """KServe InferenceService: ``spec.predictor.minReplicas`` / ``maxReplicas`` (merge patch)."""
    predictor = _get(target, ("spec", "predictor"))
    if not isinstance(predictor, Mapping):
        raise PlanError(f"{_where(c)} has no spec.predictor")
    current_max = predictor.get("maxReplicas")
    if lo is not None and hi is None and isinstance(current_max, int) and current_max > 0 and lo > current_max:
        raise PlanError(f"proposed.min {lo} is above the predictor's maxReplicas {current_max}")
    spec: dict[str, int] = {}
    if lo is not None:
        spec["minReplicas"] = lo
    if hi is not None:
        spec["maxReplicas"] = hi
    return _merge_op(c, {"spec": {"predictor": spec}},
                     {f"/spec/predictor/{k}": v for k, v in spec.items()},
                     "predictor " + ", ".join(f"{k}={v}" for k, v in spec.items()) + f" ({why})")


def _min_max(p: Mapping[str, Any]) -> tuple[int | None, int | None]:
    lo = p.get("min_replicas", p.get("min"))
    hi = p.get("max_replicas", p.get("max"))
    lo = None if lo is None else _count(lo, "proposed.min", minimum=1)
    hi = None if hi is None else _count(hi, "proposed.max", minimum=1)
    if lo is None and hi is None:
        raise PlanError("proposed has neither min nor max replicas")
    if lo is not None and hi is not None and lo > hi:
        raise PlanError(f"proposed.min {lo} is above proposed.max {hi}")
    return lo, hi


def _set_autoscaling(c: _Change, live: Mapping[str, Any] | None) -> list[Op]:
    lo, hi = _min_max(c.proposed)
    if c.target_kind == "InferenceService":
        return [_isvc_min_max(c, _target(c, live), lo, hi, "autoscaling")]
    hpa = _hpa_name(c, live)
    if hpa is not None:
        if lo is not None and hi is None:
            current_max = _get((live or {}).get("hpa") or (live or {}).get("target") or {}, ("spec", "maxReplicas"))
            if isinstance(current_max, int) and lo > current_max:
                raise PlanError(f"proposed.min {lo} is above the HPA's maxReplicas {current_max}")
        return [_hpa_op(c, hpa, lo, hi, "autoscaling")]
    if lo is None:
        raise PlanError(f"{_where(c)} has no HorizontalPodAutoscaler: a max alone cannot be applied")
    return [_scale(c, lo, "no HorizontalPodAutoscaler: replicas fixed at min")]


def _scale_to_zero_window(c: _Change, live: Mapping[str, Any] | None) -> list[Op]:
    p = c.proposed
    if p.get("action") == "set_min_replicas" or "scale_to_zero_utc_hours" not in p:
        lo = _count(p.get("min_replicas"), "proposed.min_replicas")
        if c.target_kind == "InferenceService":
            return [_isvc_min_max(c, _target(c, live), lo, None, "idle serving: fewer minimum replicas")]
        hpa = _hpa_name(c, live)
        if hpa is not None:
            return [_hpa_op(c, hpa, lo, None, "idle serving: fewer minimum replicas")]
        return [_scale(c, lo, "idle serving: fewer replicas")]
    if c.target_kind == "HorizontalPodAutoscaler":
        raise PlanError("an HPA's minReplicas cannot be 0 without the HPAScaleToZero feature gate; "
                        "target the Deployment / StatefulSet to scale it to zero")
    hours = p.get("scale_to_zero_utc_hours") or []
    if c.target_kind == "InferenceService":
        return [_isvc_min_max(c, _target(c, live), 0, None, f"idle serving window, UTC hours {hours[0]}-{hours[-1]}"
                              if hours else "idle serving")]
    return [_scale(c, 0, f"idle serving window, UTC hours {hours[0]}-{hours[-1]}" if hours else "idle serving")]


# -- nodes ----------------------------------------------------------------------------------------
def _evictable(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return False  # static pods belong to the kubelet
    return not any(o.get("kind") == "DaemonSet" and o.get("controller") for o in meta.get("ownerReferences") or [])


def _drain(c: _Change, nodes: list[str], live: Mapping[str, Any] | None, why: str) -> list[Op]:
    if not nodes:
        raise PlanError(f"change {c.id}: no nodes to drain")
    live = live or {}
    by_name = {n["metadata"]["name"]: n for n in live.get("nodes") or []}
    missing = [n for n in nodes if n not in by_name]
    if missing:
        raise PlanError(f"change {c.id}: node(s) {', '.join(missing)} not found in the cluster")
    pods = [p for p in live.get("pods") or [] if (p.get("spec") or {}).get("nodeName") in set(nodes)]
    pdbs = list(live.get("pdbs") or [])
    blocked = sorted(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods
                     if _evictable(p) and ((p["metadata"].get("annotations") or {}).get(DO_NOT_DISRUPT) == "true"))
    blocked += sorted(f"node {n}" for n in nodes
                      if (by_name[n]["metadata"].get("annotations") or {}).get(DO_NOT_DISRUPT) == "true")
    if blocked:
        raise PlanRefused(f"change {c.id}: refusing to drain: {', '.join(blocked)} "
                          f"annotated {DO_NOT_DISRUPT}=\"true\"; remove the annotation or drop the node from the plan")
    ops: list[Op] = []
    for n in nodes:  # cordon every node first, so evicted pods do not land on the next one to drain
        already = bool((by_name[n].get("spec") or {}).get("unschedulable"))
        ops.append(Op(verb="cordon", api_path=api_path("Node", None, n), kind="Node", namespace=None, name=n,
                      patch_type="merge", body={"spec": {"unschedulable": True}}, reversible=True,
                      description=f"cordon node {n} ({why})" + (" (already cordoned)" if already else ""),
                      expect={"/spec/unschedulable": True}))
    for n in nodes:
        on_node = sorted((p for p in pods if p["spec"]["nodeName"] == n and _evictable(p)),
                         key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
        for pod in on_node:
            ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            covering = pdbs_covering(pod, pdbs)
            names = tuple(f"{ns}/{b['metadata']['name']}" for b in covering)
            note = "".join(f"; PDB {x} allows {(b.get('status') or {}).get('disruptionsAllowed', '?')} disruption(s)"
                           for x, b in zip(names, covering, strict=True))
            ops.append(Op(verb="evict", api_path=f"{api_path('Pod', ns, name)}/eviction", kind="Pod", namespace=ns,
                          name=name, patch_type=None,
                          body={"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": ns}},
                          reversible=False, description=f"evict {ns}/{name} from node {n}{note}", pdbs=names))
    return ops


def _consolidate(c: _Change, live: Mapping[str, Any] | None) -> list[Op]:
    freed = c.proposed.get("freed_nodes")
    if not isinstance(freed, list) or not all(isinstance(n, str) for n in freed):
        raise PlanError(f"change {c.id}: proposed.freed_nodes must be a list of node names, got {freed!r}")
    pool = c.current.get("node_pool") or c.target_name
    return _drain(c, list(freed), live, f"consolidating pool {pool}")


def _cordon_drain(c: _Change, live: Mapping[str, Any] | None) -> list[Op]:
    nodes = c.proposed.get("nodes")
    if nodes is None and c.target_kind == "Node":
        nodes = [c.target_name]
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise PlanError(f"change {c.id}: proposed.nodes must be a list of node names, got {nodes!r}")
    return _drain(c, list(nodes), live, "drain")


def _set_mig_config(c: _Change, live: Mapping[str, Any] | None) -> list[Op]:
    value = c.proposed.get("mig_config") or c.proposed.get("config")
    if not isinstance(value, str) or not value or not _LABEL_VALUE.match(value) or len(value) > 63:
        raise PlanError(f"proposed.mig_config {value!r} is not a valid label value (a mig-parted config name "
                        "such as all-1g.10gb)")
    pool = c.target_name
    nodes = [n for n in (live or {}).get("nodes") or []
             if c.target_kind != "NodePool" or node_pool_of(n["metadata"].get("labels") or {}) == pool]
    if c.target_kind == "Node":
        nodes = [n for n in nodes if n["metadata"]["name"] == c.target_name]
    if not nodes:
        raise PlanError(f"change {c.id}: {c.target_kind} {pool} has no nodes in the cluster")
    ops = []
    for n in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = n["metadata"]["name"]
        before = (n["metadata"].get("labels") or {}).get(MIG_CONFIG_LABEL)
        ops.append(Op(verb="patch", api_path=api_path("Node", None, name), kind="Node", namespace=None, name=name,
                      patch_type="merge", body={"metadata": {"labels": {MIG_CONFIG_LABEL: value}}}, reversible=True,
                      description=f"node {name}: label {MIG_CONFIG_LABEL} {before or '(none)'} -> {value} "
                                  "(the GPU operator's MIG manager repartitions the GPUs)",
                      expect={pointer("metadata", "labels", MIG_CONFIG_LABEL): value}))
    return ops


_PLANNERS = {
    "rightsize_cpu_mem": _rightsize_cpu_mem,
    "rightsize_gpu_count": _rightsize_gpu_count,
    "rightsize_to_mig": _rightsize_to_mig,
    "enable_time_slicing": _enable_time_slicing,
    "reclaim_idle_gpu": _reclaim_idle,
    "scale_to_zero_window": _scale_to_zero_window,
    "set_autoscaling": _set_autoscaling,
    "move_to_spot": _move_to_spot,
    "consolidate_nodes": _consolidate,
    "cordon_drain_node": _cordon_drain,
    "set_mig_config": _set_mig_config,
}


def plan(change: Any, live: Mapping[str, Any] | None) -> list[Op]:
    """The ops for ``change`` (a ``Change`` or its dict). ``live``: ``{"target": obj, "hpa": obj}`` for
    workload kinds; ``{"nodes": [...], "pods": [...], "pdbs": [...]}`` for node kinds. Pure."""
    c = _as_change(change)
    try:
        planner = _PLANNERS[c.kind]
    except KeyError:
        raise PlanError(f"change kind {c.kind!r} has no planner; known: {', '.join(_PLANNERS)}") from None
    return planner(c, live)


def format_plan(ops: list[Op]) -> str:
    """The ``--dry-run`` printout: one numbered line per op, then its body."""
    if not ops:
        return "(no operations)"
    lines = []
    for i, op in enumerate(ops, 1):
        method = "POST" if op.verb in ("evict", "create") else "PATCH"
        kind = f" ({op.patch_type} patch)" if op.patch_type else ""
        lines.append(f"{i}. {op.verb}: {method} {op.api_path}{kind}{'' if op.reversible else '  [not reversible]'}")
        lines.append(f"   {op.description}")
        lines.append(f"   body: {json.dumps(op.body, sort_keys=True)}")
    return "\n".join(lines)
