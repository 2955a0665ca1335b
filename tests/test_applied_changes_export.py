"""The app DB -> lake export of applied changes (ingest/applied_changes.py), on SQLite, no dbt: only
applied changes land, a rollback lands as ``ended_at``, and a re-run replaces the export."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq

from changes.model import Actor
from changes.policy import Policy
from changes.service import ChangeService
from gpufinops.appdb import open_app_db
from ingest.applied_changes import export_applied_changes

T0 = datetime(2026, 11, 18, 21, 0, tzinfo=UTC)
LEAD, OTHER = Actor("lee", frozenset({"team-lead:web"})), Actor("ann", frozenset({"team-lead:web"}))


def _rows(lake: Path) -> list[dict]:
    return [r for f in sorted((lake / "applied_changes").rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_only_applied_changes_land_and_a_rollback_becomes_ended_at(tmp_path: Path) -> None:
    engine = open_app_db(f"sqlite:///{tmp_path / 'app.db'}")
    now = [T0]
    svc = ChangeService(engine, Policy.load(None), team_of=lambda c, ns: "web", clock=lambda: now[0])
    lake = tmp_path / "lake"
    assert export_applied_changes(engine, lake).rows == {}  # nothing applied yet: nothing written
    assert _rows(lake) == []

    def change(name: str):
        c = svc.create(actor=LEAD, kind="set_autoscaling", cluster="c1", namespace="web", target_kind="Deployment",
                       target_name=name, current={}, proposed={"min_replicas": 1}, ticket="WEB-1")
        svc.approve(c.id, actor=OTHER, reason="ok")
        return c

    applied, waiting = change("api"), change("batch")
    svc.begin_apply(applied.id, actor=OTHER)
    svc.finish_apply(applied.id, actor=OTHER, ok=True, result={})
    first = export_applied_changes(engine, lake)
    assert first.rows == {"c1": 1}
    (row,) = _rows(lake)
    assert (row["change_id"], row["status"], row["ended_at"]) == (applied.id, "applied", None)
    assert waiting.id not in {r["change_id"] for r in _rows(lake)}

    now[0] = T0 + timedelta(days=2)
    svc.mark_rolled_back(applied.id, actor=OTHER, reason="back", details={})
    export_applied_changes(engine, lake)
    (row,) = _rows(lake)  # replaced, not added
    assert row["status"] == "rolled_back" and row["ended_at"] == T0 + timedelta(days=2)
    assert row["applied_at"] == T0 and row["est_monthly_savings_usd"] is None  # made without a recommendation
    assert len(list((lake / "applied_changes").rglob("*.parquet"))) == 1


def test_ingest_all_runs_the_changes_source(tmp_path: Path) -> None:
    from gpufinops.settings import Settings
    from ingest.schedule import run_all_once

    config = tmp_path / "gpufinops.yaml"
    config.write_text("sources:\n  - {kind: changes}\n")
    settings = Settings(home=tmp_path, config=config)
    engine = open_app_db(settings.effective_app_db_url)
    svc = ChangeService(engine, Policy.load(None), team_of=lambda c, ns: "web", clock=lambda: T0)
    c = svc.create(actor=LEAD, kind="set_autoscaling", cluster="c1", namespace="web", target_kind="Deployment",
                   target_name="api", current={}, proposed={"min_replicas": 1}, ticket="WEB-2")
    svc.approve(c.id, actor=OTHER, reason="ok")
    svc.begin_apply(c.id, actor=OTHER)
    svc.finish_apply(c.id, actor=OTHER, ok=True, result={})
    (outcome,) = run_all_once(settings)
    assert outcome.ok and outcome.kind == "changes" and outcome.detail == "1 applied change(s)", outcome
    assert [r["change_id"] for r in _rows(settings.lake_dir)] == [c.id]
