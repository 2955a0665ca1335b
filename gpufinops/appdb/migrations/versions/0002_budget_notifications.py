"""Budget breach notifications: what was sent, so a breach goes out once per audience, channel and day.

Revision ID: 0002_budget_notifications
Revises: 0001_app_db
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_budget_notifications"
down_revision = "0001_app_db"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "budget_notifications",
        sa.Column("breach_id", sa.String(600), primary_key=True),
        sa.Column("audience", sa.String(255), primary_key=True),
        sa.Column("channel", sa.String(64), primary_key=True),
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("scope_id", sa.String(512), nullable=False),
        sa.Column("basis", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("detail", sa.JSON),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True)),
    )
    op.create_index("ix_budget_notifications_day", "budget_notifications", ["day"])


def downgrade() -> None:
    op.drop_index("ix_budget_notifications_day", table_name="budget_notifications")
    op.drop_table("budget_notifications")
