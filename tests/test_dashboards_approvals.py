"""The Approvals page and the team page's change controls (AppTest, demo mode) over a real SQLite app DB:
a team lead decides on their team's changes only, four-eyes is enforced, every decision is audited."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from changes.model import Actor, Change
from changes.policy import Policy
from changes.service import ChangeService
from changes.teams import warehouse_team_resolver
from gpufinops.appdb import open_app_db

APP = str(Path(__file__).resolve().parents[1] / "dashboards" / "app.py")


def _support():
    spec = importlib.util.spec_from_file_location("dash_support", Path(__file__).parent / "fixtures/dashboards/support.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


support = _support()
ALICE = Actor("alice", frozenset({"member:alpha"}))  # proposes alpha's changes
BOB = Actor("bob", frozenset({"member:beta"}))
CAROL = Actor("carol", frozenset({"platform-admin"}))
LEAD_ALPHA = Actor("demo-lead-alpha", frozenset({"team-lead:alpha"}))  # the demo picker's alpha lead
_tickets = itertools.count(100)


@pytest.fixture(scope="module")
def home(tmp_path_factory, mini_fleet) -> Path:
    home = tmp_path_factory.mktemp("home")
    support.build_warehouse(home, mini_fleet)
    support.build_app_db(home)
    return home


@pytest.fixture
def env(home, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUFINOPS_HOME", str(home))
    monkeypatch.delenv("GPUFINOPS_CONFIG", raising=False)
    monkeypatch.delenv("GPUFINOPS_CHANGE_POLICY", raising=False)
    monkeypatch.setenv("GPUFINOPS_DASHBOARD_DEMO", "1")
    return home


@pytest.fixture
def svc(home):
    engine = open_app_db(f"sqlite:///{home / 'app.db'}")
    yield ChangeService(engine, Policy.load(None), team_of=warehouse_team_resolver(home / "warehouse.duckdb"))
    engine.dispose()


def _workload_change(svc: ChangeService, by: Actor, namespace: str, workload: str) -> Change:
    return svc.create(actor=by, kind="rightsize_gpu_count", cluster="c1", namespace=namespace,
                      target_kind="Deployment", target_name=workload, current={"gpus": 4, "workload_kind": "Job"},
                      proposed={"gpus": 2}, ticket=f"COST-{next(_tickets)}", reason="p95 utilisation 20 %",
                      evidence={"window": "7d", "p95_util": 0.2})


def _node_change(svc: ChangeService) -> Change:
    return svc.create(actor=CAROL, kind="consolidate_nodes", cluster="c1", namespace=None, target_kind="NodePool",
                      target_name="gpu", current={"nodes": 2}, proposed={"nodes": 1, "freed_nodes": ["n2"]},
                      ticket=f"OPS-{next(_tickets)}", evidence={"lower_bound": 1})


def _app(role: str, page: str, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["role"] = role
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    at.switch_page(f"views/{page}.py").run()
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _text(at: AppTest) -> str:
    parts = [repr(at._tree)]
    for df in at.dataframe:
        value = df.value
        parts.append(value.to_csv() if isinstance(value, pd.DataFrame) else str(value))
    for sb in at.selectbox:
        parts.extend(map(str, sb.options))
    parts.extend(str(j.value) for j in at.json)
    parts.extend(str(c.value) for c in at.code)
    return "\n".join(parts)


def _queue_ids(at: AppTest) -> set[str]:
    frames = [df.value for df in at.dataframe if isinstance(df.value, pd.DataFrame) and "requested_by" in df.value]
    return set(frames[0]["id"]) if frames else set()


def test_team_lead_approves_their_teams_change(env, svc) -> None:
    change = _workload_change(svc, ALICE, "alpha-train", "train-a")
    at = _app("team-lead:alpha", "approvals", change=change.id)
    _ok(at)
    assert at.title[0].value == "Approvals" and change.id in _queue_ids(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Status"] == "proposed" and metrics["Requested by"] == "alice"
    text = _text(at)
    assert "p95_util" in text and "gpus" in text  # evidence and the current/proposed diff are shown
    at.text_input(key=f"approvals_reason_{change.id}").set_value("fits in 2 GPUs")
    at.button(key="approvals_approve").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    assert "is now **approved**" in at.success[0].value
    assert {m.label: m.value for m in at.metric}["Status"] == "approved"
    after = svc.get(change.id)
    assert after.status == "approved" and after.approvers == ["demo-lead-alpha"]
    entries = svc.audit(change_id=change.id)
    assert [(e.action, e.actor, e.to_status) for e in entries] == [
        ("propose", "alice", "proposed"), ("approve", "demo-lead-alpha", "approved")]
    assert entries[-1].reason == "fits in 2 GPUs"
    # the history table on the page shows the audit row too
    assert "fits in 2 GPUs" in _text(at)


def test_team_lead_cannot_see_another_teams_change(env, svc) -> None:
    beta = _workload_change(svc, BOB, "beta-serve", "serve-b")
    at = _app("team-lead:alpha", "approvals")
    _ok(at)
    assert beta.id not in _text(at)
    # nor by editing the query parameter: "not found", nothing of it rendered, nothing to click
    at = _app("team-lead:alpha", "approvals", change=beta.id)
    _ok(at)
    assert [e.value for e in at.error] == [f"Change `{beta.id}` not found."]
    assert "serve-b" not in _text(at) and "beta-serve" not in _text(at)
    assert at.query_params.get("change") != [beta.id]
    assert svc.get(beta.id).status == "proposed"


def test_self_approval_shows_the_four_eyes_error(env, svc) -> None:
    own = _workload_change(svc, LEAD_ALPHA, "alpha-train", "notebook-a")
    at = _app("team-lead:alpha", "approvals", change=own.id)
    _ok(at)
    at.text_input(key=f"approvals_reason_{own.id}").set_value("mine")
    at.button(key="approvals_approve").click().run()
    _ok(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "four_eyes" in errors[0] and "may not approve" in errors[0]
    assert svc.get(own.id).status == "proposed"
    assert svc.audit(change_id=own.id)[-1].action == "refused"


def test_reject_needs_a_reason_and_is_audited(env, svc) -> None:
    change = _workload_change(svc, ALICE, "alpha-train", "train-a")
    at = _app("team-lead:alpha", "approvals", change=change.id)
    at.button(key="approvals_reject").click().run()
    _ok(at)
    assert "reason is required" in at.error[0].value and svc.get(change.id).status == "proposed"
    at.text_input(key=f"approvals_reason_{change.id}").set_value("training ends tomorrow")
    at.button(key="approvals_reject").click().run()
    _ok(at)
    assert svc.get(change.id).status == "rejected"
    assert svc.audit(change_id=change.id)[-1].reason == "training ends tomorrow"


def test_admin_sees_node_level_changes(env, svc) -> None:
    from controller.planner import plan

    node = _node_change(svc)
    alpha = _workload_change(svc, ALICE, "alpha-train", "train-a")
    at = _app("platform-admin", "approvals", change=node.id)
    _ok(at)
    assert {node.id, alpha.id} <= _queue_ids(at)
    assert {m.label: m.value for m in at.metric}["Team"] == "(platform)"
    captions = " ".join(c.value for c in at.caption)
    assert "`platform-admin`" in captions  # who may approve
    assert "no preview without the live object" in captions.lower() and not at.code  # a drain needs the live nodes
    at.text_input(key=f"approvals_reason_{node.id}").set_value("pool half empty")
    at.button(key="approvals_approve").click().run()
    _ok(at)
    assert svc.get(node.id).status == "approved" and svc.get(node.id).approvers == ["demo-admin"]
    # the controller starts applying and records its plan: the page shows that plan
    svc.begin_apply(node.id, actor=CAROL)
    live = {"nodes": [{"metadata": {"name": "n2"}, "spec": {}}], "pods": [], "pdbs": []}
    ops = plan(svc.get(node.id), live)
    svc.record_plan(node.id, [op.to_dict() for op in ops], prior_spec={})
    at = _app("platform-admin", "approvals", change=node.id)
    _ok(at)
    assert node.id not in _queue_ids(at)  # no longer waits for a decision, still reachable by its link
    assert "cordon" in at.code[0].value and "/nodes/n2" in at.code[0].value
    assert "recorded by the controller" in " ".join(c.value for c in at.caption).lower()
    assert "approvals_approve" not in {b.key for b in at.button}  # applying: nothing to decide
    # a team lead sees no node actions, not even by link
    lead = _app("team-lead:alpha", "approvals")
    assert node.id not in _queue_ids(lead) and alpha.id in _queue_ids(lead)
    lead = _app("team-lead:alpha", "approvals", change=node.id)
    assert [e.value for e in lead.error] == [f"Change `{node.id}` not found."]


def test_finance_gets_no_approvals_page_under_the_default_policy(env) -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["role"] = "finance"
    at.run()
    with pytest.raises(ValueError):
        at.switch_page("views/approvals.py")


def test_team_page_proposes_from_a_recommendation_then_four_eyes(env, svc) -> None:
    at = _app("team-lead:alpha", "team")
    _ok(at)
    assert at.selectbox(key="rec_pick").options  # the team's recommendations
    at.selectbox(key="rec_pick").set_value("rec_a2")
    at.text_input(key="rec_ticket").set_value("COST-7")
    at.button(key="rec_propose").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    proposed = [c for c in svc.list(status="proposed") if c.recommendation_id == "rec_a2"]
    assert len(proposed) == 1
    change = proposed[0]
    assert (change.requested_by, change.team, change.ticket, change.target_name) == (
        "demo-lead-alpha", "alpha", "COST-7", "train-a")
    # the proposer cannot approve it too
    at.selectbox(key="chg_pick").set_value(change.id)
    at.button(key="chg_approve").click().run()
    _ok(at)
    assert "four_eyes" in at.error[0].value and svc.get(change.id).status == "proposed"


def test_team_page_approves_a_teams_change(env, svc) -> None:
    change = _workload_change(svc, ALICE, "alpha-train", "notebook-a")
    at = _app("team-lead:alpha", "team")
    at.selectbox(key="chg_pick").set_value(change.id)
    at.text_input(key="chg_reason").set_value("ok")
    at.button(key="chg_approve").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    assert svc.get(change.id).status == "approved"
    # beta's lead sees none of alpha's changes on their team page
    beta = _app("team-lead:beta", "team")
    _ok(beta)
    assert change.id not in _text(beta)


def test_an_unreachable_app_db_is_reported_not_a_crash(env, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # through a config file: the dashboards key their cached settings on the config path
    config = tmp_path / "gpufinops.yaml"
    config.write_text("app_db_url: postgresql+psycopg2://postgres:s3cret@127.0.0.1:1/nowhere\n")
    monkeypatch.setenv("GPUFINOPS_CONFIG", str(config))
    team = _app("team-lead:alpha", "team")
    _ok(team)
    assert {m.label: m.value for m in team.metric}["Cost (chargeback)"] == "$963.20"  # the rest of the page works
    warning = " ".join(w.value for w in team.warning)
    assert "Change control is unavailable" in warning and "127.0.0.1:1/nowhere" in warning
    assert "s3cret" not in warning
    approvals = _app("team-lead:alpha", "approvals")
    _ok(approvals)
    assert "cannot be opened" in approvals.error[0].value
