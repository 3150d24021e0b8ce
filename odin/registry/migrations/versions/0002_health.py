"""Health: daggers may be crashlooping; the alerts Alertmanager delivers.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

STATES = "('deploying', 'running', 'stopping', 'stopped', 'failed')"
WITH_CRASHLOOPING = "('deploying', 'running', 'stopping', 'stopped', 'failed', 'crashlooping')"


def _state_check(states: str) -> None:
    # the name 0001 gave it, through the naming convention
    op.execute("ALTER TABLE daggers DROP CONSTRAINT ck_daggers_ck_daggers_state")
    op.execute(f"ALTER TABLE daggers ADD CONSTRAINT ck_daggers_ck_daggers_state CHECK (state IN {states})")


def upgrade() -> None:
    _state_check(WITH_CRASHLOOPING)
    op.create_table(
        "alerts",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("alertname", sa.String(128), nullable=False),
        sa.Column("team", sa.String(63), nullable=True),
        sa.Column("subject", sa.Text(), nullable=False, server_default=""),
        sa.Column("receiver", sa.String(128), nullable=False, server_default=""),
        sa.Column("labels", JSONB(), nullable=False, server_default="{}"),
        sa.Column("annotations", JSONB(), nullable=False, server_default="{}"),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('firing', 'resolved')", name="ck_alerts_status"),
        sa.PrimaryKeyConstraint("id", name="pk_alerts"),
    )
    op.create_index("ix_alerts_fingerprint", "alerts", ["fingerprint"])
    op.create_index("ix_alerts_team", "alerts", ["team"])


def downgrade() -> None:
    op.drop_table("alerts")
    op.execute("UPDATE daggers SET state = 'failed' WHERE state = 'crashlooping'")
    _state_check(STATES)
