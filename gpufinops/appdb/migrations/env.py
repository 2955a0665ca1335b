"""Alembic environment for the app DB.

Run programmatically by ``gpufinops.appdb.upgrade`` (which hands over an open connection and an
optional PostgreSQL schema in ``config.attributes``); ``alembic -x url=...`` from the command line
also works for operators. On PostgreSQL a transaction-scoped advisory lock serialises concurrent
upgrades (several API replicas starting at once).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, text

from gpufinops.appdb.schema import metadata

_LOCK_KEY = 7_301_220_001  # pg_advisory_xact_lock key for migrations


def _run(connection: Connection, schema: str | None) -> None:
    if connection.dialect.name == "postgresql":
        if schema:
            connection.execute(text("select set_config('search_path', :s, true)"), {"s": f'"{schema}"'})
        connection.execute(text("select pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table_schema=schema,
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    config = context.config
    connection = config.attributes.get("connection")
    schema = config.attributes.get("schema")
    if connection is not None:
        _run(connection, schema)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("pass the app DB URL: alembic -x url=sqlite:///var/app.db upgrade head")
    from gpufinops.appdb.engine import open_engine

    engine = open_engine(url)
    with engine.connect() as conn, conn.begin():
        _run(conn, schema)


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) mode is not supported; run against a database")
run_migrations_online()
