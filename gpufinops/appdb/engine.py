"""Opening the app DB and bringing its schema to the latest migration.

SQLite (the default, one file under ``home``) gets WAL, a 10 s busy timeout, foreign keys, and real
transactions: the driver's implicit BEGIN is turned off and SQLAlchemy's begin emits ``BEGIN`` itself
(``BEGIN IMMEDIATE`` inside :func:`begin_write`, so that two writers queue on the file lock instead of
one of them failing when it upgrades its read lock). PostgreSQL gets a normal pool.

:func:`upgrade` runs Alembic's ``upgrade head`` programmatically from this package's
``migrations/`` folder (no alembic.ini needed) and is idempotent; every entry point that opens the app
DB calls it through :func:`open_app_db`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event

__all__ = ["open_engine", "upgrade", "open_app_db", "begin_write", "as_utc", "MIGRATIONS_DIR"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

_SQLITE_BEGIN = "gpufinops_sqlite_begin"


def open_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite connections get WAL, busy_timeout=10000 and foreign_keys=ON."""
    if url.startswith("sqlite"):
        engine = create_engine(url)
        _sqlite_setup(engine)
        return engine
    return create_engine(url, pool_pre_ping=True)


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy's begin event below emits BEGIN
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA busy_timeout=10000")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get(_SQLITE_BEGIN, "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


@contextmanager
def begin_write(engine: Engine) -> Iterator[Connection]:
    """One read-write transaction. On SQLite it takes the write lock up front (BEGIN IMMEDIATE)."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.execution_options(**{_SQLITE_BEGIN: "IMMEDIATE"})
        with conn.begin():
            yield conn


def upgrade(engine: Engine, *, schema: str | None = None) -> None:
    """Alembic ``upgrade head``. ``schema`` (PostgreSQL only) puts every table, the trigger function
    and the version table in that schema (tests give each run its own)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.execution_options(**{_SQLITE_BEGIN: "IMMEDIATE"})
        with conn.begin():
            config.attributes["connection"] = conn
            config.attributes["schema"] = schema
            command.upgrade(config, "head")


def open_app_db(url: str) -> Engine:
    """``open_engine`` + ``upgrade``: what every entry point calls."""
    engine = open_engine(url)
    upgrade(engine)
    return engine


def as_utc(value: datetime | None) -> datetime | None:
    """SQLite hands timestamps back naive (they were written as UTC): make them aware UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
