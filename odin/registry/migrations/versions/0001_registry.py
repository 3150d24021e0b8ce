"""The platform registry: teams, members, streams and their schema versions, clusters, daggers, history.

Revision ID: 0001
Revises:
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SLUG = "^[a-z][a-z0-9-]{0,62}$"


def _created() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


def upgrade() -> None:
    op.create_table(
        "teams",
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        _created(),
        sa.CheckConstraint(f"name ~ '{SLUG}'", name="ck_teams_slug"),
        sa.PrimaryKeyConstraint("name", name="pk_teams"),
    )
    op.create_table(
        "members",
        sa.Column("team", sa.String(63), nullable=False),
        sa.Column("username", sa.String(128), nullable=False),
        _created(),
        sa.ForeignKeyConstraint(["team"], ["teams.name"], name="fk_members_team", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("team", "username", name="pk_members"),
    )
    op.create_table(
        "streams",
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        sa.Column("kafka_cluster", sa.String(63), nullable=False),
        sa.Column("bootstrap_servers", sa.Text(), nullable=False),
        sa.Column("topics", JSONB(), nullable=False),
        sa.Column("proto", sa.String(255), nullable=False),
        sa.Column("perf_twin_of", sa.String(63), nullable=True),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint(f"name ~ '{SLUG}'", name="ck_streams_slug"),
        sa.ForeignKeyConstraint(["perf_twin_of"], ["streams.name"], name="fk_streams_perf_twin_of"),
        sa.PrimaryKeyConstraint("name", name="pk_streams"),
    )
    op.create_table(
        "schema_versions",
        sa.Column("stream", sa.String(63), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("proto", sa.String(255), nullable=False),
        sa.Column("descriptor_set", sa.Text(), nullable=False),
        _created(),
        sa.ForeignKeyConstraint(["stream"], ["streams.name"], name="fk_schema_versions_stream", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("stream", "version", name="pk_schema_versions"),
        sa.UniqueConstraint("stream", "fingerprint", name="uq_schema_versions_stream_fingerprint"),
    )
    op.create_table(
        "clusters",
        sa.Column("team", sa.String(63), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("environment", sa.String(32), nullable=False),
        sa.Column("masters", sa.Integer(), nullable=False),
        sa.Column("workers", sa.Integer(), nullable=False),
        sa.Column("worker_cores", sa.Integer(), nullable=False),
        sa.Column("worker_memory", sa.String(16), nullable=False),
        sa.Column("addresses", JSONB(), nullable=False, server_default="{}"),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("terraform_state", sa.Text(), nullable=False),
        _created(),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.CheckConstraint(f"name ~ '{SLUG}'", name="ck_clusters_slug"),
        sa.CheckConstraint(
            "state IN ('provisioning', 'ready', 'failed', 'destroying', 'destroyed')", name="ck_clusters_state"
        ),
        sa.CheckConstraint("masters >= 1 AND workers >= 1", name="ck_clusters_size"),
        sa.ForeignKeyConstraint(["team"], ["teams.name"], name="fk_clusters_team"),
        sa.PrimaryKeyConstraint("team", "name", name="pk_clusters"),
    )
    op.create_table(
        "daggers",
        sa.Column("team", sa.String(63), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("spec", JSONB(), nullable=False),
        sa.Column("spec_version", sa.Integer(), nullable=False),
        sa.Column("schema_versions", JSONB(), nullable=False, server_default="{}"),
        sa.Column("cluster", sa.String(63), nullable=True),
        sa.Column("submission_id", sa.String(128), nullable=True),
        sa.Column("checkpoint", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        _created(),
        sa.CheckConstraint(f"name ~ '{SLUG}'", name="ck_daggers_slug"),
        sa.CheckConstraint(
            "state IN ('deploying', 'running', 'stopping', 'stopped', 'failed')", name="ck_daggers_state"
        ),
        sa.ForeignKeyConstraint(["team"], ["teams.name"], name="fk_daggers_team"),
        sa.ForeignKeyConstraint(["team", "cluster"], ["clusters.team", "clusters.name"], name="fk_daggers_cluster"),
        sa.PrimaryKeyConstraint("team", "name", name="pk_daggers"),
    )
    op.create_table(
        "history",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False, server_default=""),
        sa.Column("detail", JSONB(), nullable=False, server_default="{}"),
        sa.CheckConstraint("outcome IN ('ok', 'refused', 'failed')", name="ck_history_outcome"),
        sa.PrimaryKeyConstraint("id", name="pk_history"),
    )
    op.create_index("ix_history_subject", "history", ["subject"])
    # The history is a record of what happened: nobody rewrites it, not even the platform's own code.
    op.execute(
        """
        CREATE FUNCTION history_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'the registry''s history is append-only: % refused', TG_OP;
        END $$;
        CREATE TRIGGER history_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON history
            FOR EACH STATEMENT EXECUTE FUNCTION history_is_append_only();
        """
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER history_append_only ON history; DROP FUNCTION history_is_append_only();")
    for table in ("history", "daggers", "clusters", "schema_versions", "streams", "members", "teams"):
        op.drop_table(table)
