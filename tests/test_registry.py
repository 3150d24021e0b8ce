"""The platform registry on the test stack's PostgreSQL: migrations, the records, and the append-only history."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from odin.registry import Refused, Registry, RegistryError, migrate
from odin.registry.records import ClusterRecord, DaggerRecord, StreamRecord
from odin.registry.schema import metadata
from tests.support.services import Services


def test_the_newest_revision_read_from_the_scripts_names_is_alembics_head() -> None:
    """`migrate.head` reads the scripts' names, not Alembic's graph (every process that opens the registry asks it):
    a script named out of order, or revising another than the one before, fails here."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(migrate.MIGRATIONS))
    assert scripts.get_current_head() == migrate.head()
    for script in scripts.walk_revisions():
        name = f"{script.revision}_"
        assert Path(script.path).name.startswith(name), f"{script.path}: name it {name}<what>.py"
        if script.down_revision is not None:
            assert int(script.down_revision) == int(script.revision) - 1, f"{script.path}: revises the one before"


def test_odin_up_created_and_migrated_the_registry(services: Services) -> None:
    assert services.report is not None and services.report.registry_revision == migrate.head()
    reg = Registry.connect(services.registry_url)
    try:
        assert migrate.current(reg.engine) == migrate.head()
    finally:
        reg.close()


def test_migrations_make_exactly_the_schema_module_and_go_back(empty_db: str) -> None:
    engine = create_engine(empty_db)
    try:
        assert migrate.upgrade(engine) == migrate.head()
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), metadata)
        assert diff == [], f"odin/registry/schema.py and the migrations differ: {diff}"
        assert migrate.downgrade(engine, "base") is None
        assert set(inspect(engine).get_table_names()) == {"alembic_version"}
        assert migrate.upgrade(engine) == migrate.head()  # and forward again
    finally:
        engine.dispose()


def test_a_database_not_migrated_is_refused_with_the_fix(empty_db: str) -> None:
    with pytest.raises(RegistryError, match=r"revision none, this code needs .*: run `odin up`"):
        Registry.connect(empty_db)


def test_the_history_is_append_only(registry: Registry) -> None:
    entry = registry.record("alice", "dagger_deploy", "dagger:pricing/surge", "ok", detail={"cluster": "c1"})
    for statement in ("UPDATE history SET outcome = 'failed'", "DELETE FROM history", "TRUNCATE history"):
        with pytest.raises(DBAPIError, match="append-only"), registry.engine.begin() as conn:
            conn.execute(text(statement))
    [kept] = registry.history("dagger:pricing/surge")
    assert (kept.id, kept.actor, kept.outcome, kept.detail) == (entry, "alice", "ok", {"cluster": "c1"})


def test_an_action_records_how_it_ended(registry: Registry) -> None:
    with registry.action("alice", "cluster_create", "cluster:pricing/c1", workers=1) as detail:
        detail["terraform"] = "2 to add"
    with pytest.raises(Refused), registry.action("bob", "cluster_destroy", "cluster:pricing/c1"):
        raise Refused("bob is not a member of team pricing")
    with pytest.raises(ZeroDivisionError), registry.action("alice", "cluster_scale", "cluster:pricing/c1"):
        _ = 1 / 0
    entries = registry.history("cluster:pricing/c1")
    assert [(e.actor, e.action, e.outcome) for e in entries] == [
        ("alice", "cluster_scale", "failed"),
        ("bob", "cluster_destroy", "refused"),
        ("alice", "cluster_create", "ok"),
    ]
    assert entries[0].message == "ZeroDivisionError: division by zero"
    assert entries[1].message == "bob is not a member of team pricing"
    assert entries[2].detail == {"workers": 1, "terraform": "2 to add"}


def test_members_map_users_to_teams(registry: Registry) -> None:
    for team in ("pricing", "maps"):
        registry.ensure_team(team)
    registry.add_member("pricing", "alice")
    registry.add_member("maps", "alice")
    registry.add_member("maps", "bob")
    registry.add_member("maps", "bob")  # twice is once
    assert registry.teams_of("alice") == {"pricing", "maps"}
    assert registry.teams_of("carol") == set()
    assert registry.members("maps") == ["alice", "bob"]
    with pytest.raises(IntegrityError):
        registry.ensure_team("Not A Slug")


def test_clusters_and_daggers_round_trip_and_keep_their_references(registry: Registry) -> None:
    registry.ensure_team("pricing")
    cluster = ClusterRecord(
        team="pricing",
        name="c1",
        environment="local",
        masters=1,
        workers=2,
        worker_cores=1,
        worker_memory="1g",
        state="provisioning",
        terraform_state="/state/clusters/pricing/c1",
    )
    registry.put_cluster(cluster)
    registry.set_cluster_state("pricing", "c1", "ready", addresses={"rest": "http://127.0.0.1:6066"})
    got = registry.cluster("pricing", "c1")
    assert got is not None and got.state == "ready" and got.addresses == {"rest": "http://127.0.0.1:6066"}
    assert [c.qualified_name for c in registry.clusters(states=["ready"])] == ["pricing/c1"]

    dagger = DaggerRecord(
        team="pricing",
        name="surge",
        spec={"name": "surge", "team": "pricing"},
        spec_version=1,
        checkpoint="/state/daggers/pricing/surge/checkpoint",
        state="deploying",
        cluster="c1",
        schema_versions={"booking-log": 1},
    )
    registry.put_dagger(dagger)
    registry.set_dagger_state("pricing", "surge", "running", submission_id="driver-1")
    running = registry.daggers(cluster="c1", states=["running"])
    assert [(d.name, d.submission_id, d.schema_versions) for d in running] == [
        ("surge", "driver-1", {"booking-log": 1})
    ]
    registry.put_dagger(dagger.model_copy(update={"spec_version": 2, "state": "deploying"}))  # an update
    assert registry.dagger("pricing", "surge").spec_version == 2  # type: ignore[union-attr]
    with pytest.raises(IntegrityError):  # a dagger on a cluster the registry does not know
        registry.put_dagger(dagger.model_copy(update={"name": "other", "cluster": "nowhere"}))


def test_schema_versions_count_up_per_stream_and_repeat_for_a_known_fingerprint(registry: Registry) -> None:
    registry.put_stream(
        StreamRecord(
            name="booking-log",
            kafka_cluster="local",
            bootstrap_servers="127.0.0.1:9092",
            topics=["booking-log"],
            proto="daggers.events.BookingLog",
            schema_version=1,
        )
    )
    assert registry.add_schema_version("booking-log", "a" * 64, "daggers.events.BookingLog", "ZGF0YQ==") == 1
    assert registry.add_schema_version("booking-log", "b" * 64, "daggers.events.BookingLog", "ZGF0YQ==") == 2
    assert registry.add_schema_version("booking-log", "a" * 64, "daggers.events.BookingLog", "ZGF0YQ==") == 1
    assert [v.version for v in registry.schema_versions("booking-log")] == [1, 2]
