"""The platform registry's tables (SQLAlchemy Core). Migrations (odin/registry/migrations) create exactly these;
a test compares the two, so a change here without a migration fails.

Who may do what (teams, members), what can be read (streams and their schema versions), where daggers run
(clusters), what runs (daggers), and what was done (history, append-only).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

# Deterministic constraint names, so migrations can refer to them.
metadata = MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "ix": "ix_%(table_name)s_%(column_0_name)s",
    }
)

SLUG_SQL = "^[a-z][a-z0-9-]{0,62}$"  # jobs.spec.SLUG: team, cluster, dagger and stream names
CLUSTER_STATES = ("provisioning", "ready", "failed", "destroying", "destroyed")
DAGGER_STATES = ("deploying", "running", "stopping", "stopped", "failed", "crashlooping")
OUTCOMES = ("ok", "refused", "failed")
ALERT_STATUSES = ("firing", "resolved")
SIMULATION_STATES = ("running", "finished", "halted", "failed")


def _now() -> Column[object]:
    return Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now())


teams = Table(
    "teams",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("description", Text, nullable=False, server_default=""),
    # health moves the team's daggers off a cluster that stays down to another of its clusters
    # (jobs/health/cluster_failover.py)
    Column("auto_failover", Boolean, nullable=False, server_default=false()),
    _now(),
    CheckConstraint(f"name ~ '{SLUG_SQL}'", name="slug"),
)

members = Table(
    "members",
    metadata,
    Column("team", String(63), ForeignKey("teams.name", ondelete="CASCADE"), primary_key=True),
    Column("username", String(128), primary_key=True),
    _now(),
)

streams = Table(
    "streams",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("description", Text, nullable=False, server_default=""),
    Column("kafka_cluster", String(63), nullable=False),
    Column("bootstrap_servers", Text, nullable=False),
    # its Kafka cluster's failover: a mirror that keeps every partition's offsets (odin/kafka/mirror.py); `on_failover`:
    # daggers read from the mirror since the primary went down (jobs/health/kafka_failover.py)
    Column("failover_bootstrap_servers", Text, nullable=True),
    Column("on_failover", Boolean, nullable=False, server_default=false()),
    Column("topics", JSONB, nullable=False),
    Column("proto", String(255), nullable=False),
    Column("perf_twin_of", String(63), ForeignKey("streams.name"), nullable=True),
    Column("schema_version", Integer, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint(f"name ~ '{SLUG_SQL}'", name="slug"),
)

# Every schema a stream has had: a dagger is locked to one (its fingerprint), so a later change is judged against
# what running daggers decode with.
schema_versions = Table(
    "schema_versions",
    metadata,
    Column("stream", String(63), ForeignKey("streams.name", ondelete="CASCADE"), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("proto", String(255), nullable=False),
    Column("descriptor_set", Text, nullable=False),  # base64 FileDescriptorSet of the message and its imports
    _now(),
    UniqueConstraint("stream", "fingerprint", name="uq_schema_versions_stream_fingerprint"),
)

clusters = Table(
    "clusters",
    metadata,
    Column("team", String(63), ForeignKey("teams.name"), primary_key=True),
    Column("name", String(63), primary_key=True),
    Column("environment", String(32), nullable=False),
    Column("masters", Integer, nullable=False),
    Column("workers", Integer, nullable=False),
    Column("worker_cores", Integer, nullable=False),
    Column("worker_memory", String(16), nullable=False),
    Column("addresses", JSONB, nullable=False, server_default="{}"),  # master URLs, REST URL, UIs
    Column("state", String(16), nullable=False),
    Column("terraform_state", Text, nullable=False),  # where the cluster's own Terraform state lives
    _now(),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint(f"name ~ '{SLUG_SQL}'", name="slug"),
    CheckConstraint(f"state IN {CLUSTER_STATES}", name="state"),
    CheckConstraint("masters >= 1 AND workers >= 1", name="size"),
)

daggers = Table(
    "daggers",
    metadata,
    Column("team", String(63), ForeignKey("teams.name"), primary_key=True),
    Column("name", String(63), primary_key=True),
    Column("spec", JSONB, nullable=False),
    Column("spec_version", Integer, nullable=False),  # 1, 2, ... per update
    Column("schema_versions", JSONB, nullable=False, server_default="{}"),  # stream name -> version it is locked to
    Column("cluster", String(63), nullable=True),
    Column("submission_id", String(128), nullable=True),
    Column("checkpoint", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("since", DateTime(timezone=True), nullable=False, server_default=func.now()),
    _now(),
    ForeignKeyConstraint(["team", "cluster"], ["clusters.team", "clusters.name"], name="fk_daggers_cluster"),
    CheckConstraint(f"name ~ '{SLUG_SQL}'", name="slug"),
    CheckConstraint(f"state IN {DAGGER_STATES}", name="state"),
)

# Append-only (a trigger refuses UPDATE and DELETE): who did what, when, and how it ended.
history = Table(
    "history",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("actor", String(128), nullable=False),
    Column("action", String(64), nullable=False),
    Column("subject", Text, nullable=False, index=True),  # "cluster:team/name", "dagger:team/name", "stream:name"
    Column("outcome", String(16), nullable=False),
    Column("message", Text, nullable=False, server_default=""),
    Column("detail", JSONB, nullable=False, server_default="{}"),
    CheckConstraint(f"outcome IN {OUTCOMES}", name="outcome"),
)

# Every alert notification Alertmanager's webhook delivered (odin/alerting/receiver.py): append-only like the
# history; an alert's state now is its latest row (by fingerprint).
alerts = Table(
    "alerts",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("received_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("fingerprint", String(64), nullable=False, index=True),
    Column("status", String(16), nullable=False),
    Column("alertname", String(128), nullable=False),
    Column("team", String(63), nullable=True, index=True),
    Column("subject", Text, nullable=False, server_default=""),  # "dagger:team/name", "cluster:team/name"
    Column("receiver", String(128), nullable=False, server_default=""),
    Column("labels", JSONB, nullable=False, server_default="{}"),
    Column("annotations", JSONB, nullable=False, server_default="{}"),
    Column("starts_at", DateTime(timezone=True), nullable=True),
    Column("ends_at", DateTime(timezone=True), nullable=True),
    CheckConstraint(f"status IN {ALERT_STATUSES}", name="status"),
)

# Loki's simulation store: one row per experiment run (loki/store.py), and its journal, append-only: every step of
# the run (plan, probes, faults started and reverted, halts) with what it touched, so `loki halt` can revert the
# faults of a run whose process died, and a report can be rebuilt.
simulations = Table(
    "simulations",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("playbook", String(63), nullable=False, index=True),
    Column("environment", String(63), nullable=False),
    Column("team", String(63), nullable=True),
    Column("cluster", String(63), nullable=True),
    Column("spec", JSONB, nullable=False),  # the playbook as run (bound to its target)
    Column("state", String(16), nullable=False),
    Column("actor", String(128), nullable=False),
    Column("pid", Integer, nullable=True),  # the run's process, while it runs
    Column("verdict", String(16), nullable=True),
    Column("score", Float, nullable=True),
    Column("report", Text, nullable=True),  # where the report is (JSON + HTML)
    Column("summary", JSONB, nullable=False, server_default="{}"),
    Column("started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("ended_at", DateTime(timezone=True), nullable=True),
    CheckConstraint(f"state IN {SIMULATION_STATES}", name="state"),
)

simulation_journal = Table(
    "simulation_journal",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("run_id", String(40), ForeignKey("simulations.id"), nullable=False, index=True),
    Column("at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("step", String(64), nullable=False),
    Column("detail", JSONB, nullable=False, server_default="{}"),
)
