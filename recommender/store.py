"""The ``recommendations`` table in the app DB (SQLAlchemy 2; SQLite by default, PostgreSQL in prod).

Upsert by stable id: the same finding on the next run updates its row (``created_at`` is kept,
``updated_at``/``last_seen_at`` move); a finding of a kind and cluster that this run evaluated but
did not produce again is marked ``resolved`` — never deleted. A resolved finding that comes back
is reopened. Statuses set by people (e.g. ``dismissed``) are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Engine,
    Float,
    Index,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    select,
    update,
)

from recommender.model import Recommendation

__all__ = ["RecommendationStore", "recommendations_table", "OPEN", "RESOLVED", "UpsertResult"]

OPEN = "open"
RESOLVED = "resolved"


def recommendations_table(metadata: MetaData, name: str = "recommendations") -> Table:
    return Table(
        name,
        metadata,
        Column("id", String(64), primary_key=True),
        Column("kind", String(64), nullable=False),
        Column("cluster", String(255), nullable=False),
        Column("namespace", String(255)),
        Column("workload", String(512)),
        Column("tier", String(32)),
        Column("current", JSON, nullable=False),
        Column("proposed", JSON, nullable=False),
        Column("evidence", JSON, nullable=False),
        Column("est_monthly_savings_usd", Float, nullable=False),
        Column("confidence", Float, nullable=False),
        Column("risk", String(16), nullable=False),
        Column("status", String(32), nullable=False, default=OPEN),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("updated_at", DateTime(timezone=True), nullable=False),
        Column("last_seen_at", DateTime(timezone=True), nullable=False),
        Column("resolved_at", DateTime(timezone=True)),
        Index(f"ix_{name}_kind_cluster", "kind", "cluster"),
        Index(f"ix_{name}_status", "status"),
    )


class UpsertResult(dict[str, int]):
    """Counts: inserted, updated, reopened, resolved."""


def _sqlite_wal(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA busy_timeout=5000")
        cur.close()


class RecommendationStore:
    def __init__(self, url: str | Engine, *, schema: str | None = None, table_name: str = "recommendations"):
        self.engine = url if isinstance(url, Engine) else create_engine(url, future=True)
        if self.engine.dialect.name == "sqlite" and not isinstance(url, Engine):
            _sqlite_wal(self.engine)
        self.metadata = MetaData(schema=schema)
        self.table = recommendations_table(self.metadata, table_name)

    def create(self) -> None:
        self.metadata.create_all(self.engine)

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
