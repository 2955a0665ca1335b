"""What node labels say about the machine: provider, capacity type and node pool.

Each managed Kubernetes flavour and autoscaler labels nodes its own way. One small class per
flavour (a registry, so a new one is one class) turns its labels into our vocabulary; the first
rule that recognises a node wins, in registry order (an autoscaler's label is more specific than
the managed node group's, so Karpenter comes before EKS).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "CAPACITY_TYPES",
    "CapacityTypeRule",
    "CAPACITY_TYPE_RULES",
    "DEFAULT_CAPACITY_TYPE",
    "NODE_POOL_LABELS",
    "capacity_type_of",
    "node_pool_of",
    "provider_of",
]

CAPACITY_TYPES = ("on_demand", "spot", "reserved")
# A node that no rule recognises is billed at the list price, which is what on-demand means; the
# warehouse prices it that way rather than leaving it unpriced.
DEFAULT_CAPACITY_TYPE = "on_demand"


@dataclass(frozen=True)
class CapacityTypeRule:
    """Reads one label and maps its (case-insensitive) values to a capacity type."""

    name: str
    label: str
    values: Mapping[str, str]

    def match(self, labels: Mapping[str, str]) -> str | None:
        raw = labels.get(self.label)
        if raw is None:
            return None
        return self.values.get(raw.strip().lower())


_TRUE = {"true": "spot"}
CAPACITY_TYPE_RULES: tuple[CapacityTypeRule, ...] = (
    CapacityTypeRule(
        "karpenter", "karpenter.sh/capacity-type", {"on-demand": "on_demand", "spot": "spot", "reserved": "reserved"}
    ),
    # EKS managed node groups; CAPACITY_BLOCK is an EC2 Capacity Block for ML (a reservation).
    CapacityTypeRule(
        "eks",
        "eks.amazonaws.com/capacityType",
        {"on_demand": "on_demand", "spot": "spot", "capacity_block": "reserved"},
    ),
    CapacityTypeRule("gke-spot", "cloud.google.com/gke-spot", _TRUE),
    CapacityTypeRule("gke-preemptible", "cloud.google.com/gke-preemptible", _TRUE),
    CapacityTypeRule(
        "gke-provisioning",
        "cloud.google.com/gke-provisioning",
        {
            "spot": "spot",
            "preemptible": "spot",
            "standard": "on_demand",
            "flex-start": "on_demand",
            "queued": "on_demand",
            "reservation": "reserved",
            "reservation-bound": "reserved",
        },
    ),
    CapacityTypeRule("aks", "kubernetes.azure.com/scalesetpriority", {"spot": "spot", "regular": "on_demand"}),
)

# In order of preference; the bare ``agentpool`` label is what older AKS clusters set.
NODE_POOL_LABELS: tuple[str, ...] = (
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "karpenter.sh/provisioner-name",  # Karpenter before v1beta1
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "agentpool",
)

_PROVIDER_SCHEMES = {"aws": "aws", "gce": "gcp", "azure": "azure"}
# When spec.providerID is missing (some self-managed clusters), the managed-service labels still
# identify the cloud.
_PROVIDER_LABEL_PREFIXES = (
    ("eks.amazonaws.com/", "aws"),
    ("cloud.google.com/", "gcp"),
    ("kubernetes.azure.com/", "azure"),
)


def capacity_type_of(labels: Mapping[str, str]) -> str:
    for rule in CAPACITY_TYPE_RULES:
        found = rule.match(labels)
        if found is not None:
            return found
    return DEFAULT_CAPACITY_TYPE


def node_pool_of(labels: Mapping[str, str]) -> str | None:
    for key in NODE_POOL_LABELS:
        value = labels.get(key)
        if value:
            return value
    return None


def provider_of(provider_id: str | None, labels: Mapping[str, str]) -> str:
    """``aws`` | ``gcp`` | ``azure`` | ``unknown`` from ``spec.providerID`` (``aws:///us-east-1a/i-..``)."""
    if provider_id and "://" in provider_id:
        scheme = provider_id.split("://", 1)[0].lower()
        if scheme in _PROVIDER_SCHEMES:
            return _PROVIDER_SCHEMES[scheme]
    for prefix, provider in _PROVIDER_LABEL_PREFIXES:
        if any(key.startswith(prefix) for key in labels):
            return provider
    return "unknown"
