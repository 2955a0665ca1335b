"""The recommendations store on SQLite and on PostgreSQL: upsert by stable id, resolve, reopen."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from recommender.model import Recommendation
from recommender.store import OPEN, RESOLVED, RecommendationStore

PG_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
T0 = datetime(2026, 11, 15, tzinfo=UTC)


def rec(workload: str, saving: float = 100.0, kind: str = "reclaim_idle_gpu", cluster: str = "c1") -> Recommendation:
    return Recommendation(kind=kind, cluster=cluster, namespace="ns", workload=workload, tier="batch",
                          current={"replicas": 1}, proposed={"action": "reclaim"},
                          evidence={"window_start": T0, "util_p95": 0.01}, est_monthly_savings_usd=saving,
                          confidence=0.9, risk="low", created_at=T0)


def _pg_available() -> bool:
    try:
        with create_engine(PG_URL).connect() as c:
            c.execute(text("select 1"))
        return True
    except Exception:
        return False


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RecommendationStore]:
    if request.param == "sqlite":
        yield RecommendationStore(f"sqlite:///{tmp_path / 'app.db'}")
        return
    if not _pg_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    schema = f"rec_test_{uuid.uuid4().hex[:10]}"
    engine = create_engine(PG_URL)
    with engine.begin() as c:
        c.execute(text(f'create schema "{schema}"'))
    try:
        yield RecommendationStore(engine, schema=schema)
    finally:
        with engine.begin() as c:
            c.execute(text(f'drop schema "{schema}" cascade'))
        engine.dispose()


def test_rerun_updates_never_duplicates(store: RecommendationStore) -> None:
    first = store.upsert([rec("a", 100), rec("b", 50)], now=T0)
    assert first == {"inserted": 2, "updated": 0, "reopened": 0, "resolved": 0}
    second = store.upsert([rec("a", 120), rec("b", 50)], now=T0 + timedelta(hours=1))
    assert second["inserted"] == 0 and second["updated"] == 2
    rows = store.list()
    assert [(r["workload"], r["est_monthly_savings_usd"]) for r in rows] == [("a", 120.0), ("b", 50.0)]
    a = rows[0]
    assert a["created_at"].replace(tzinfo=UTC) == T0  # kept from the first run
    assert a["last_seen_at"].replace(tzinfo=UTC) == T0 + timedelta(hours=1)
    assert a["evidence"] == {"window_start": T0.isoformat(), "util_p95": 0.01}
    assert a["status"] == OPEN


def test_disappeared_finding_is_resolved_not_deleted_and_can_reopen(store: RecommendationStore) -> None:
    store.upsert([rec("a"), rec("b"), rec("z", cluster="c2")], now=T0)
    out = store.upsert([rec("a")], scope={("reclaim_idle_gpu", "c1")}, now=T0 + timedelta(hours=1))
    assert out["resolved"] == 1
    assert [r["workload"] for r in store.list(status=RESOLVED)] == ["b"]
    assert sorted(r["workload"] for r in store.list(status=OPEN)) == ["a", "z"]  # c2 was out of scope
    back = store.upsert([rec("a"), rec("b")], scope={("reclaim_idle_gpu", "c1")}, now=T0 + timedelta(hours=2))
    assert back["reopened"] == 1
    assert {r["workload"]: r["status"] for r in store.list(status=None)} == {"a": OPEN, "b": OPEN, "z": OPEN}
    assert len(store.list(status=None)) == 3


def test_other_kinds_are_not_resolved_by_a_partial_run(store: RecommendationStore) -> None:
    store.upsert([rec("a"), rec("m", kind="rightsize_to_mig")], now=T0)
    store.upsert([], scope={("reclaim_idle_gpu", "c1")}, now=T0 + timedelta(hours=1))
    assert [r["kind"] for r in store.list()] == ["rightsize_to_mig"]
