"""The app DB (SQLAlchemy 2 + Alembic; SQLite by default, PostgreSQL in production): schema, ids, engine.

Kernel package: imports none of the parts. See ``schema.py`` for the tables and ``engine.py`` for how
every entry point opens and upgrades it.
"""

from __future__ import annotations

from gpufinops.appdb.engine import MIGRATIONS_DIR, as_utc, begin_write, open_app_db, open_engine, upgrade
from gpufinops.appdb.ids import new_approval_id, new_change_id, workload_id
from gpufinops.appdb.schema import metadata

__all__ = [
    "open_engine",
    "upgrade",
    "open_app_db",
    "begin_write",
    "as_utc",
    "MIGRATIONS_DIR",
    "metadata",
    "workload_id",
    "new_change_id",
    "new_approval_id",
]
