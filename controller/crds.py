"""The custom workload kinds GPU clusters run (Kubeflow Notebook / PyTorchJob, KubeRay RayJob, KServe
InferenceService): where they live in the API and where their pod templates and containers sit.

Pure data and lookups, shared by the planner (which fields to patch), the kube client (custom-object
paths), the fake API server (serving and validating them) and the demo cluster (building them). A CR
has no strategic-merge support on a real API server, so every op on one is a JSON merge or JSON patch.

Shapes (the upstream CRDs):
- ``Notebook`` (kubeflow.org/v1): one pod template at ``spec.template.spec``; the notebook controller
  stops a notebook (StatefulSet to 0) while the annotation ``kubeflow-resource-stopped`` is present;
- ``PyTorchJob`` (kubeflow.org/v1): ``spec.pytorchReplicaSpecs.{Master,Worker}.template``;
  ``spec.runPolicy.suspend``;
- ``RayJob`` (ray.io/v1): ``spec.rayClusterSpec.headGroupSpec.template`` and
  ``spec.rayClusterSpec.workerGroupSpecs[i].template``; ``spec.suspend``;
- ``InferenceService`` (serving.kserve.io/v1beta1): ``spec.predictor`` inlines a PodSpec
  (``containers``, ``nodeSelector``) beside ``minReplicas`` / ``maxReplicas``; a predictor using
  ``model`` holds its one serving container there (``spec.predictor.model.resources``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CUSTOM_KINDS",
    "CUSTOM_RESOURCES",
    "KSERVE_CONTAINER",
    "NOTEBOOK_STOPPED",
    "ContainerSlot",
    "PodSpecSlot",
    "RESOURCES",
    "api_version",
    "container_slots",
    "custom_prefix",
    "pod_spec_slots",
    "pod_templates",
]

NOTEBOOK_STOPPED = "kubeflow-resource-stopped"
KSERVE_CONTAINER = "kserve-container"  # the name KServe gives the model's container

# kind -> (group, version, plural); all namespaced
CUSTOM_RESOURCES: dict[str, tuple[str, str, str]] = {
    "Notebook": ("kubeflow.org", "v1", "notebooks"),
    "PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs"),
    "RayJob": ("ray.io", "v1", "rayjobs"),
    "InferenceService": ("serving.kserve.io", "v1beta1", "inferenceservices"),
}
CUSTOM_KINDS = frozenset(CUSTOM_RESOURCES)

# InferenceService predictor fields that are not PodSpec fields (ComponentExtensionSpec + framework specs)
_PREDICTOR_EXTRA = frozenset({
    "minReplicas", "maxReplicas", "scaleTarget", "scaleMetric", "scaleMetricType", "containerConcurrency",
    "timeout", "canaryTrafficPercent", "logger", "batcher", "labels", "annotations", "deploymentStrategy",
    "autoScaling", "workerSpec", "model", "sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx",
    "huggingface", "pmml", "lightgbm", "paddle",
})
_MODEL_EXTRA = frozenset({"modelFormat", "runtime", "storageUri", "storage", "protocolVersion"})
_REPLICA_ORDER = ("Master", "Worker")


def api_version(kind: str) -> str:
    group, version, _ = CUSTOM_RESOURCES[kind]
    return f"{group}/{version}"


def custom_prefix(kind: str) -> str:
    return f"/apis/{api_version(kind)}"



# kind -> (API prefix, plural, namespaced): every kind the controller reads or writes
RESOURCES: dict[str, tuple[str, str, bool]] = {
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "StatefulSet": ("/apis/apps/v1", "statefulsets", True),
    "Job": ("/apis/batch/v1", "jobs", True),
    "CronJob": ("/apis/batch/v1", "cronjobs", True),
    "HorizontalPodAutoscaler": ("/apis/autoscaling/v2", "horizontalpodautoscalers", True),
    "Node": ("/api/v1", "nodes", False),
    "Pod": ("/api/v1", "pods", True),
    "PodDisruptionBudget": ("/apis/policy/v1", "poddisruptionbudgets", True),
    **{k: (custom_prefix(k), plural, True) for k, (_, _, plural) in CUSTOM_RESOURCES.items()},
}


Path = tuple[str | int, ...]


@dataclass(frozen=True)
class PodSpecSlot:
    """A PodSpec-like dict of a CR: ``path`` to it, a label for messages, ``guards`` (pointer parts ->
    value) that must still hold when the path goes through a list index (a Ray worker group's name)."""

    path: Path
    label: str
    guards: tuple[tuple[Path, Any], ...] = ()


@dataclass(frozen=True)
class ContainerSlot:
    """One container: ``path`` to its dict, its ``name``, and the group (pod spec) it belongs to."""

    path: Path
    name: str
    container: Mapping[str, Any]
    group: PodSpecSlot


def _get(obj: Any, path: Path) -> Any:
    for part in path:
        if isinstance(part, int):
            if not isinstance(obj, list) or part >= len(obj):
                return None
        elif not isinstance(obj, Mapping):
            return None
        obj = obj[part] if isinstance(part, int) else obj.get(part)
    return obj


def pod_spec_slots(kind: str, obj: Mapping[str, Any]) -> list[PodSpecSlot]:
    """Every PodSpec-like dict of a custom object (where containers and nodeSelector live)."""
    if kind == "Notebook":
        return [PodSpecSlot(("spec", "template", "spec"), "")]
    if kind == "PyTorchJob":
        specs = _get(obj, ("spec", "pytorchReplicaSpecs")) or {}
        names = [k for k in _REPLICA_ORDER if k in specs] + sorted(k for k in specs if k not in _REPLICA_ORDER)
        return [PodSpecSlot(("spec", "pytorchReplicaSpecs", k, "template", "spec"), f"replica {k}") for k in names]
    if kind == "RayJob":
        out = [PodSpecSlot(("spec", "rayClusterSpec", "headGroupSpec", "template", "spec"), "head group")]
        for i, g in enumerate(_get(obj, ("spec", "rayClusterSpec", "workerGroupSpecs")) or []):
            name = (g or {}).get("groupName")
            guard: tuple[tuple[Path, Any], ...] = (
                (("spec", "rayClusterSpec", "workerGroupSpecs", i, "groupName"), name),) if name else ()
            out.append(PodSpecSlot(("spec", "rayClusterSpec", "workerGroupSpecs", i, "template", "spec"),
                                   f"worker group {name or i}", guard))
        return out
    if kind == "InferenceService":
        return [PodSpecSlot(("spec", "predictor"), "predictor")]
    raise KeyError(kind)


def container_slots(kind: str, obj: Mapping[str, Any]) -> list[list[ContainerSlot]]:
    """The containers of every pod spec of a custom object, one list per pod spec (group)."""
    out: list[list[ContainerSlot]] = []
    for slot in pod_spec_slots(kind, obj):
        spec = _get(obj, slot.path)
        if not isinstance(spec, Mapping):
            continue
        group: list[ContainerSlot] = []
        model = spec.get("model") if kind == "InferenceService" else None
        if isinstance(model, Mapping):
            group.append(ContainerSlot((*slot.path, "model"), str(model.get("name") or KSERVE_CONTAINER),
                                       model, slot))
        for i, c in enumerate(spec.get("containers") or []):
            if isinstance(c, Mapping):
                group.append(ContainerSlot((*slot.path, "containers", i), str(c.get("name")), c, slot))
        out.append(group)
    return out


def pod_templates(kind: str, obj: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, a core/v1 PodTemplateSpec) for every pod template a custom object embeds: what can be
    validated with the Kubernetes schemas (the CR's own fields have no published schema here)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for slot in pod_spec_slots(kind, obj):
        where = ".".join(str(p) for p in slot.path)
        spec = _get(obj, slot.path)
        if not isinstance(spec, Mapping):
            out.append((where, {"spec": spec}))  # missing / not an object: invalid as a PodSpec
            continue
        if kind == "InferenceService":
            pod = {k: v for k, v in spec.items() if k not in _PREDICTOR_EXTRA}
            model = spec.get("model")
            if isinstance(model, Mapping):
                container = {k: v for k, v in model.items() if k not in _MODEL_EXTRA}
                container.setdefault("name", KSERVE_CONTAINER)
                pod["containers"] = [container, *(pod.get("containers") or [])]
            out.append((where, {"spec": pod}))
            continue
        template = _get(obj, slot.path[:-1])
        tmpl = dict(template) if isinstance(template, Mapping) else {}
        out.append((where, tmpl))
    return out
