"""The app DB's tables (SQLAlchemy Core, one MetaData): what the migrations create, column for column.

The app DB holds what people and the controller decide (recommendations, changes, approvals, the
audit log, idempotency keys, registered workloads, control flags), unlike the warehouse, which is
rebuilt from the lake. ``migrations/versions/*`` must produce exactly this metadata; a test compares
them on SQLite and PostgreSQL.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

__all__ = [
    "metadata",
    "recommendations_table",
    "recommendations",
    "changes",
    "approvals",
    "audit_log",
    "audit_head",
    "idempotency_keys",
    "workloads",
    "control_flags",
    "budget_notifications",
    "GENESIS_HASH",
]

# prev_hash of the first audit row (and the head's hash while the log is empty)
GENESIS_HASH = "0" * 64

metadata = MetaData()


def recommendations_table(metadata: MetaData, name: str = "recommendations") -> Table:
    """The recommender's findings (upsert by stable id; see recommender/store.py)."""
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
        Column("status", String(32), nullable=False, default="open"),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("updated_at", DateTime(timezone=True), nullable=False),
        Column("last_seen_at", DateTime(timezone=True), nullable=False),
        Column("resolved_at", DateTime(timezone=True)),
        Index(f"ix_{name}_kind_cluster", "kind", "cluster"),
        Index(f"ix_{name}_status", "status"),
    )


recommendations = recommendations_table(metadata)

changes = Table(
    "changes",
    metadata,
    Column("id", String(32), primary_key=True),  # chg_<12 hex>
    Column("kind", String(64), nullable=False),
    Column("cluster", String(255), nullable=False),
    Column("namespace", String(255)),  # null for node actions
    Column("target_kind", String(64), nullable=False),
    Column("target_name", String(512), nullable=False),
    Column("team", String(255)),  # null = platform-level
    Column("recommendation_id", String(64)),  # null when created through the API
    Column("requested_by", String(255), nullable=False),
    Column("ticket", String(255)),
    Column("reason", Text),
    Column("current", JSON, nullable=False),
    Column("proposed", JSON, nullable=False),
    Column("evidence", JSON, nullable=False),
    Column("evidence_at", DateTime(timezone=True)),
    Column("target_resource_version", String(64)),
    Column("status", String(32), nullable=False),
    Column("version", Integer, nullable=False),  # optimistic lock: +1 per transition
    Column("approvals_required", Integer, nullable=False),
    Column("plan", JSON),
    Column("prior_spec", JSON),
    Column("result", JSON),
    Column("error", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("applied_at", DateTime(timezone=True)),
    Column("verified_at", DateTime(timezone=True)),
    Index("ix_changes_status", "status"),
    Index("ix_changes_cluster_namespace", "cluster", "namespace"),
    Index("ix_changes_team", "team"),
    Index("ix_changes_recommendation_id", "recommendation_id"),
)

approvals = Table(
    "approvals",
    metadata,
    Column("id", String(32), primary_key=True),  # apr_<12 hex>
    Column("change_id", String(32), ForeignKey("changes.id", name="fk_approvals_change_id"), nullable=False),
    Column("actor", String(255), nullable=False),
    Column("decision", String(16), nullable=False),  # approve | reject
    Column("reason", Text),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("resource_version", String(64)),
    UniqueConstraint("change_id", "actor", name="uq_approvals_change_actor"),
)

# Append-only: triggers (see the migration) refuse UPDATE and DELETE on both dialects.
audit_log = Table(
    "audit_log",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("actor", String(255), nullable=False),
    Column("action", String(64), nullable=False),
    Column("change_id", String(32)),
    Column("from_status", String(32)),
    Column("to_status", String(32)),
    Column("reason", Text),
    Column("details", JSON),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    Index("ix_audit_log_change_id", "change_id"),
)

# One row (id = 1): the last seq and its hash, moved in the same transaction as each append.
audit_head = Table(
    "audit_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", Integer, nullable=False),
    Column("hash", String(64), nullable=False),
)

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("actor", String(255), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("method_path", String(512), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("response", JSON),
    Column("status_code", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

workloads = Table(
    "workloads",
    metadata,
    Column("id", String(32), primary_key=True),  # wl_<12 hex>, see ids.workload_id
    Column("cluster", String(255), nullable=False),
    Column("namespace", String(255), nullable=False),
    Column("name", String(255), nullable=False),
    Column("kind", String(64), nullable=False, default="Deployment", server_default=text("'Deployment'")),
    Column("team", String(255)),
    Column("image", String(1024)),
    Column("cpu", Float),
    Column("mem_gb", Float),
    Column("min_replicas", Integer),
    Column("max_replicas", Integer),
    Column("scale_metric", String(64)),
    Column("target_rps", Float),
    Column("budget_usd_day", Float),
    Column("version", Integer, nullable=False, default=1),
    Column("created_by", String(255)),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("cluster", "namespace", "kind", "name", name="uq_workloads_target"),
)

control_flags = Table(
    "control_flags",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", JSON),
    Column("updated_by", String(255)),
    Column("updated_at", DateTime(timezone=True)),
)

# A budget breach notice sent (or being sent: status 'claimed') to one audience over one channel.
# breach_id = "<scope_id>|<basis>|<day>": the primary key makes a breach go out once per day.
budget_notifications = Table(
    "budget_notifications",
    metadata,
    Column("breach_id", String(600), primary_key=True),
    Column("audience", String(255), primary_key=True),
    Column("channel", String(64), primary_key=True),
    Column("day", String(10), nullable=False),
    Column("scope_id", String(512), nullable=False),
    Column("basis", String(16), nullable=False),  # run_rate | forecast
    Column("status", String(16), nullable=False),  # claimed | sent
    Column("detail", JSON),
    Column("claimed_at", DateTime(timezone=True), nullable=False),
    Column("sent_at", DateTime(timezone=True)),
    Index("ix_budget_notifications_day", "day"),
)
