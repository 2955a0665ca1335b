"""ChangeService on SQLite and PostgreSQL: every transition allowed or refused per TRANSITIONS,
visibility (NotFound for another team), approver roles (Forbidden), four-eyes, multi-approval kinds,
proposals from recommendations, idempotency keys."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from test_appdb_migrations import DIALECTS, app_db

from changes import idempotency
from changes.model import (
    APPLIED,
    APPLYING,
    APPROVED,
    FAILED,
    PROPOSED,
    REJECTED,
    ROLLED_BACK,
    STATUSES,
    TRANSITIONS,
    VERIFIED,
    Actor,
    Change,
)
from changes.policy import KindPolicy, Policy
from changes.service import ChangeService
from gpufinops.appdb.schema import audit_log
from gpufinops.errors import BadRequest, Conflict, Forbidden, NotFound, PolicyRefused
from recommender.model import Recommendation
from recommender.store import RecommendationStore

T0 = datetime(2026, 11, 18, 10, 0, tzinfo=UTC)  # a Wednesday
TEAMS = {"rl-train": "rl", "rank-serve": "ranking"}

ADMIN = Actor("root", frozenset({"platform-admin"}))
ADMIN2 = Actor("root2", frozenset({"platform-admin"}))
FIN = Actor("fiona", frozenset({"finance"}))
ALICE = Actor("alice", frozenset({"member:rl"}))  # requester
BOB = Actor("bob", frozenset({"team-lead:rl"}))  # approver of rl
CAROL = Actor("carol", frozenset({"team-lead:rl"}))
RANK = Actor("rick", frozenset({"team-lead:ranking"}))


class Clock:
    def __init__(self, at: datetime = T0) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def policy(**overrides: Any) -> Policy:
    base: dict[str, Any] = {
        "ticket_pattern": r"^OPS-\d+$",
        "kinds": {"default": {"approvers": ["team-lead"], "approvals": 1},
                  "consolidate_nodes": {"approvers": ["platform-admin"], "approvals": 1},
                  "rightsize_gpu_count": {"approvers": ["team-lead"], "approvals": 2}},
    }
    base.update(overrides)
    return Policy.model_validate(base)


def service(engine: Engine, pol: Policy | None = None, clock: Clock | None = None) -> ChangeService:
    return ChangeService(engine, pol or policy(), team_of=lambda c, ns: TEAMS.get(ns or ""), clock=clock or Clock())


def workload_change(svc: ChangeService, *, kind: str = "rightsize_cpu_mem", ns: str | None = "rl-train",
                    actor: Actor = ALICE, **kw: Any) -> Change:
    args: dict[str, Any] = dict(actor=actor, kind=kind, cluster="c1", namespace=ns, target_kind="Deployment",
                                target_name="trainer", current={"cpu_request": 4}, proposed={"cpu_request": 2},
                                ticket="OPS-1", evidence={"p95": 1.2}, evidence_at=T0 - timedelta(hours=1))
    args.update(kw)
    return svc.create(**args)


@pytest.fixture(params=DIALECTS)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    with app_db(request.param, tmp_path) as e:
        yield e


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    with app_db("sqlite", tmp_path) as e:
        yield e


# ---------------------------------------------------------------- transitions

def reach(svc: ChangeService, status: str) -> Change:
    """A change brought to ``status`` through the public methods."""
    c = workload_change(svc)
    if status == PROPOSED:
        return c
    if status == REJECTED:
        return svc.reject(c.id, actor=BOB, reason="no")
    c = svc.approve(c.id, actor=BOB, reason="ok")
    if status == APPROVED:
        return c
    c = svc.begin_apply(c.id, actor=BOB)
    if status == APPLYING:
        return c
    if status == FAILED:
        return svc.finish_apply(c.id, actor=BOB, ok=False, result={}, error="boom")
    c = svc.finish_apply(c.id, actor=BOB, ok=True, result={"patched": 1})
    if status == APPLIED:
        return c
    if status == VERIFIED:
        return svc.mark_verified(c.id, actor=BOB, details={"ok": True})
    assert status == ROLLED_BACK
    return svc.mark_rolled_back(c.id, actor=BOB, reason="undo", details={})


def attempt(svc: ChangeService, c: Change, to: str) -> Change:
    if to == APPROVED:
        return svc.approve(c.id, actor=CAROL, reason="ok")
    if to == REJECTED:
        return svc.reject(c.id, actor=CAROL, reason="no")
    if to == APPLYING:
        return svc.begin_apply(c.id, actor=BOB)
    if to == APPLIED:
        return svc.finish_apply(c.id, actor=BOB, ok=True, result={})
    if to == FAILED:
        return svc.mark_failed(c.id, actor=BOB, error="lost the node")
    if to == VERIFIED:
        return svc.mark_verified(c.id, actor=BOB, details={})
    assert to == ROLLED_BACK
    return svc.mark_rolled_back(c.id, actor=BOB, reason="undo", details={})


@pytest.mark.parametrize("start", STATUSES)
def test_every_transition_allowed_or_refused_per_table(start: str, sqlite_engine: Engine) -> None:
    svc = service(sqlite_engine)
    for to in STATUSES:
        if to == PROPOSED:
            continue
        c = reach(svc, start)
        assert c.status == start
        if to in TRANSITIONS[start]:
            after = attempt(svc, c, to)
            assert after.status == to and after.version > c.version
        else:
            with pytest.raises(Conflict):
                attempt(svc, c, to)
            assert svc.get(c.id).status == start and svc.get(c.id).version == c.version


def test_lifecycle_on_both_dialects_writes_one_audit_entry_per_transition(engine: Engine) -> None:
    svc = service(engine)
    c = reach(svc, VERIFIED)
    assert c.applied_at == T0 and c.verified_at == T0
    assert c.result == {"patched": 1, "verify": {"ok": True}}
    entries = svc.audit(change_id=c.id)
    assert [(e.from_status, e.to_status) for e in entries] == [
        (None, PROPOSED), (PROPOSED, APPROVED), (APPROVED, APPLYING), (APPLYING, APPLIED), (APPLIED, VERIFIED)]
    assert [e.actor for e in entries] == ["alice", "bob", "bob", "bob", "bob"]
    assert all(e.at == T0 for e in entries)
    assert svc.get(c.id).version == 5
    rolled = svc.mark_rolled_back(c.id, actor=BOB, reason="regression", details={"ops": 1})
    assert rolled.status == ROLLED_BACK and svc.audit(change_id=c.id)[-1].reason == "regression"


def test_record_plan_only_while_applying(engine: Engine) -> None:
    svc = service(engine)
    c = reach(svc, APPROVED)
    with pytest.raises(Conflict):
        svc.record_plan(c.id, [{"verb": "patch"}], {"spec": {}})
    c = svc.begin_apply(c.id, actor=BOB)
    c = svc.record_plan(c.id, [{"verb": "patch", "name": "trainer"}], {"spec": {"replicas": 2}})
    assert c.status == APPLYING and c.plan == [{"verb": "patch", "name": "trainer"}]
    assert c.prior_spec == {"spec": {"replicas": 2}}


# ---------------------------------------------------------------- who may do what

def test_self_approval_is_refused_by_four_eyes(engine: Engine) -> None:
    svc = service(engine)
    c = workload_change(svc, actor=BOB)  # a lead proposes
    with pytest.raises(PolicyRefused) as err:
        svc.approve(c.id, actor=BOB, reason="mine")
    assert err.value.gate == "four_eyes"
    assert svc.get(c.id).status == PROPOSED
    last = svc.audit(change_id=c.id)[-1]
    assert last.action == "refused" and last.details == {"gate": "four_eyes", "attempt": "approve"}
    assert svc.approve(c.id, actor=CAROL, reason="ok").status == APPROVED


def test_wrong_approver_role_is_forbidden_and_names_the_role(engine: Engine) -> None:
    svc = service(engine)
    c = workload_change(svc)
    for who in (Actor("mallory", frozenset({"member:rl"})), FIN, ADMIN):
        with pytest.raises(Forbidden, match="team-lead:rl"):
            svc.approve(c.id, actor=who, reason="x")
    node = svc.create(actor=ADMIN, kind="consolidate_nodes", cluster="c1", namespace=None, target_kind="NodePool",
                      target_name="gpu", current={"nodes": 3}, proposed={"nodes": 2, "freed_nodes": ["n3"]},
                      ticket="OPS-2")
    assert node.team is None and node.namespace is None
    with pytest.raises(Forbidden, match="platform-admin"):
        svc.approve(node.id, actor=FIN, reason="x")
    assert svc.approve(node.id, actor=ADMIN2, reason="ok").status == APPROVED


def test_another_teams_change_is_not_found(engine: Engine) -> None:
    svc = service(engine)
    c = workload_change(svc)
    rank = workload_change(svc, ns="rank-serve", actor=Actor("rita", frozenset({"member:ranking"})))
    with pytest.raises(NotFound):
        svc.get(c.id, actor=RANK)
    with pytest.raises(NotFound):
        svc.approve(c.id, actor=RANK, reason="x")
    with pytest.raises(NotFound):
        svc.reject(c.id, actor=RANK, reason="x")
    with pytest.raises(NotFound):
        svc.begin_apply(c.id, actor=RANK)
    with pytest.raises(NotFound):
        svc.audit(actor=RANK, change_id=c.id)
    assert [x.id for x in svc.list(actor=RANK)] == [rank.id]
    assert {e.change_id for e in svc.audit(actor=RANK)} == {rank.id}
    assert {x.id for x in svc.list(actor=FIN)} == {c.id, rank.id}  # finance sees everything
    node = svc.create(actor=ADMIN, kind="cordon_drain_node", cluster="c1", namespace=None, target_kind="Node",
                      target_name="n7", current={}, proposed={"node": "n7"}, ticket="OPS-3")
    with pytest.raises(NotFound):  # platform-level: admin and finance only
        svc.get(node.id, actor=BOB)
    assert svc.get(node.id, actor=FIN).id == node.id
    with pytest.raises(NotFound):
        svc.get("chg_000000000000")


def test_two_approval_kind_needs_two_distinct_approvers(engine: Engine) -> None:
    svc = service(engine)
    c = workload_change(svc, kind="rightsize_gpu_count")
    assert c.approvals_required == 2
    c = svc.approve(c.id, actor=BOB, reason="first")
    assert c.status == PROPOSED and c.approvers == ["bob"]
    with pytest.raises(Conflict, match="already decided"):
        svc.approve(c.id, actor=BOB, reason="again")
    c = svc.approve(c.id, actor=CAROL, reason="second")
    assert c.status == APPROVED and sorted(c.approvers) == ["bob", "carol"]


def test_ticket_pattern(engine: Engine) -> None:
    svc = service(engine)
    for bad in (None, "", "ops-1", "OPS-1 and more"):
        with pytest.raises(PolicyRefused) as err:
            workload_change(svc, ticket=bad)
        assert err.value.gate == "ticket"
    assert workload_change(svc, ticket="OPS-42").ticket == "OPS-42"
    assert workload_change(service(engine, policy(ticket_pattern=None)), ticket=None).ticket is None


def test_apply_and_rollback_roles(engine: Engine) -> None:
    svc = service(engine)
    c = reach(svc, APPROVED)
    with pytest.raises(Forbidden, match="team-lead:rl"):
        svc.begin_apply(c.id, actor=Actor("mallory", frozenset({"member:rl"})))
    assert svc.begin_apply(c.id, actor=ALICE).status == APPLYING  # the requester may apply once approved
    svc.finish_apply(c.id, actor=ALICE, ok=True, result={})
    with pytest.raises(Forbidden):
        svc.mark_rolled_back(c.id, actor=FIN, reason="x", details={})


def test_bad_requests_name_the_field(engine: Engine) -> None:
    svc = service(engine)
    with pytest.raises(BadRequest, match="kind 'nope'"):
        workload_change(svc, kind="nope")
    with pytest.raises(BadRequest, match="target_kind 'Pod'"):
        workload_change(svc, target_kind="Pod")
    with pytest.raises(BadRequest, match="namespace"):
        workload_change(svc, ns=None)
    with pytest.raises(BadRequest, match="reason"):
        svc.reject(workload_change(svc).id, actor=BOB, reason=" ")
    with pytest.raises(Forbidden, match="member:ranking"):
        workload_change(svc, ns="rank-serve")  # alice is not in ranking


def test_pause_is_admin_only_and_audited(engine: Engine) -> None:
    svc = service(engine)
    with pytest.raises(Forbidden, match="platform-admin"):
        svc.set_paused(True, actor=BOB, reason="x")
    svc.set_paused(True, actor=ADMIN, reason="incident 12")
    assert svc.is_paused()
    svc.set_paused(False, actor=ADMIN, reason="over")
    assert not svc.is_paused()
    assert [(e.action, e.change_id, e.reason) for e in svc.audit(actor=ADMIN)] == [
        ("pause", None, "incident 12"), ("resume", None, "over")]
    assert svc.audit(actor=BOB) == []  # platform-level entries: admin and finance only


# ---------------------------------------------------------------- from recommendations, idempotency

def _rec(store: RecommendationStore, kind: str = "reclaim_idle_gpu", ns: str | None = "rl-train",
         workload: str = "notebook-a", **kw: Any) -> Recommendation:
    r = Recommendation(kind=kind, cluster="c1", namespace=ns, workload=workload, tier="interactive",
                       current=kw.get("current", {"replicas": 1, "workload_kind": "StatefulSet"}),
                       proposed=kw.get("proposed", {"action": "scale_to_zero"}), evidence={"util_p95": 0.01},
                       est_monthly_savings_usd=100.0, confidence=0.9, risk="low", created_at=T0)
    store.upsert([r], now=T0 - timedelta(hours=2))
    return r


def test_create_from_recommendation(engine: Engine) -> None:
    svc = service(engine)
    store = RecommendationStore(engine)
    r = _rec(store)
    c = svc.create_from_recommendation(r.id, actor=ALICE, ticket="OPS-7")
    assert (c.kind, c.cluster, c.namespace, c.team) == ("reclaim_idle_gpu", "c1", "rl-train", "rl")
    assert (c.target_kind, c.target_name, c.recommendation_id) == ("StatefulSet", "notebook-a", r.id)
    # the estimate it was proposed with is kept (fct_change_outcomes compares the realized saving with it)
    assert c.evidence == {"util_p95": 0.01, "est_monthly_savings_usd": 100.0} and c.evidence_at == T0 - timedelta(hours=2)
    with pytest.raises(Conflict, match=c.id):  # one active change per recommendation
        svc.create_from_recommendation(r.id, actor=ALICE, ticket="OPS-8")
    with pytest.raises(NotFound):
        svc.create_from_recommendation(r.id, actor=RANK, ticket="OPS-8")
    with pytest.raises(NotFound):
        svc.create_from_recommendation("rec_missing", actor=ALICE, ticket="OPS-8")
    pool = _rec(store, kind="consolidate_nodes", ns=None, workload="nodepool/gpu-a100",
                current={"node_pool": "gpu-a100", "nodes": 3}, proposed={"nodes": 2, "freed_nodes": ["n3"]})
    node = svc.create_from_recommendation(pool.id, actor=ADMIN, ticket="OPS-9")
    assert (node.target_kind, node.target_name, node.team, node.namespace) == ("NodePool", "gpu-a100", None, None)


def test_idempotency_key_replays_or_conflicts(engine: Engine) -> None:
    svc = service(engine)
    a = workload_change(svc, idempotency_key="k1")
    again = workload_change(svc, idempotency_key="k1")
    assert again.id == a.id and len(svc.list()) == 1
    with pytest.raises(Conflict, match="k1"):
        workload_change(svc, idempotency_key="k1", proposed={"cpu_request": 1})
    assert workload_change(svc, idempotency_key="k1", actor=BOB).id != a.id  # keys are per actor
    with engine.connect() as conn:
        assert conn.execute(select(audit_log.c.seq).where(audit_log.c.action == "propose")).scalars().all() == [1, 2]


def test_idempotency_store_helpers(engine: Engine) -> None:
    h = idempotency.request_hash({"method": "POST", "path": "/changes", "body": {"a": 1}})
    assert h == idempotency.request_hash({"body": {"a": 1}, "path": "/changes", "method": "POST"})
    args: dict[str, Any] = dict(actor="alice", key="abc", method_path="POST /changes")
    assert idempotency.lookup(engine, request_hash=h, **args) is None
    saved = idempotency.save(engine, request_hash=h, response={"id": "chg_1"}, status_code=201, **args)
    got = idempotency.lookup(engine, request_hash=h, **args)
    assert got is not None and got.response == {"id": "chg_1"} and got.status_code == 201
    assert saved.response == got.response
    # a second save of the same request returns the first response
    again = idempotency.save(engine, request_hash=h, response={"id": "chg_2"}, status_code=201, **args)
    assert again.response == {"id": "chg_1"}
    with pytest.raises(Conflict, match="abc"):
        idempotency.lookup(engine, request_hash="0" * 64, **args)
    assert idempotency.lookup(engine, actor="bob", key="abc", method_path="POST /changes", request_hash="x") is None


def test_to_dict_is_json_ready(engine: Engine) -> None:
    import json

    svc = service(engine)
    c = svc.approve(workload_change(svc).id, actor=BOB, reason="ok")
    d = json.loads(json.dumps(c.to_dict()))
    assert d["status"] == APPROVED and d["approvals"][0]["actor"] == "bob"
    assert d["created_at"] == T0.isoformat() and d["evidence_at"] == (T0 - timedelta(hours=1)).isoformat()
    assert KindPolicy().approvers == ["team-lead"]
