"""The change lifecycle over the app DB: propose, approve/reject, the apply gates, and the controller's
transitions. Every method is one transaction that writes one audit entry per state change.

Concurrency: transitions are conditional UPDATEs on (id, status, version); the row is read FOR UPDATE
on PostgreSQL, and on SQLite every write transaction takes the file's write lock up front (BEGIN
IMMEDIATE). ``begin_apply`` additionally holds a PostgreSQL advisory lock so that the blast-radius
counts of two changes applied at once cannot both pass. Of two concurrent approvers or appliers of
one change exactly one wins; the other gets Conflict.

Visibility: an actor who cannot see a change's team gets NotFound, never Forbidden. A policy gate that
refuses raises PolicyRefused(gate) and leaves a ``refused`` entry in the audit log.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping, func, insert, select, text, update

from changes import audit as audit_mod
from changes import idempotency
from changes.model import (
    APPLIED,
    APPLYING,
    APPROVED,
    FAILED,
    FINANCE,
    NODE_KINDS,
    PLATFORM_ADMIN,
    PROPOSED,
    REJECTED,
    ROLLED_BACK,
    TARGET_KINDS,
    TRANSITIONS,
    VERIFIED,
    WORKLOAD_KINDS,
    Actor,
    Approval,
    AuditEntry,
    Change,
)
from changes.policy import Policy
from changes.teams import TeamOf, seed_team_resolver, warehouse_kind_resolver, warehouse_team_resolver
from gpufinops.appdb import as_utc, begin_write, new_approval_id, new_change_id, open_app_db
from gpufinops.appdb.schema import approvals, audit_log, changes, control_flags, recommendations
from gpufinops.errors import BadRequest, Conflict, Forbidden, NotFound, PolicyRefused
from gpufinops.settings import Settings

__all__ = ["ChangeService", "utcnow", "ACTIVE_STATUSES", "APPLY_LOCK_KEY", "nodes_of"]

APPLY_LOCK_KEY = 7_301_220_003
ACTIVE_STATUSES = (PROPOSED, APPROVED, APPLYING, APPLIED)
KindOf = Callable[[str, str | None, str | None], str | None]


def utcnow() -> datetime:
    return datetime.now(UTC)


def nodes_of(kind: str, target_kind: str, target_name: str, proposed: dict[str, Any]) -> int:
    """How many nodes a node action cordons/drains (the blast-radius unit)."""
    if kind not in NODE_KINDS:
        return 0
    for key in ("freed_nodes", "nodes"):
        value = proposed.get(key)
        if isinstance(value, list):
            return len(value)
    if proposed.get("node"):
        return 1
    return 1 if target_kind == "Node" else 0


class ChangeService:
    def __init__(self, engine: Engine, policy: Policy, *, team_of: TeamOf | None = None,
                 clock: Callable[[], datetime] = utcnow, kind_of: KindOf | None = None) -> None:
        self.engine = engine
        self.policy = policy
        self.team_of: TeamOf = team_of or seed_team_resolver()
        self.kind_of = kind_of  # (cluster, namespace, workload) -> K8s kind, for recommendations without one
        self.clock = clock

    @classmethod
    def from_settings(cls, settings: Settings, *, clock: Callable[[], datetime] = utcnow) -> ChangeService:
        """The app DB (opened and upgraded), the configured policy, teams from the warehouse."""
        engine = open_app_db(settings.effective_app_db_url)
        return cls(engine, Policy.load(settings.change_policy),
                   team_of=warehouse_team_resolver(settings.warehouse_path), clock=clock,
                   kind_of=warehouse_kind_resolver(settings.warehouse_path))

    # ------------------------------------------------------------------ plumbing

    def _now(self) -> datetime:
        now = self.clock()
        if now.tzinfo is None:
            return now.replace(tzinfo=UTC)
        return now.astimezone(UTC)

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        with begin_write(self.engine) as conn:
            yield conn

    def _row(self, conn: Connection, change_id: str, *, for_update: bool = False) -> RowMapping | None:
        q = select(changes).where(changes.c.id == change_id)
        if for_update:
            q = q.with_for_update()
        return conn.execute(q).mappings().first()

    def _load(self, conn: Connection, change_id: str, actor: Actor | None = None, *,
              for_update: bool = False) -> Change:
        row = self._row(conn, change_id, for_update=for_update)
        if row is None or (actor is not None and not actor.can_see_team(row["team"])):
            raise NotFound(f"change {change_id} not found")
        return self._to_change(conn, row)

    def _to_change(self, conn: Connection, row: RowMapping) -> Change:
        aprs = [
            Approval(id=a["id"], change_id=a["change_id"], actor=a["actor"], decision=a["decision"],
                     reason=a["reason"], at=as_utc(a["at"]) or self._now(), resource_version=a["resource_version"])
            for a in conn.execute(select(approvals).where(approvals.c.change_id == row["id"])
                                  .order_by(approvals.c.at, approvals.c.id)).mappings()
        ]
        created, updated = as_utc(row["created_at"]), as_utc(row["updated_at"])
        assert created is not None and updated is not None
        return Change(
            id=row["id"], kind=row["kind"], cluster=row["cluster"], namespace=row["namespace"],
            target_kind=row["target_kind"], target_name=row["target_name"], team=row["team"],
            recommendation_id=row["recommendation_id"], requested_by=row["requested_by"], ticket=row["ticket"],
            reason=row["reason"], current=row["current"] or {}, proposed=row["proposed"] or {},
            evidence=row["evidence"] or {}, evidence_at=as_utc(row["evidence_at"]),
            target_resource_version=row["target_resource_version"], status=row["status"], version=row["version"],
            approvals_required=row["approvals_required"], plan=row["plan"], prior_spec=row["prior_spec"],
            result=row["result"], error=row["error"], created_at=created, updated_at=updated,
            applied_at=as_utc(row["applied_at"]), verified_at=as_utc(row["verified_at"]), approvals=aprs,
        )

    def _transition(self, conn: Connection, change: Change, to: str | None, *, actor: Actor, action: str,
                    reason: str | None = None, details: dict[str, Any] | None = None,
                    values: dict[str, Any] | None = None, now: datetime | None = None) -> Change:
        """Conditional UPDATE (status and version as read) + one audit entry. ``to`` None = same status."""
        target = to or change.status
        if to is not None and to not in TRANSITIONS[change.status]:
            raise Conflict(f"change {change.id} is {change.status}; it cannot become {to} "
                           f"(allowed: {', '.join(sorted(TRANSITIONS[change.status])) or 'none'})")
        now = now or self._now()
        done = conn.execute(
            update(changes)
            .where(changes.c.id == change.id, changes.c.status == change.status, changes.c.version == change.version)
            .values(status=target, version=change.version + 1, updated_at=now, **(values or {}))
        )
        if done.rowcount != 1:
            raise Conflict(f"change {change.id} was changed by someone else (version {change.version} is stale)")
        audit_mod.append(conn, actor=actor.name, action=action, change_id=change.id, from_status=change.status,
                         to_status=target, reason=reason, details=details, at=now)
        return self._load(conn, change.id)

    def _refused(self, exc: PolicyRefused, *, actor: Actor, change: Change, attempt: str) -> None:
        """Leave a trace of a refused attempt (its own transaction: the attempt's was rolled back)."""
        with self._tx() as conn:
            audit_mod.append(conn, actor=actor.name, action="refused", change_id=change.id,
                             from_status=change.status, to_status=None, reason=str(exc),
                             details={"gate": exc.gate, "attempt": attempt}, at=self._now())

    # ------------------------------------------------------------------ roles

    def approver_roles(self, change: Change | str, team: str | None = None) -> list[str]:
        """The concrete roles that may approve (``team-lead`` resolved to ``team-lead:<team>``; for a
        change without a team a platform-admin stands in for the lead)."""
        kind = change.kind if isinstance(change, Change) else change
        if isinstance(change, Change):
            team = change.team
        roles: list[str] = []
        for r in self.policy.for_kind(kind).approvers:
            if r == "team-lead":
                roles.append(f"team-lead:{team}" if team else PLATFORM_ADMIN)
            else:
                roles.append(r)
        return list(dict.fromkeys(roles))

    def may_approve(self, actor: Actor, change: Change) -> bool:
        return any(r in actor.roles for r in self.approver_roles(change))

    def may_apply(self, actor: Actor, change: Change) -> bool:
        """Platform admins, the team's lead, and the requester (after approval) may apply/roll back."""
        if actor.is_admin or actor.name == change.requested_by:
            return True
        return change.team is not None and change.team in actor.led_teams

    def _check_apply_role(self, actor: Actor, change: Change, what: str) -> None:
        if not self.may_apply(actor, change):
            need = f"{PLATFORM_ADMIN} or team-lead:{change.team}" if change.team else PLATFORM_ADMIN
            raise Forbidden(f"{what} change {change.id} needs role {need} (or being its requester)")

    # ------------------------------------------------------------------ create

    def create(self, *, actor: Actor, kind: str, cluster: str, namespace: str | None, target_kind: str,
               target_name: str, current: dict[str, Any], proposed: dict[str, Any], ticket: str | None = None,
               reason: str | None = None, evidence: dict[str, Any] | None = None,
               evidence_at: datetime | None = None, recommendation_id: str | None = None,
               target_resource_version: str | None = None, idempotency_key: str | None = None) -> Change:
        if kind not in WORKLOAD_KINDS and kind not in NODE_KINDS:
            raise BadRequest(f"kind {kind!r} is not a change kind (one of: "
                             f"{', '.join(sorted(WORKLOAD_KINDS | NODE_KINDS))})")
        if target_kind not in TARGET_KINDS:
            raise BadRequest(f"target_kind {target_kind!r} is not supported (one of: {', '.join(sorted(TARGET_KINDS))})")
        if not cluster:
            raise BadRequest("cluster is required")
        if not target_name:
            raise BadRequest("target_name is required")
        if kind in WORKLOAD_KINDS and not namespace:
            raise BadRequest(f"namespace is required for a workload change ({kind})")
        if kind in NODE_KINDS:
            namespace = None
        team = None if kind in NODE_KINDS else self.team_of(cluster, namespace)
        if not actor.can_see_team(team):
            need = f"member:{team}" if team else PLATFORM_ADMIN
            raise Forbidden(f"proposing a change in {cluster}/{namespace or '-'} needs role {need} or {PLATFORM_ADMIN}")
        if not self.policy.ticket_ok(ticket):
            raise PolicyRefused("ticket", f"ticket {ticket!r} does not match the policy's ticket_pattern "
                                          f"{self.policy.ticket_pattern!r}")
        request = {
            "kind": kind, "cluster": cluster, "namespace": namespace, "target_kind": target_kind,
            "target_name": target_name, "current": current, "proposed": proposed, "ticket": ticket, "reason": reason,
            "evidence": evidence, "evidence_at": evidence_at, "recommendation_id": recommendation_id,
            "target_resource_version": target_resource_version,
        }
        rhash = idempotency.request_hash(request)
        method = "ChangeService.create"
        now = self._now()
        with self._tx() as conn:
            if idempotency_key:
                stored = idempotency.lookup(conn, actor=actor.name, key=idempotency_key, method_path=method,
                                            request_hash=rhash)
                if stored is not None:
                    return self._load(conn, stored.response["id"])
            if recommendation_id:
                open_ = conn.execute(select(changes.c.id, changes.c.status).where(
                    changes.c.recommendation_id == recommendation_id, changes.c.status.in_(ACTIVE_STATUSES))).first()
                if open_ is not None:
                    raise Conflict(f"recommendation {recommendation_id} already has change {open_.id} ({open_.status})")
            cid = new_change_id()
            conn.execute(insert(changes).values(
                id=cid, kind=kind, cluster=cluster, namespace=namespace, target_kind=target_kind,
                target_name=target_name, team=team, recommendation_id=recommendation_id, requested_by=actor.name,
                ticket=ticket, reason=reason, current=audit_mod.jsonable(current or {}),
                proposed=audit_mod.jsonable(proposed or {}), evidence=audit_mod.jsonable(evidence or {}),
                evidence_at=as_utc(evidence_at), target_resource_version=target_resource_version, status=PROPOSED,
                version=1, approvals_required=self.policy.for_kind(kind).approvals, created_at=now, updated_at=now,
            ))
            audit_mod.append(conn, actor=actor.name, action="propose", change_id=cid, from_status=None,
                             to_status=PROPOSED, reason=reason,
                             details={"kind": kind, "cluster": cluster, "namespace": namespace,
                                      "target": f"{target_kind}/{target_name}", "team": team, "ticket": ticket,
                                      "recommendation_id": recommendation_id}, at=now)
            if idempotency_key:
                idempotency.save(conn, actor=actor.name, key=idempotency_key, method_path=method, request_hash=rhash,
                                 response={"id": cid}, status_code=201, at=now)
            return self._load(conn, cid)

    def create_from_recommendation(self, rec_id: str, *, actor: Actor, ticket: str | None = None,
                                   reason: str | None = None, target_kind: str | None = None,
                                   idempotency_key: str | None = None) -> Change:
        with self.engine.connect() as conn:
            rec = conn.execute(select(recommendations).where(recommendations.c.id == rec_id)).mappings().first()
        if rec is None:
            raise NotFound(f"recommendation {rec_id} not found")
        if rec["status"] in ("resolved", "dismissed"):
            raise Conflict(f"recommendation {rec_id} is {rec['status']}; only open ones can become changes")
        kind = rec["kind"]
        current, proposed = dict(rec["current"] or {}), dict(rec["proposed"] or {})
        workload = rec["workload"] or ""
        if kind in NODE_KINDS:
            target_kind = target_kind or "NodePool"
            target_name = str(current.get("node_pool") or workload.removeprefix("nodepool/"))
        else:
            target_kind = (target_kind or current.get("workload_kind")
                           or (self.kind_of(rec["cluster"], rec["namespace"], workload) if self.kind_of else None)
                           or "Deployment")
            target_name = workload
        team = None if kind in NODE_KINDS else self.team_of(rec["cluster"], rec["namespace"])
        if not actor.can_see_team(team):
            raise NotFound(f"recommendation {rec_id} not found")
        evidence_at = as_utc(rec["last_seen_at"]) or as_utc(rec["updated_at"])
        return self.create(
            actor=actor, kind=kind, cluster=rec["cluster"], namespace=rec["namespace"], target_kind=target_kind,
            target_name=target_name, current=current, proposed=proposed, ticket=ticket,
            reason=reason or f"from recommendation {rec_id}",
            # the estimate as it stood when the change was proposed (fct_change_outcomes compares with it)
            evidence={**dict(rec["evidence"] or {}), "est_monthly_savings_usd": rec["est_monthly_savings_usd"]},
            evidence_at=evidence_at, recommendation_id=rec_id, idempotency_key=idempotency_key,
        )

    # ------------------------------------------------------------------ decisions

    def _check_approver(self, actor: Actor, change: Change, verb: str) -> None:
        if not self.may_approve(actor, change):
            raise Forbidden(f"{verb} {change.kind} change {change.id} needs role "
                            f"{' or '.join(self.approver_roles(change))}")

    def approve(self, change_id: str, *, actor: Actor, reason: str,
                resource_version: str | None = None) -> Change:
        try:
            with self._tx() as conn:
                change = self._load(conn, change_id, actor, for_update=True)
                self._check_approver(actor, change, "approving")
                if actor.name == change.requested_by:
                    raise PolicyRefused("four_eyes", f"{actor.name} requested change {change.id} and may not "
                                                     f"approve it; another approver is needed")
                if change.status != PROPOSED:
                    raise Conflict(f"change {change.id} is {change.status}; only proposed changes can be approved")
                if actor.name in {a.actor for a in change.approvals}:
                    raise Conflict(f"{actor.name} already decided on change {change.id}")
                now = self._now()
                rv = resource_version or change.target_resource_version
                conn.execute(insert(approvals).values(
                    id=new_approval_id(), change_id=change.id, actor=actor.name, decision="approve", reason=reason,
                    at=now, resource_version=rv))
                count = len(change.approvers) + 1
                done = count >= change.approvals_required
                return self._transition(
                    conn, change, APPROVED if done else None, actor=actor, action="approve", reason=reason,
                    details={"approvals": count, "required": change.approvals_required, "resource_version": rv},
                    now=now)
        except PolicyRefused as exc:
            self._refused(exc, actor=actor, change=self.get(change_id), attempt="approve")
            raise

    def reject(self, change_id: str, *, actor: Actor, reason: str) -> Change:
        if not reason or not reason.strip():
            raise BadRequest("reason is required to reject a change")
        with self._tx() as conn:
            change = self._load(conn, change_id, actor, for_update=True)
            if actor.name != change.requested_by:  # the requester may withdraw their own
                self._check_approver(actor, change, "rejecting")
            if REJECTED not in TRANSITIONS[change.status]:
                raise Conflict(f"change {change.id} is {change.status}; it cannot be rejected")
            now = self._now()
            if actor.name not in {a.actor for a in change.approvals}:
                conn.execute(insert(approvals).values(
                    id=new_approval_id(), change_id=change.id, actor=actor.name, decision="reject", reason=reason,
                    at=now, resource_version=change.target_resource_version))
            return self._transition(conn, change, REJECTED, actor=actor, action="reject", reason=reason, now=now)

    # ------------------------------------------------------------------ apply gates

    def is_paused(self, conn: Connection | None = None) -> bool:
        if self.policy.paused:
            return True
        if conn is None:
            with self.engine.connect() as c:
                return self.is_paused(c)
        value = conn.execute(select(control_flags.c.value).where(control_flags.c.name == "paused")).scalar()
        return bool(value)

    def _entered_applying_since(self, conn: Connection, since: datetime) -> builtins.list[RowMapping]:
        q = (select(changes.c.id, changes.c.kind, changes.c.team, changes.c.target_kind, changes.c.target_name,
                    changes.c.proposed)
             .where(changes.c.id.in_(select(audit_log.c.change_id).where(audit_log.c.to_status == APPLYING,
                                                                          audit_log.c.action == "begin_apply",
                                                                          audit_log.c.at >= since))))
        return builtins.list(conn.execute(q).mappings())

    def _gates(self, conn: Connection, change: Change, now: datetime,
               current_resource_version: str | None) -> dict[str, Any]:
        p = self.policy
        if self.is_paused(conn):
            raise PolicyRefused("paused", "changes are paused (policy `paused` or `gpufinops changes pause`); "
                                          "resume to apply")
        if not p.ticket_ok(change.ticket):
            raise PolicyRefused("ticket", f"change {change.id} has ticket {change.ticket!r}, which does not match "
                                          f"ticket_pattern {p.ticket_pattern!r}")
        window = p.open_window(change.kind, now)
        if window is None:
            raise PolicyRefused("window", f"{now:%a %Y-%m-%d %H:%M} UTC is outside the maintenance windows of "
                                          f"{change.kind} ({p.window_text(change.kind)})")
        valid = [a for a in change.approvals if a.decision == "approve"]
        if p.approval_ttl_hours is not None:
            ttl = timedelta(hours=p.approval_ttl_hours)
            stale = [a for a in valid if now - a.at > ttl]
            if len(valid) - len(stale) < change.approvals_required:
                who = ", ".join(f"{a.actor} at {a.at:%Y-%m-%d %H:%M}" for a in stale)
                raise PolicyRefused("expired_approval", f"approvals of change {change.id} are older than "
                                                        f"approval_ttl_hours={p.approval_ttl_hours:g} ({who}); "
                                                        f"reject it and propose it again")
        if current_resource_version is not None:
            seen = {a.resource_version or change.target_resource_version for a in valid}
            expected = seen or {change.target_resource_version}
            if any(v is not None and v != current_resource_version for v in expected):
                raise PolicyRefused("stale_target", f"{change.target_kind}/{change.target_name} changed since it was "
                                                    f"approved (resourceVersion {', '.join(sorted(v for v in expected if v))} "
                                                    f"-> {current_resource_version}); the approval no longer holds")
        if p.evidence_max_age_hours is not None and change.evidence_at is not None:
            age = now - change.evidence_at
            if age > timedelta(hours=p.evidence_max_age_hours):
                raise PolicyRefused("evidence_age", f"the evidence of change {change.id} is "
                                                    f"{age.total_seconds() / 3600:.1f} h old (evidence_max_age_hours="
                                                    f"{p.evidence_max_age_hours:g}); re-run the recommender")
        br = p.blast_radius
        nodes = nodes_of(change.kind, change.target_kind, change.target_name, change.proposed)
        if br.nodes_drained_per_hour is not None and nodes:
            recent = self._entered_applying_since(conn, now - timedelta(hours=1))
            drained = sum(nodes_of(r["kind"], r["target_kind"], r["target_name"], r["proposed"] or {}) for r in recent)
            if drained + nodes > br.nodes_drained_per_hour:
                raise PolicyRefused("blast_radius", f"change {change.id} drains {nodes} node(s); {drained} were drained "
                                                    f"in the last hour and nodes_drained_per_hour is "
                                                    f"{br.nodes_drained_per_hour}")
        if br.changes_per_team_per_day is not None:
            recent = self._entered_applying_since(conn, now - timedelta(days=1))
            same = sum(1 for r in recent if r["team"] == change.team)
            if same + 1 > br.changes_per_team_per_day:
                raise PolicyRefused("blast_radius", f"team {change.team or 'platform'} already applied {same} "
                                                    f"change(s) in the last 24 h; changes_per_team_per_day is "
                                                    f"{br.changes_per_team_per_day}")
        return {"window": None if window is True else window, "nodes": nodes}

    def begin_apply(self, change_id: str, *, actor: Actor, current_resource_version: str | None = None) -> Change:
        try:
            with self._tx() as conn:
                if conn.dialect.name == "postgresql":
                    conn.execute(text("select pg_advisory_xact_lock(:k)"), {"k": APPLY_LOCK_KEY})
                change = self._load(conn, change_id, actor, for_update=True)
                self._check_apply_role(actor, change, "applying")
                if change.status != APPROVED:
                    raise Conflict(f"change {change.id} is {change.status}; only approved changes can be applied"
                                   + (" (another apply is in progress)" if change.status == APPLYING else ""))
                now = self._now()
                passed = self._gates(conn, change, now, current_resource_version)
                return self._transition(conn, change, APPLYING, actor=actor, action="begin_apply",
                                        details={**passed, "resource_version": current_resource_version}, now=now)
        except PolicyRefused as exc:
            self._refused(exc, actor=actor, change=self.get(change_id), attempt="apply")
            raise

    # ------------------------------------------------------------------ the controller's transitions

    def record_plan(self, change_id: str, plan: builtins.list[dict[str, Any]], prior_spec: dict[str, Any],
                    *, actor: Actor | None = None) -> Change:
        with self._tx() as conn:
            change = self._load(conn, change_id, for_update=True)
            if change.status != APPLYING:
                raise Conflict(f"change {change.id} is {change.status}; a plan is recorded while applying")
            who = actor or Actor("controller")
            return self._transition(conn, change, None, actor=who, action="record_plan",
                                    details={"ops": len(plan)},
                                    values={"plan": audit_mod.jsonable(plan),
                                            "prior_spec": audit_mod.jsonable(prior_spec)})

    def finish_apply(self, change_id: str, *, actor: Actor, ok: bool, result: dict[str, Any],
                     error: str | None = None) -> Change:
        with self._tx() as conn:
            change = self._load(conn, change_id, actor, for_update=True)
            if change.status != APPLYING:
                raise Conflict(f"change {change.id} is {change.status}; only an applying change can finish")
            now = self._now()
            values: dict[str, Any] = {"result": audit_mod.jsonable(result)}
            if ok:
                values["applied_at"] = now
            else:
                values["error"] = error or "apply failed"
            return self._transition(conn, change, APPLIED if ok else FAILED, actor=actor,
                                    action="applied" if ok else "apply_failed", reason=None if ok else values["error"],
                                    details={"ok": ok}, values=values, now=now)

    def mark_verified(self, change_id: str, *, actor: Actor, details: dict[str, Any]) -> Change:
        with self._tx() as conn:
            change = self._load(conn, change_id, actor, for_update=True)
            now = self._now()
            result = {**(change.result or {}), "verify": audit_mod.jsonable(details)}
            return self._transition(conn, change, VERIFIED, actor=actor, action="verified", details=details,
                                    values={"verified_at": now, "result": result}, now=now)

    def mark_rolled_back(self, change_id: str, *, actor: Actor, reason: str, details: dict[str, Any]) -> Change:
        with self._tx() as conn:
            change = self._load(conn, change_id, actor, for_update=True)
            self._check_apply_role(actor, change, "rolling back")
            result = {**(change.result or {}), "rollback": audit_mod.jsonable(details)}
            return self._transition(conn, change, ROLLED_BACK, actor=actor, action="rolled_back", reason=reason,
                                    details=details, values={"result": result})

    def mark_failed(self, change_id: str, *, actor: Actor, error: str,
                    details: dict[str, Any] | None = None) -> Change:
        with self._tx() as conn:
            change = self._load(conn, change_id, actor, for_update=True)
            result = {**(change.result or {}), "failure": audit_mod.jsonable(details or {})}
            return self._transition(conn, change, FAILED, actor=actor, action="failed", reason=error,
                                    details=details, values={"error": error, "result": result})

    # ------------------------------------------------------------------ reads

    def get(self, change_id: str, *, actor: Actor | None = None) -> Change:
        with self.engine.connect() as conn:
            return self._load(conn, change_id, actor)

    def list(self, *, actor: Actor | None = None, status: str | None = None, kind: str | None = None,
             cluster: str | None = None, namespace: str | None = None, limit: int = 100,
             offset: int = 0) -> builtins.list[Change]:
        q = select(changes).order_by(changes.c.created_at.desc(), changes.c.id)
        if actor is not None and not (actor.is_admin or FINANCE in actor.roles):
            q = q.where(changes.c.team.in_(sorted(actor.member_teams)))
        for col, value in (("status", status), ("kind", kind), ("cluster", cluster), ("namespace", namespace)):
            if value is not None:
                q = q.where(changes.c[col] == value)
        q = q.limit(limit).offset(offset)
        with self.engine.connect() as conn:
            return [self._to_change(conn, row) for row in conn.execute(q).mappings().all()]

    def count(self, *, actor: Actor | None = None, status: str | None = None) -> int:
        q = select(func.count()).select_from(changes)
        if actor is not None and not (actor.is_admin or FINANCE in actor.roles):
            q = q.where(changes.c.team.in_(sorted(actor.member_teams)))
        if status is not None:
            q = q.where(changes.c.status == status)
        with self.engine.connect() as conn:
            return int(conn.execute(q).scalar() or 0)

    def audit(self, *, actor: Actor | None = None, change_id: str | None = None,
              limit: int = 200) -> builtins.list[AuditEntry]:
        """Audit entries (oldest first; the newest ``limit``) of one change or of everything visible."""
        q = select(audit_log).order_by(audit_log.c.seq.desc()).limit(limit)
        with self.engine.connect() as conn:
            if change_id is not None:
                self._load(conn, change_id, actor)
                q = q.where(audit_log.c.change_id == change_id)
            elif actor is not None and not (actor.is_admin or FINANCE in actor.roles):
                visible = select(changes.c.id).where(changes.c.team.in_(sorted(actor.member_teams)))
                q = q.where(audit_log.c.change_id.in_(visible))
            rows = conn.execute(q).mappings().all()
        return [audit_mod.row_to_entry(r) for r in reversed(rows)]

    # ------------------------------------------------------------------ pause

    def set_paused(self, paused: bool, *, actor: Actor, reason: str) -> None:
        if not actor.is_admin:
            raise Forbidden(f"pausing or resuming changes needs role {PLATFORM_ADMIN}")
        now = self._now()
        with self._tx() as conn:
            was = bool(conn.execute(select(control_flags.c.value).where(control_flags.c.name == "paused")).scalar())
            done = conn.execute(update(control_flags).where(control_flags.c.name == "paused")
                                .values(value=paused, updated_by=actor.name, updated_at=now))
            if done.rowcount == 0:
                conn.execute(insert(control_flags).values(name="paused", value=paused, updated_by=actor.name,
                                                          updated_at=now))
            audit_mod.append(conn, actor=actor.name, action="pause" if paused else "resume", change_id=None,
                             from_status=None, to_status=None, reason=reason,
                             details={"paused": paused, "was_paused": was}, at=now)

