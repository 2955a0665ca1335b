"""App DB migrations on SQLite and PostgreSQL: a fresh upgrade, a second one (idempotent), the
migration equal to schema.py's metadata (alembic compare_metadata: no diffs), and adoption of a
recommendations table made before migrations existed.

``app_db`` (below) is the engine context the changes tests share: SQLite in tmp_path, or a
PostgreSQL schema of its own (search_path on every connection) dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, MetaData, create_engine, inspect, text

from gpufinops.appdb import open_engine, upgrade, workload_id
from gpufinops.appdb.schema import metadata, recommendations_table

PG_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
DIALECTS = ["sqlite", "postgresql"]
TABLES = {"recommendations", "changes", "approvals", "audit_log", "audit_head", "idempotency_keys", "workloads",
          "control_flags", "budget_notifications", "alembic_version"}


def pg_available() -> bool:
    try:
        with create_engine(PG_URL).connect() as c:
            c.execute(text("select 1"))
        return True
    except Exception:
        return False


@contextmanager
def app_db(dialect: str, tmp_path: Path, *, migrate: bool = True, pool_size: int = 5) -> Iterator[Engine]:
    """An empty app DB engine (migrated unless ``migrate=False``)."""
    if dialect == "sqlite":
        engine = open_engine(f"sqlite:///{tmp_path / f'app-{uuid.uuid4().hex[:6]}.db'}")
        try:
            if migrate:
                upgrade(engine)
            yield engine
        finally:
            engine.dispose()
        return
    if not pg_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    schema = f"appdb_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_URL)
    with admin.begin() as c:
        c.execute(text(f'create schema "{schema}"'))
    engine = create_engine(PG_URL, connect_args={"options": f"-csearch_path={schema}"}, pool_size=pool_size)
    try:
        if migrate:
            upgrade(engine)
        yield engine
    finally:
        engine.dispose()
        with admin.begin() as c:
            c.execute(text(f'drop schema "{schema}" cascade'))
        admin.dispose()


def _diffs(engine: Engine) -> list[object]:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": False})
        return list(compare_metadata(ctx, metadata))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_fresh_upgrade_twice_matches_schema(dialect: str, tmp_path: Path) -> None:
    with app_db(dialect, tmp_path, migrate=False) as engine:
        assert not set(inspect(engine).get_table_names()) & TABLES
        upgrade(engine)
        assert set(inspect(engine).get_table_names()) >= TABLES
        upgrade(engine)  # idempotent: nothing to do, no error
        with engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == "0002_budget_notifications"
            assert conn.execute(text("select seq, hash from audit_head")).all() == [(0, "0" * 64)]
        assert _diffs(engine) == []


@pytest.mark.parametrize("dialect", DIALECTS)
def test_compare_metadata_sees_a_drift(dialect: str, tmp_path: Path) -> None:
    """The no-diff assertion above can fail: a column dropped behind the migration's back shows up."""
    with app_db(dialect, tmp_path) as engine:
        with engine.begin() as conn:
            conn.execute(text("alter table control_flags drop column updated_by"))
        diffs = _diffs(engine)
        assert any("updated_by" in repr(d) for d in diffs)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_existing_recommendations_table_is_adopted(dialect: str, tmp_path: Path) -> None:
    with app_db(dialect, tmp_path, migrate=False) as engine:
        old = MetaData()
        recommendations_table(old)
        old.create_all(engine)  # what the recommender's store did before migrations
        now = datetime(2026, 11, 1, tzinfo=UTC)
        with engine.begin() as conn:
            conn.execute(old.tables["recommendations"].insert().values(
                id="r1", kind="reclaim_idle_gpu", cluster="c1", current={}, proposed={}, evidence={},
                est_monthly_savings_usd=1.0, confidence=0.5, risk="low", status="open", created_at=now,
                updated_at=now, last_seen_at=now))
        upgrade(engine)
        with engine.connect() as conn:
            assert conn.execute(text("select id from recommendations")).scalars().all() == ["r1"]
        assert set(inspect(engine).get_table_names()) >= TABLES


def test_workload_id_is_deterministic() -> None:
    a = workload_id("c1", "ns", "Deployment", "web")
    assert a == workload_id("c1", "ns", "Deployment", "web")
    assert a.startswith("wl_") and len(a) == 15
    assert a != workload_id("c1", "ns", "StatefulSet", "web")
