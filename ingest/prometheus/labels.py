"""Map Prometheus label sets onto the identity columns of ``gpu_samples`` and ``container_usage``.

Both dcgm-exporter generations are read: the old one labels the node ``Hostname`` and the pod
``pod_name``/``pod_namespace``/``container_name``; the new one uses ``hostname`` and
``pod``/``namespace``/``container``. When Prometheus scrapes the exporter without
``honor_labels``, the exporter's pod labels collide with the scrape target's own and are renamed
``exported_pod``/``exported_namespace``/``exported_container``, while ``pod`` then names the
exporter pod itself: the ``exported_*`` labels win, and an exporter container on its own is no pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["DcgmLabelMap", "UsageLabelMap", "ServingLabelMap", "LabelError", "DCGM_IDENTITY", "USAGE_IDENTITY",
           "SERVING_IDENTITY"]

DCGM_IDENTITY = ("hostname", "gpu", "uuid", "model_name", "mig_profile", "mig_instance", "namespace", "pod", "container")
USAGE_IDENTITY = ("namespace", "pod", "container")
SERVING_IDENTITY = ("namespace", "pod", "model")


class LabelError(ValueError):
    """A series whose labels cannot give the required identity columns (it is skipped and counted)."""


def _first(labels: Mapping[str, str], *names: str) -> str | None:
    for n in names:
        v = labels.get(n)
        if v:
            return v
    return None


def _int(labels: Mapping[str, str], name: str, *, required: bool) -> int | None:
    raw = labels.get(name)
    if raw is None or raw == "":
        if required:
            raise LabelError(f"no {name!r} label")
        return None
    try:
        return int(raw)
    except ValueError:
        raise LabelError(f"label {name}={raw!r} is not an integer") from None


@dataclass(frozen=True)
class DcgmLabelMap:
    """dcgm-exporter labels -> (hostname, gpu, uuid, model_name, mig_profile, mig_instance, namespace, pod, container)."""

    hostname_labels: tuple[str, ...] = ("hostname", "Hostname", "node", "kubernetes_node")
    # Containers that are the exporter itself: a series carrying only these pod labels is unassigned.
    exporter_containers: frozenset[str] = frozenset({"nvidia-dcgm-exporter", "dcgm-exporter"})

    def identity(self, labels: Mapping[str, str]) -> tuple:
        host = _first(labels, *self.hostname_labels)
        if host is None:
            raise LabelError(f"no hostname label (looked for {', '.join(self.hostname_labels)})")
        gpu = _int(labels, "gpu", required=True)
        mig_instance = _int(labels, "GPU_I_ID", required=False)
        ns, pod, container = self._pod(labels)
        return (
            host,
            gpu,
            labels.get("UUID") or labels.get("uuid") or None,
            labels.get("modelName") or None,
            labels.get("GPU_I_PROFILE") or None,
            mig_instance,
            ns,
            pod,
            container,
        )

    def _pod(self, labels: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
        if labels.get("exported_pod"):
            return (
                _first(labels, "exported_namespace", "namespace"),
                labels["exported_pod"],
                _first(labels, "exported_container"),
            )
        pod = _first(labels, "pod", "pod_name")
        container = _first(labels, "container", "container_name")
        if pod is None or container in self.exporter_containers:
            return None, None, None
        return _first(labels, "namespace", "pod_namespace"), pod, container


@dataclass(frozen=True)
class UsageLabelMap:
    """cAdvisor labels (``pod``/``container`` or the pre-1.16 ``pod_name``/``container_name``)."""

    def identity(self, labels: Mapping[str, str]) -> tuple:
        ns = labels.get("namespace")
        pod = _first(labels, "pod", "pod_name")
        container = _first(labels, "container", "container_name")
        missing = [n for n, v in (("namespace", ns), ("pod", pod), ("container", container)) if not v]
        if missing:
            raise LabelError(f"no {'/'.join(missing)} label")
        return (ns, pod, container)


@dataclass(frozen=True)
class ServingLabelMap:
    """Serving-counter labels (vLLM: ``model_name``; the scrape's ``namespace``/``pod``, or the
    ``exported_*`` ones when a gateway or proxy is scraped without ``honor_labels``).

    A series without a pod label is kept (namespace and pod null): the warehouse counts its requests
    as unmatched instead of dropping them.
    """

    model_labels: tuple[str, ...] = ("model_name", "model", "model_id")

    def identity(self, labels: Mapping[str, str]) -> tuple:
        ns: str | None
        pod: str | None
        if labels.get("exported_pod"):
            ns, pod = _first(labels, "exported_namespace", "namespace"), labels["exported_pod"]
        else:
            ns, pod = _first(labels, "namespace"), _first(labels, "pod", "pod_name")
        return (ns, pod, _first(labels, *self.model_labels))
