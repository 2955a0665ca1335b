"""App DB: recommendations, changes, approvals, audit log (append-only), idempotency keys, workloads,
control flags.

An app DB made before migrations existed already holds ``recommendations`` (created by the
recommender's store): it is adopted as it is, not created again.

Revision ID: 0001_app_db
Revises:
Create Date: 2026-11-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_app_db"
down_revision = None
branch_labels = None
depends_on = None

GENESIS_HASH = "0" * 64

_SQLITE_TRIGGERS = [
    """CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
       BEGIN SELECT RAISE(ABORT, 'audit_log is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
       BEGIN SELECT RAISE(ABORT, 'audit_log is append-only: DELETE refused'); END""",
]
_PG_TRIGGERS = [
    """CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP; END $$""",
    """CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
       FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()""",
    """CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
       FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only()""",
]


def _ts(name: str, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    bind = op.get_bind()
    if not sa.inspect(bind).has_table("recommendations"):
        op.create_table(
            "recommendations",
            sa.Column("id", sa.String(64), primary_key=True),
            sa.Column("kind", sa.String(64), nullable=False),
            sa.Column("cluster", sa.String(255), nullable=False),
            sa.Column("namespace", sa.String(255)),
            sa.Column("workload", sa.String(512)),
            sa.Column("tier", sa.String(32)),
            sa.Column("current", sa.JSON, nullable=False),
            sa.Column("proposed", sa.JSON, nullable=False),
            sa.Column("evidence", sa.JSON, nullable=False),
            sa.Column("est_monthly_savings_usd", sa.Float, nullable=False),
            sa.Column("confidence", sa.Float, nullable=False),
            sa.Column("risk", sa.String(16), nullable=False),
            sa.Column("status", sa.String(32), nullable=False),
            _ts("created_at", False),
            _ts("updated_at", False),
            _ts("last_seen_at", False),
            _ts("resolved_at"),
        )
        op.create_index("ix_recommendations_kind_cluster", "recommendations", ["kind", "cluster"])
        op.create_index("ix_recommendations_status", "recommendations", ["status"])

    op.create_table(
        "changes",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("cluster", sa.String(255), nullable=False),
        sa.Column("namespace", sa.String(255)),
        sa.Column("target_kind", sa.String(64), nullable=False),
        sa.Column("target_name", sa.String(512), nullable=False),
        sa.Column("team", sa.String(255)),
        sa.Column("recommendation_id", sa.String(64)),
        sa.Column("requested_by", sa.String(255), nullable=False),
        sa.Column("ticket", sa.String(255)),
        sa.Column("reason", sa.Text),
        sa.Column("current", sa.JSON, nullable=False),
        sa.Column("proposed", sa.JSON, nullable=False),
        sa.Column("evidence", sa.JSON, nullable=False),
        _ts("evidence_at"),
        sa.Column("target_resource_version", sa.String(64)),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("approvals_required", sa.Integer, nullable=False),
        sa.Column("plan", sa.JSON),
        sa.Column("prior_spec", sa.JSON),
        sa.Column("result", sa.JSON),
        sa.Column("error", sa.Text),
        _ts("created_at", False),
        _ts("updated_at", False),
        _ts("applied_at"),
        _ts("verified_at"),
    )
    op.create_index("ix_changes_status", "changes", ["status"])
    op.create_index("ix_changes_cluster_namespace", "changes", ["cluster", "namespace"])
    op.create_index("ix_changes_team", "changes", ["team"])
    op.create_index("ix_changes_recommendation_id", "changes", ["recommendation_id"])

    op.create_table(
        "approvals",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("change_id", sa.String(32), sa.ForeignKey("changes.id", name="fk_approvals_change_id"),
                  nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text),
        _ts("at", False),
        sa.Column("resource_version", sa.String(64)),
        sa.UniqueConstraint("change_id", "actor", name="uq_approvals_change_actor"),
    )

    op.create_table(
        "audit_log",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        _ts("at", False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("change_id", sa.String(32)),
        sa.Column("from_status", sa.String(32)),
        sa.Column("to_status", sa.String(32)),
        sa.Column("reason", sa.Text),
        sa.Column("details", sa.JSON),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    op.create_index("ix_audit_log_change_id", "audit_log", ["change_id"])
    head = op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    op.bulk_insert(head, [{"id": 1, "seq": 0, "hash": GENESIS_HASH}])
    for ddl in _PG_TRIGGERS if bind.dialect.name == "postgresql" else _SQLITE_TRIGGERS:
        op.execute(ddl)

    op.create_table(
        "idempotency_keys",
        sa.Column("actor", sa.String(255), primary_key=True),
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("method_path", sa.String(512), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("response", sa.JSON),
        sa.Column("status_code", sa.Integer, nullable=False),
        _ts("created_at", False),
    )

    op.create_table(
        "workloads",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("cluster", sa.String(255), nullable=False),
        sa.Column("namespace", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False, server_default=sa.text("'Deployment'")),
        sa.Column("team", sa.String(255)),
        sa.Column("image", sa.String(1024)),
        sa.Column("cpu", sa.Float),
        sa.Column("mem_gb", sa.Float),
        sa.Column("min_replicas", sa.Integer),
        sa.Column("max_replicas", sa.Integer),
        sa.Column("scale_metric", sa.String(64)),
        sa.Column("target_rps", sa.Float),
        sa.Column("budget_usd_day", sa.Float),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_by", sa.String(255)),
        _ts("created_at", False),
        _ts("updated_at", False),
        sa.UniqueConstraint("cluster", "namespace", "kind", "name", name="uq_workloads_target"),
    )

    op.create_table(
        "control_flags",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.JSON),
        sa.Column("updated_by", sa.String(255)),
        _ts("updated_at"),
    )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_truncate ON audit_log")
        op.execute("DROP TRIGGER IF EXISTS audit_log_no_update ON audit_log")
        op.execute("DROP FUNCTION IF EXISTS audit_log_append_only()")
    for table in ("control_flags", "workloads", "idempotency_keys", "audit_head", "audit_log", "approvals",
                  "changes"):
        op.drop_table(table)
    # recommendations stays: it predates the migrations and holds the recommender's history
