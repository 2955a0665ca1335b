"""The ``recommendations`` table in the app DB (SQLAlchemy 2; SQLite by default, PostgreSQL in prod).

The table is defined in ``gpufinops.appdb.schema`` and created by the app DB's migrations
(``gpufinops.appdb.upgrade``), like every other app-DB table.

Upsert by stable id: the same finding on the next run updates its row (``created_at`` is kept,
``updated_at``/``last_seen_at`` move); a finding of a kind and cluster that this run evaluated but
did not produce again is marked ``resolved`` — never deleted. A resolved finding that comes back
is reopened. Statuses set by people (e.g. ``dismissed``) are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, MetaData, select, update

from gpufinops.appdb import open_engine
from gpufinops.appdb import upgrade as upgrade_app_db
from gpufinops.appdb.schema import recommendations_table
from recommender.model import Recommendation

__all__ = ["RecommendationStore", "recommendations_table", "OPEN", "RESOLVED", "UpsertResult"]

OPEN = "open"
RESOLVED = "resolved"


class UpsertResult(dict[str, int]):
    """Counts: inserted, updated, reopened, resolved."""


class RecommendationStore:
    def __init__(self, url: str | Engine, *, schema: str | None = None, table_name: str = "recommendations"):
        self.engine = url if isinstance(url, Engine) else open_engine(url)
        self.schema = schema
        self.metadata = MetaData(schema=schema)
        self.table = recommendations_table(self.metadata, table_name)
        self._ready = False

    def create(self) -> None:
        """Bring the app DB to the latest migration (once per store). A non-default ``table_name``
        (tests of old layouts) is created directly instead."""
        if self._ready:
            return
        if self.table.name == "recommendations":
            upgrade_app_db(self.engine, schema=self.schema)
        else:
            self.metadata.create_all(self.engine)
        self._ready = True

    def upsert(self, recs: Sequence[Recommendation], *, scope: Iterable[tuple[str, str]] | None = None,
               now: datetime | None = None) -> UpsertResult:
        """Write ``recs``; resolve open rows of the (kind, cluster) pairs in ``scope`` (default: the
        pairs present in ``recs``) that this run did not produce. One transaction."""
        now = now or datetime.now(UTC)
        t = self.table
        scope_set = set(scope) if scope is not None else {(r.kind, r.cluster) for r in recs}
        by_id = {r.id: r for r in recs}
        result = UpsertResult(inserted=0, updated=0, reopened=0, resolved=0)
        self.create()
        with self.engine.begin() as conn:
            existing = {row.id: row.status for row in conn.execute(select(t.c.id, t.c.status))}
            for rid, r in by_id.items():
                values = {
                    "kind": r.kind, "cluster": r.cluster, "namespace": r.namespace, "workload": r.workload,
                    "tier": r.tier, "current": _jsonable(r.current), "proposed": _jsonable(r.proposed),
                    "evidence": _jsonable(r.evidence), "est_monthly_savings_usd": r.est_monthly_savings_usd,
                    "confidence": r.confidence, "risk": r.risk, "updated_at": now, "last_seen_at": now,
                }
                if rid not in existing:
                    conn.execute(t.insert().values(id=rid, status=OPEN, created_at=r.created_at or now, **values))
                    result["inserted"] += 1
                    continue
                if existing[rid] == RESOLVED:
                    values.update(status=OPEN, resolved_at=None)
                    result["reopened"] += 1
                conn.execute(update(t).where(t.c.id == rid).values(**values))
                result["updated"] += 1
            gone = [
                row.id for row in conn.execute(select(t.c.id, t.c.kind, t.c.cluster).where(t.c.status == OPEN))
                if (row.kind, row.cluster) in scope_set and row.id not in by_id
            ]
            for chunk in range(0, len(gone), 500):
                conn.execute(update(t).where(t.c.id.in_(gone[chunk:chunk + 500]))
                             .values(status=RESOLVED, resolved_at=now, updated_at=now))
            result["resolved"] = len(gone)
        return result

    def list(self, *, status: str | None = OPEN, kind: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        t = self.table
        q = select(t).order_by(t.c.est_monthly_savings_usd.desc(), t.c.id)
        if status:
            q = q.where(t.c.status == status)
        if kind:
            q = q.where(t.c.kind == kind)
        if limit:
            q = q.limit(limit)
        self.create()
        with self.engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(q)]

    def drop(self) -> None:
        self.metadata.drop_all(self.engine)
        self._ready = False


def _jsonable(value: Any) -> Any:
    """JSON columns: datetimes as ISO strings, numpy scalars as Python numbers."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value
