"""A team's secrets: kept for Odin's user alone, named by the specs that need them, never half-written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from jobs.engine.plan import plan_dagger
from jobs.engine.runner import preview
from jobs.lifecycle.placement import missing
from jobs.spec import parse_spec
from odin.teams.secrets import TeamSecrets
from tests.support.services import Services

SPEC = {
    "name": "surge",
    "team": "pricing",
    "streams": [{"table": "data_stream", "topics": ["t"], "proto": "daggers.events.BookingLog"}],
    "sql": "SELECT count(1) AS n, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp FROM data_stream "
    "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)",
    "sink": {"type": "postgres", "table": "surge", "password_env": "PG_PASSWORD"},
}


def test_values_are_private_and_replaced_whole(tmp_path: Path) -> None:
    secrets = TeamSecrets(tmp_path)
    secrets.set("pricing", "PG_PASSWORD", "one")
    secrets.set("pricing", "KAFKA_PASSWORD", "two")
    secrets.set("pricing", "PG_PASSWORD", "three")
    assert secrets.load("pricing") == {"PG_PASSWORD": "three", "KAFKA_PASSWORD": "two"}
    assert secrets.path("pricing").stat().st_mode & 0o777 == 0o600
    assert secrets.path("pricing").parent.stat().st_mode & 0o777 == 0o700
    assert [p.name for p in secrets.path("pricing").parent.iterdir()] == ["secrets.json"]  # no temporary left
    assert secrets.unset("pricing", "KAFKA_PASSWORD") and not secrets.unset("pricing", "KAFKA_PASSWORD")
    assert secrets.names("pricing") == ["PG_PASSWORD"] and secrets.load("supply") == {}


@pytest.mark.parametrize(
    ("name", "value", "says"), [("pg-password", "x", "environment variable name"), ("PG", "", "empty")]
)
def test_bad_names_and_empty_values_are_refused(tmp_path: Path, name: str, value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        TeamSecrets(tmp_path).set("pricing", name, value)


def test_a_spec_says_which_secret_its_team_lacks_and_how_to_add_it(tmp_path: Path) -> None:
    secrets, spec = TeamSecrets(tmp_path), parse_spec(SPEC)
    assert missing(spec, secrets) == [
        "sink.password_env: PG_PASSWORD is not a secret of team pricing: "
        "add it with `odin secret set pricing PG_PASSWORD`"
    ]
    secrets.set("pricing", "PG_PASSWORD", "x")
    assert missing(spec, secrets) == []


def sasl_stream(bootstrap: str) -> dict[str, Any]:
    sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "pricing"}
    kafka = {"bootstrap_servers": bootstrap, "password_env": "KAFKA_PASSWORD", "config": sasl}
    return SPEC["streams"][0] | {"kafka": kafka}


def test_a_streams_kafka_password_is_a_secret_its_team_needs(tmp_path: Path) -> None:
    spec = parse_spec(SPEC | {"streams": [sasl_stream("127.0.0.1:9092")]})
    assert missing(spec, TeamSecrets(tmp_path))[0].startswith("streams.0.kafka.password_env: KAFKA_PASSWORD is not")


def test_the_sources_spark_processes_read_the_stream_password_from_the_teams_secrets(
    services: Services, spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source runs in Python processes Spark starts, not in the process that planned the dagger. There is no
    SASL broker here (Tansu refuses the handshake): the client getting as far as the handshake, rather than the
    source naming the unset field, shows the password reached those processes from the team's secrets file."""
    monkeypatch.delenv("KAFKA_PASSWORD", raising=False)
    spec = parse_spec(SPEC | {"streams": [sasl_stream(services.kafka_bootstrap)]})
    plan = plan_dagger(spec, tmp_path)
    with pytest.raises(Exception, match=r"kafka\.password_env: KAFKA_PASSWORD is not set"):
        preview(plan, spark)
    TeamSecrets(tmp_path).set("pricing", "KAFKA_PASSWORD", "s3cret")
    with pytest.raises(Exception, match="Broker transport failure") as refused:
        preview(plan, spark)
    assert "password_env" not in str(refused.value)
