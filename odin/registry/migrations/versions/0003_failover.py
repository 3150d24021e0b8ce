"""Failover: teams choose whether health moves their daggers off a cluster that stays down; a catalog stream may
have a failover Kafka cluster (a mirror keeping its offsets), and says which one it is served from.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("teams", sa.Column("auto_failover", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("streams", sa.Column("failover_bootstrap_servers", sa.Text(), nullable=True))
    op.add_column("streams", sa.Column("on_failover", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    op.drop_column("streams", "on_failover")
    op.drop_column("streams", "failover_bootstrap_servers")
    op.drop_column("teams", "auto_failover")
