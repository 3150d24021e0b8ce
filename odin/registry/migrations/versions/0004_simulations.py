"""Loki's simulation store: experiment runs and their append-only journal.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "simulations",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("playbook", sa.String(63), nullable=False),
        sa.Column("environment", sa.String(63), nullable=False),
        sa.Column("team", sa.String(63), nullable=True),
        sa.Column("cluster", sa.String(63), nullable=True),
        sa.Column("spec", JSONB(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("verdict", sa.String(16), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("report", sa.Text(), nullable=True),
        sa.Column("summary", JSONB(), nullable=False, server_default="{}"),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('running', 'finished', 'halted', 'failed')", name="ck_simulations_state"),
        sa.PrimaryKeyConstraint("id", name="pk_simulations"),
    )
    op.create_index("ix_simulations_playbook", "simulations", ["playbook"])
    op.create_table(
        "simulation_journal",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(40), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("step", sa.String(64), nullable=False),
        sa.Column("detail", JSONB(), nullable=False, server_default="{}"),
        sa.ForeignKeyConstraint(["run_id"], ["simulations.id"], name="fk_simulation_journal_run_id"),
        sa.PrimaryKeyConstraint("id", name="pk_simulation_journal"),
    )
    op.create_index("ix_simulation_journal_run_id", "simulation_journal", ["run_id"])
    # A journal is what happened: nobody rewrites it (as the history).
    op.execute(
        """
        CREATE FUNCTION journal_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'a simulation journal is append-only: % refused', TG_OP;
        END $$;
        CREATE TRIGGER simulation_journal_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON simulation_journal
            FOR EACH STATEMENT EXECUTE FUNCTION journal_is_append_only();
        """
    )


def downgrade() -> None:
    op.execute(
        "DROP TRIGGER simulation_journal_append_only ON simulation_journal; DROP FUNCTION journal_is_append_only();"
    )
    op.drop_table("simulation_journal")
    op.drop_table("simulations")
