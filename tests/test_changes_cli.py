"""``gpufinops changes ...`` and ``gpufinops db upgrade`` end to end on a SQLite app DB in --home."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from sqlalchemy import text
from typer.testing import CliRunner

from cli.commands import changes as changes_cmd
from cli.commands import db as db_cmd
from gpufinops.appdb import open_app_db
from recommender.model import Recommendation
from recommender.store import RecommendationStore


def _app() -> typer.Typer:
    from cli.main import app

    names = {g.name for g in app.registered_groups}
    if "changes" not in names:
        changes_cmd.register(app)
    if "db" not in names:
        db_cmd.register(app)
    return app


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("GPUFINOPS_CONFIG", "GPUFINOPS_APP_DB_URL", "GPUFINOPS_ACTOR", "GPUFINOPS_ROLES",
                "GPUFINOPS_CHANGE_POLICY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPUFINOPS_HOME", str(tmp_path))
    monkeypatch.setenv("USER", "opsuser")
    store = RecommendationStore(f"sqlite:///{tmp_path / 'app.db'}")
    now = datetime.now(UTC)
    store.upsert([Recommendation(kind="reclaim_idle_gpu", cluster="c1", namespace="research-rl", workload="nb",
                                 tier="interactive", current={"replicas": 1, "workload_kind": "Deployment"},
                                 proposed={"action": "scale_to_zero"}, evidence={"util_p95": 0.0},
                                 est_monthly_savings_usd=500.0, confidence=0.9, risk="low", created_at=now)], now=now)
    store.engine.dispose()
    return tmp_path


def run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(_app(), list(args))
    assert result.exit_code == code, (result.output, result.exception)
    return result.output


def _rec_id(home: Path) -> str:
    store = RecommendationStore(f"sqlite:///{home / 'app.db'}")
    rid = str(store.list()[0]["id"])
    store.engine.dispose()
    return rid


def test_propose_approve_audit_verify(home: Path) -> None:
    out = run("changes", "propose", "--from-rec", _rec_id(home), "--ticket", "OPS-9", "--reason", "idle notebook",
              "--as", "alice", "--role", "member:rl")
    cid = re.search(r"chg_[0-9a-f]{12}", out)
    assert cid is not None, out
    change = cid.group(0)
    self_approve = run("changes", "approve", change, "--reason", "mine", "--as", "alice", "--role", "team-lead:rl",
                       code=2)
    assert "four_eyes" in self_approve
    assert "team-lead:rl" in run("changes", "approve", change, "--reason", "x", "--as", "mo", "--role", "member:rl",
                                 code=2)
    assert "approved" in run("changes", "approve", change, "--reason", "looks idle", "--as", "bob",
                             "--role", "team-lead:rl")
    listing = json.loads(run("changes", "list", "--json", "--as", "bob", "--role", "team-lead:rl"))
    assert [(c["id"], c["status"]) for c in listing] == [(change, "approved")]
    assert json.loads(run("changes", "list", "--json", "--as", "rick", "--role", "team-lead:ranking")) == []
    assert "Changes (1)" in run("changes", "list")
    assert "not found" in run("changes", "show", change, "--as", "rick", "--role", "team-lead:ranking", code=2)
    shown = json.loads(run("changes", "show", change, "--json"))  # default actor: $USER as platform-admin
    assert shown["ticket"] == "OPS-9" and [a["actor"] for a in shown["approvals"]] == ["bob"]
    assert f"change {change}" in run("changes", "show", change)
    audit = json.loads(run("changes", "audit", change, "--json"))
    assert [(e["action"], e["actor"]) for e in audit] == [("propose", "alice"), ("refused", "alice"),
                                                          ("approve", "bob")]
    assert audit[-1]["reason"] == "looks idle"
    assert "Audit log" in run("changes", "audit")
    ok = run("changes", "verify-audit")
    assert "audit log OK: 3 rows" in ok


def test_verify_audit_exits_1_naming_the_seq(home: Path) -> None:
    rid = _rec_id(home)
    run("changes", "propose", "--from-rec", rid, "--ticket", "OPS-1", "--as", "alice", "--role", "member:rl")
    run("changes", "pause", "--reason", "freeze")
    run("changes", "resume", "--reason", "thaw")
    engine = open_app_db(f"sqlite:///{home / 'app.db'}")
    with engine.begin() as conn:
        conn.execute(text("drop trigger audit_log_no_update"))
        conn.execute(text("update audit_log set reason = 'no freeze' where seq = 2"))
    engine.dispose()
    out = run("changes", "verify-audit", code=1)
    assert "seq 2" in out and "edited" in out


def test_reject_pause_and_db_upgrade(home: Path) -> None:
    out = run("changes", "propose", "--from-rec", _rec_id(home), "--ticket", "OPS-2", "--as", "alice",
              "--role", "member:rl")
    change = re.search(r"chg_[0-9a-f]{12}", out).group(0)  # type: ignore[union-attr]
    assert "rejected" in run("changes", "reject", change, "--reason", "not now", "--as", "bob",
                             "--role", "team-lead:rl")
    assert "platform-admin" in run("changes", "pause", "--reason", "x", "--as", "bob", "--role", "team-lead:rl",
                                   code=2)
    assert "paused" in run("changes", "pause", "--reason", "incident")
    assert "resumed" in run("changes", "resume", "--reason", "over")
    assert "0002_budget_notifications" in run("db", "upgrade")
    assert "ticket" in run("changes", "propose", "--from-rec", _rec_id(home), "--as", "alice", "--role", "member:rl",
                           code=2)


def test_candidates_lists_open_recommendations_by_namespace(home: Path) -> None:
    rid = _rec_id(home)
    out = run("changes", "candidates", "--namespace", "research-rl")
    assert rid[:9] in out and "reclaim_id" in out and "500" in out
    assert rid[:9] not in run("changes", "candidates", "--namespace", "elsewhere")


def test_propose_top_takes_one_kind_after_another_and_reruns_propose_nothing_twice(home: Path) -> None:
    store = RecommendationStore(f"sqlite:///{home / 'app.db'}")
    now = datetime.now(UTC)
    store.upsert([Recommendation(kind=kind, cluster="c1", namespace="research-rl", workload=wl, tier="serving",
                                 current={"replicas": 2, "workload_kind": "Deployment"}, proposed={"min_replicas": 1},
                                 evidence={"util_p95": 0.0}, est_monthly_savings_usd=usd, confidence=0.9, risk="low",
                                 created_at=now)
                  for kind, wl, usd in (("scale_to_zero_window", "api-a", 900.0), ("scale_to_zero_window", "api-b", 800.0),
                                        ("rightsize_cpu_mem", "api-c", 100.0))], now=now)
    store.engine.dispose()
    first = run("changes", "propose-top", "--count", "3", "--ticket", "DEMO-1")
    # largest first, but one of each kind before a second of any: api-a, the reclaim (500), api-c, not api-b
    flat = " ".join(first.split())  # the console wraps long lines
    assert re.findall(r"proposed: (\w+) Deployment/([\w-]+)", flat) == [
        ("scale_to_zero_window", "api-a"), ("reclaim_idle_gpu", "nb"), ("rightsize_cpu_mem", "api-c")]
    again = run("changes", "propose-top", "--count", "3", "--ticket", "DEMO-1")
    assert sorted(re.findall(r"chg_\w+", again)) == sorted(re.findall(r"chg_\w+", first))
    listed = json.loads(run("changes", "list", "--json"))
    assert len(listed) == 3
