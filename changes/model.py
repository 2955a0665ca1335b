"""The change lifecycle's vocabulary: actors and roles, statuses and allowed transitions, and the
frozen ``Change`` / ``Approval`` / ``AuditEntry`` values the service hands out (no I/O here).

Lifecycle (DESIGN §5)::

    proposed ──> approved ──> applying ──> applied ──> verified
        │            │            │           │  │         │
        └──> rejected <┘          └──> failed <┘  └──> rolled_back <── (failed, verified)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gpufinops.views.names import FINANCE, PLATFORM_ADMIN

__all__ = [
    "Actor",
    "PLATFORM_ADMIN",
    "FINANCE",
    "PROPOSED",
    "APPROVED",
    "REJECTED",
    "APPLYING",
    "APPLIED",
    "FAILED",
    "VERIFIED",
    "ROLLED_BACK",
    "STATUSES",
    "TRANSITIONS",
    "WORKLOAD_KINDS",
    "NODE_KINDS",
    "TARGET_KINDS",
    "Approval",
    "Change",
    "AuditEntry",
]

# the one role vocabulary of every face (gpufinops.views.names)
_LEAD = "team-lead:"
_MEMBER = "member:"


@dataclass(frozen=True)
class Actor:
    """Who is acting. Roles: ``platform-admin``, ``finance``, ``team-lead:<team>``, ``member:<team>``."""

    name: str
    roles: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_admin(self) -> bool:
        return PLATFORM_ADMIN in self.roles

    @property
    def is_finance(self) -> bool:
        return FINANCE in self.roles

    @property
    def led_teams(self) -> set[str]:
        return {r[len(_LEAD):] for r in self.roles if r.startswith(_LEAD)}

    @property
    def member_teams(self) -> set[str]:
        """Teams this actor belongs to (a lead is a member of the teams it leads)."""
        return {r[len(_MEMBER):] for r in self.roles if r.startswith(_MEMBER)} | self.led_teams

    def can_see_team(self, team: str | None) -> bool:
        """Admin and finance see everything; others their own teams; ``None`` (platform) admin/finance only."""
        if self.is_admin or self.is_finance:
            return True
        return team is not None and team in self.member_teams


PROPOSED = "proposed"
APPROVED = "approved"
REJECTED = "rejected"
APPLYING = "applying"
APPLIED = "applied"
FAILED = "failed"
VERIFIED = "verified"
ROLLED_BACK = "rolled_back"
STATUSES = (PROPOSED, APPROVED, REJECTED, APPLYING, APPLIED, FAILED, VERIFIED, ROLLED_BACK)

TRANSITIONS: dict[str, set[str]] = {
    PROPOSED: {APPROVED, REJECTED},
    APPROVED: {APPLYING, REJECTED},
    APPLYING: {APPLIED, FAILED},
    APPLIED: {VERIFIED, ROLLED_BACK, FAILED},
    FAILED: {ROLLED_BACK},
    VERIFIED: {ROLLED_BACK},
    REJECTED: set(),
    ROLLED_BACK: set(),
}

# approved by the team lead of the namespace (policy "team-lead")
WORKLOAD_KINDS = frozenset({
    "reclaim_idle_gpu",
    "rightsize_gpu_count",
    "rightsize_to_mig",
    "enable_time_slicing",
    "rightsize_cpu_mem",
    "move_to_spot",
    "scale_to_zero_window",
    "set_autoscaling",
})
# approved by a platform admin; namespace is null, the target a NodePool or Node
NODE_KINDS = frozenset({"consolidate_nodes", "cordon_drain_node", "set_mig_config"})
TARGET_KINDS = frozenset({
    "Deployment", "StatefulSet", "Job", "CronJob", "HorizontalPodAutoscaler", "NodePool", "Node",
    # the custom workloads GPU clusters run (Kubeflow, Ray, KServe); the controller patches them
    "Notebook", "PyTorchJob", "RayJob", "InferenceService",
})


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class Approval:
    id: str
    change_id: str
    actor: str
    decision: str  # approve | reject
    reason: str | None
    at: datetime
    resource_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "change_id": self.change_id, "actor": self.actor, "decision": self.decision,
                "reason": self.reason, "at": _iso(self.at), "resource_version": self.resource_version}


@dataclass(frozen=True)
class Change:
    id: str
    kind: str
    cluster: str
    namespace: str | None
    target_kind: str
    target_name: str
    team: str | None
    recommendation_id: str | None
    requested_by: str
    ticket: str | None
    reason: str | None
    current: dict[str, Any]
    proposed: dict[str, Any]
    evidence: dict[str, Any]
    evidence_at: datetime | None
    target_resource_version: str | None
    status: str
    version: int
    approvals_required: int
    plan: list[dict[str, Any]] | None
    prior_spec: dict[str, Any] | None
    result: dict[str, Any] | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    applied_at: datetime | None
    verified_at: datetime | None
    approvals: list[Approval] = field(default_factory=list)

    @property
    def is_node_action(self) -> bool:
        return self.kind in NODE_KINDS

    @property
    def approvers(self) -> list[str]:
        return [a.actor for a in self.approvals if a.decision == "approve"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (timestamps as ISO 8601 UTC strings)."""
        return {
            "id": self.id, "kind": self.kind, "cluster": self.cluster, "namespace": self.namespace,
            "target_kind": self.target_kind, "target_name": self.target_name, "team": self.team,
            "recommendation_id": self.recommendation_id, "requested_by": self.requested_by,
            "ticket": self.ticket, "reason": self.reason, "current": self.current, "proposed": self.proposed,
            "evidence": self.evidence, "evidence_at": _iso(self.evidence_at),
            "target_resource_version": self.target_resource_version, "status": self.status,
            "version": self.version, "approvals_required": self.approvals_required, "plan": self.plan,
            "prior_spec": self.prior_spec, "result": self.result, "error": self.error,
            "created_at": _iso(self.created_at), "updated_at": _iso(self.updated_at),
            "applied_at": _iso(self.applied_at), "verified_at": _iso(self.verified_at),
            "approvals": [a.to_dict() for a in self.approvals],
        }


@dataclass(frozen=True)
class AuditEntry:
    seq: int
    at: datetime
    actor: str
    action: str
    change_id: str | None
    from_status: str | None
    to_status: str | None
    reason: str | None
    details: dict[str, Any] | None
    prev_hash: str
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "at": _iso(self.at), "actor": self.actor, "action": self.action,
                "change_id": self.change_id, "from_status": self.from_status, "to_status": self.to_status,
                "reason": self.reason, "details": self.details, "prev_hash": self.prev_hash, "hash": self.hash}
