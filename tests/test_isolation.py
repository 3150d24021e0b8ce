"""Tenant isolation: each attack is a real request through an entry point a team member has (the lifecycle the CLIs
and the DAGs' tasks call, the CLIs themselves), on the real registry, catalog and team cluster. Every one is refused
before anything is touched, names the field and what is allowed, and is in the registry's history."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from sqlalchemy import make_url

from jobs.engine.checkpoint import Identity, differences
from jobs.lifecycle.daggers import Daggers, Deployment
from jobs.lifecycle.placement import confine
from jobs.lifecycle.request import request_from_params
from jobs.spec import SpecError, load_spec, parse_spec
from odin.models import MAX_SPEC_BYTES
from odin.paths import BIN_DIR, REPO
from odin.registry import Refused
from odin.registry.records import DaggerRecord
from odin.teams.actor import login
from tests.support.catalog import CATALOG
from tests.support.services import Services, TeamCluster
from tests.support.specs import catalog_spec

Attack = Callable[[dict[str, Any], str, str, Services, Path], None]


def _sink(sink: dict[str, Any]) -> Attack:
    def attack(spec: dict[str, Any], team: str, other: str, services: Services, state: Path) -> None:
        spec["sink"] = {k: v.format(team=team, other=other) if isinstance(v, str) else v for k, v in sink.items()}

    return attack


def _stream(**fields: Any) -> Attack:
    def attack(spec: dict[str, Any], team: str, other: str, services: Services, state: Path) -> None:
        spec["streams"][0] |= fields

    return attack


def _kafka(**fields: Any) -> Attack:
    def attack(spec: dict[str, Any], team: str, other: str, services: Services, state: Path) -> None:
        spec["streams"][0]["kafka"] |= fields

    return attack


def _registry_members(spec: dict[str, Any], team: str, other: str, services: Services, state: Path) -> None:
    url = make_url(services.registry_url).set(drivername="postgresql")
    spec["sink"] = {"type": "postgres", "dsn": url.render_as_string(hide_password=False), "table": "members"}


def _their_checkpoint(spec: dict[str, Any], team: str, other: str, services: Services, state: Path) -> None:
    spec["checkpoint_dir"] = str(state / "daggers" / other / "surge" / "checkpoint")


def _raw_topics(spec: dict[str, Any], team: str, other: str, services: Services, state: Path) -> None:
    spec["streams"][0] = {
        "table": "data_stream",
        "topics": ["RIDE-booking-log"],
        "proto": "daggers.events.BookingLog",
        "kafka": {"bootstrap_servers": services.kafka_bootstrap},
    }


def _top(**fields: Any) -> Attack:
    def attack(spec: dict[str, Any], team: str, other: str, services: Services, state: Path) -> None:
        spec |= fields

    return attack


# what a team member tries -> what the refusal must say (the field, and what is allowed)
ATTACKS: dict[str, tuple[Attack, str]] = {
    "postgres sink into the registry's members table": (_registry_members, r"sink\.dsn: the platform connects"),
    "postgres sink into another team's database": (
        _sink({"type": "postgres", "target": "{other}", "table": "t"}),
        r"sink\.target: .*writes to its own database only",
    ),
    "log sink to a file of its choosing": (
        _sink({"type": "log", "path": "/tmp/daggers-isolation.jsonl"}),
        r"sink\.path: .*driver's log; leave it out",
    ),
    "another team's checkpoint": (_their_checkpoint, r"checkpoint_dir: the platform places a dagger's checkpoint"),
    "dead-letter topic on a catalog stream": (
        _stream(dlq_topic="RIDE-booking-log"),
        r"streams\.0\.dlq_topic: the platform places the dead-letter topic \(<team>\.<name>\.<topic>\.dlq\)",
    ),
    "telemetry to an address of its choosing": (
        _top(telemetry_url="http://127.0.0.1:9/write"),
        r"telemetry_url: the platform sends a deployed dagger's metrics",
    ),
    "extra schema files": (_top(schemas=["/etc/hostname"]), r"schemas: a deployed dagger decodes its catalog streams'"),
    "raw topics and brokers instead of a catalog stream": (
        _raw_topics,
        r"streams\.0\.stream: required: a deployed dagger reads streams of the platform's catalog only",
    ),
    "a catalog stream read from another broker": (
        _kafka(bootstrap_servers="127.0.0.1:9"),
        r"streams\.0\.kafka\.bootstrap_servers: the catalog says where",
    ),
    "brokers through librdkafka settings": (
        _kafka(config={"bootstrap.servers": "127.0.0.1:9", "security.protocol": "plaintext"}),
        r"streams\.0\.kafka\.config: bootstrap\.servers, security\.protocol may not be set on the platform",
    ),
    "another team's consumer group": (
        lambda spec, team, other, services, state: spec["streams"][0]["kafka"].update(consumer_group=f"{other}.x"),
        r"streams\.0\.kafka\.consumer_group: .*not under team",
    ),
    "kafka sink into a catalog data stream": (
        _sink({"type": "kafka", "topic": "RIDE-booking-log"}),
        r"sink\.topic: 'RIDE-booking-log': a team writes to topics under its prefix",
    ),
    "kafka sink under another team's prefix": (
        _sink({"type": "kafka", "topic": "{other}.surge"}),
        r"sink\.topic: .*under its prefix '\w+\.' only",
    ),
    "kafka sink to brokers of its choosing": (
        _sink({"type": "kafka", "topic": "{team}.surge", "bootstrap_servers": "127.0.0.1:9"}),
        r"sink\.bootstrap_servers: the platform says where its clusters are",
    ),
    "kafka sink on a cluster that takes no outputs": (
        _sink({"type": "kafka", "topic": "{team}.surge", "cluster": "perfstream"}),
        r"sink\.cluster: 'perfstream' takes no teams' outputs; one of mainstream",
    ),
    "another team's measurement": (
        _sink({"type": "influx", "measurement": "{other}_surge"}),
        r"sink\.measurement: .*not under team",
    ),
    "another team's tag": (
        _sink({"type": "influx", "measurement": "{team}_surge", "tags": {"team": "someone-else"}}),
        r"sink\.tags: the platform sets them",
    ),
    "a time-series DB of its choosing": (
        _sink({"type": "influx", "measurement": "{team}_surge", "url": "http://127.0.0.1:9"}),
        r"sink\.url: a deployed dagger writes to the platform's time-series DB",
    ),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_deploy_request_cannot_choose_what_the_platform_decides(
    attack: str, services: Services, team_cluster: TeamCluster
) -> None:
    registry, team, state = team_cluster.registry, team_cluster.team, team_cluster.state_dir
    other = f"o{uuid.uuid4().hex[:8]}"
    name = f"attack-{uuid.uuid4().hex[:8]}"
    change, says = ATTACKS[attack]
    spec = copy.deepcopy(catalog_spec(team, f"{team}_m", services)) | {"name": name}
    change(spec, team, other, services, state)
    members_before = registry.members("platform")
    with pytest.raises(Refused, match=says):
        Daggers(registry, state).deploy(parse_spec(spec), team_cluster.cluster, team_cluster.member)
    assert registry.dagger(team, name) is None
    assert not (state / "daggers" / team / name).exists()  # no checkpoint, no status file, nothing placed
    [entry] = registry.history(f"dagger:{team}/{name}")
    assert (entry.actor, entry.action, entry.outcome) == (team_cluster.member, "dagger_deploy", "refused")
    assert registry.members("platform") == members_before


def test_a_refused_database_request_provisions_nothing(services: Services, team_cluster: TeamCluster) -> None:
    """The team's database is made on first use, and only for a request that passed the check."""
    team = team_cluster.team
    made: list[str] = []
    places = dataclasses.replace(
        Daggers(team_cluster.registry, team_cluster.state_dir).places(), provision_database=made.append
    )
    attack = copy.deepcopy(catalog_spec(team, f"{team}_m", services))
    _registry_members(attack, team, "other", services, team_cluster.state_dir)
    with pytest.raises(SpecError, match=r"sink\.dsn: the platform connects"):
        confine(parse_spec(attack), places)
    assert made == []
    asked = catalog_spec(team, f"{team}_m", services) | {"sink": {"type": "postgres", "table": "t"}}
    assert confine(parse_spec(asked), places).sink.dsn == places.database(team).dsn  # type: ignore[union-attr]
    assert made == [team]


def test_every_problem_of_a_request_is_named_at_once(services: Services, team_cluster: TeamCluster) -> None:
    spec = catalog_spec(team_cluster.team, "elsewhere", services) | {"telemetry_url": "http://127.0.0.1:9"}
    with pytest.raises(Refused) as refused:
        Daggers(team_cluster.registry, team_cluster.state_dir).check(
            parse_spec(spec), team_cluster.cluster, team_cluster.member
        )
    assert str(refused.value).splitlines() == [
        "telemetry_url: the platform sends a deployed dagger's metrics to its time-series DB; leave it out",
        f"sink.measurement: 'elsewhere' is not under team {team_cluster.team}'s prefix '{team_cluster.team}_'; "
        f"name it {team_cluster.team}_<something>",
    ]


def test_what_the_platform_places_passes_its_own_check_again(services: Services, team_cluster: TeamCluster) -> None:
    """A restart, a move or a health action re-checks a recorded dagger: the placed spec is a fixed point."""
    team = team_cluster.team
    daggers = Daggers(team_cluster.registry, team_cluster.state_dir)
    placed = daggers.check(
        parse_spec(catalog_spec(team, f"{team}_m", services)), team_cluster.cluster, team_cluster.member
    )
    again = daggers.check(placed.spec, team_cluster.cluster, team_cluster.member)
    assert again.spec == placed.spec
    spec = placed.spec
    assert spec.checkpoint_dir == team_cluster.state_dir / "daggers" / team / "surge" / "checkpoint"
    assert [s.dead_letter_topic for s in spec.streams] == [f"{team}.surge.{spec.streams[0].topics[0]}.dlq"]
    assert spec.telemetry_url == services.victoria_metrics_url
    assert spec.sink.type == "influx" and spec.sink.tags == {"team": team}  # type: ignore[union-attr]
    assert spec.streams[0].stream == CATALOG and spec.streams[0].topics


def test_a_checkpoint_is_one_daggers() -> None:
    made = Identity(dagger="pricing.surge", streams=[], state=[], state_store="memory", spec_version="x")
    wanted = made.model_copy(update={"dagger": "rivals.surge", "written_at": datetime.now(UTC)})
    assert differences(made, wanted) == ["it is dagger pricing.surge's, not rivals.surge's"]


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN_DIR / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=120)


def test_the_clis_act_as_the_login_and_only_platform_engineers_administer(
    team_cluster: TeamCluster, ordinary_login: str
) -> None:
    """`--user` is for platform engineers only; team and cluster administration too (the login is not one here)."""
    registry, team, state = team_cluster.registry, team_cluster.team, str(team_cluster.state_dir)
    me = login()
    assert me not in registry.members("platform")
    impersonating = _cli("dagger", "stop", team, "surge", "--user", team_cluster.member, "--state-dir", state)
    assert impersonating.returncode == 1
    assert f"--user {team_cluster.member}: only platform engineers may act for another user; you are {me}" in (
        impersonating.stderr
    )
    promoted = _cli("odin", "team", "add", "platform", "--member", me, "--state-dir", state)
    assert promoted.returncode == 2 and f"{me} is not a platform engineer" in promoted.stderr
    assert me not in registry.members("platform")
    for argv in (("create", team, "extra"), ("scale", team, team_cluster.cluster, "--workers", "2"),
                 ("destroy", team, team_cluster.cluster)):  # fmt: skip
        done = _cli("odin", "cluster", *argv, "--state-dir", state)
        assert done.returncode == 2 and f"{me} is not a platform engineer" in done.stderr, done.stderr
    assert registry.cluster(team, team_cluster.cluster).state == "ready"  # type: ignore[union-attr]
    refusals = {(e.actor, e.action, e.outcome) for e in registry.history(limit=500) if e.actor == me}
    assert {("team_add", "refused"), ("cluster_destroy", "refused"), ("dagger_stop", "refused")} <= {
        (a, o) for _, a, o in refusals
    }


def test_two_deploys_of_one_dagger_at_once_leave_one_running_and_the_spec_off_the_command_line(
    services: Services, team_cluster: TeamCluster
) -> None:
    """Both pass their checks; the per-dagger lock lets one submit, the other is refused. The driver gets its spec
    as a file of the dagger's own (`ps` shows every command line), and its UI has no kill links."""
    registry, team, state = team_cluster.registry, team_cluster.team, team_cluster.state_dir
    name = f"twice-{uuid.uuid4().hex[:6]}"
    spec = parse_spec(catalog_spec(team, f"{team}_twice", services) | {"name": name})
    plans = [Daggers(registry, state).check(spec, team_cluster.cluster, team_cluster.member) for _ in range(2)]
    start = threading.Barrier(2)
    outcomes: list[Any] = [None, None]

    def submit(i: int) -> None:
        daggers = Daggers(registry, state)
        start.wait(30)
        try:
            outcomes[i] = daggers.submit(plans[i], team_cluster.cluster, team_cluster.member)
        except Refused as e:
            outcomes[i] = e

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    daggers = Daggers(registry, state)
    [deployment] = [o for o in outcomes if isinstance(o, Deployment)]
    [refused] = [o for o in outcomes if isinstance(o, Refused)]
    try:
        assert re.search(rf"dagger:{team}/{name} is being changed by another request|is deploying", str(refused))
        record = registry.dagger(team, name)
        assert record is not None and record.submission_id == deployment.submission_id
        assert daggers.wait_started(deployment).ok
        lines = [p.info["cmdline"] or [] for p in psutil.process_iter(["cmdline"])]
        driver = [line for line in lines if deployment.run in line]
        assert driver and all(spec.sql not in " ".join(line) and "--spec" not in line for line in driver)
        assert any("--spec-file" in line for line in driver)
        assert any("-Dspark.ui.killEnabled=false" in line for line in driver)  # the driver's JVM
        spec_file = Path(driver[0][driver[0].index("--spec-file") + 1])
        assert spec_file.is_relative_to(state / "daggers" / team / name) and spec_file.stat().st_mode & 0o077 == 0
    finally:
        daggers.stop(team, name, team_cluster.member)
    submits = [e.outcome for e in registry.history(f"dagger:{team}/{name}") if e.action == "dagger_submit"]
    assert sorted(submits) == ["ok", "refused"]


def test_a_team_sees_its_own_daggers_only(team_cluster: TeamCluster, ordinary_login: str) -> None:
    registry, state = team_cluster.registry, str(team_cluster.state_dir)
    mine, theirs = f"m{uuid.uuid4().hex[:8]}", f"o{uuid.uuid4().hex[:8]}"
    for team in (mine, theirs):
        registry.ensure_team(team)
        registry.put_dagger(
            DaggerRecord(team=team, name="surge", spec={"sql": f"SELECT secret_of_{team}"}, spec_version=1,
                         checkpoint=f"/nonexistent/{team}", state="stopped")
        )  # fmt: skip
    registry.add_member(mine, login())
    listed = _cli("dagger", "list", "--json", "--state-dir", state)
    assert listed.returncode == 0, listed.stderr
    shown = {row["team"] for row in json.loads(listed.stdout)}
    # the login's teams only: other tests of the session make it a member of the session's team too
    assert mine in shown and theirs not in shown, listed.stdout
    assert shown <= registry.teams_of(login()), listed.stdout
    refused = _cli("dagger", "list", "--team", theirs, "--state-dir", state)
    assert refused.returncode == 1 and f"{login()} is not a member of team {theirs}" in refused.stderr
    healing = _cli("dagger", "status", "--heal", "--state-dir", state)
    assert healing.returncode == 1 and f"{login()} is not a platform engineer" in healing.stderr


def test_oversized_requests_are_refused_before_they_are_read(tmp_path: Path) -> None:
    huge = {"team": "pricing", "name": "surge", "cluster": "main", "sql": "SELECT 1 -- " + "x" * MAX_SPEC_BYTES}
    with pytest.raises(SpecError, match=r"^params: [\d,]+ bytes; a spec may have at most 262,144$"):
        request_from_params(huge)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(huge))
    with pytest.raises(SpecError, match=r"spec\.yaml: [\d,]+ bytes; a spec may have at most 262,144$"):
        load_spec(path)


def test_a_driver_whose_spec_file_is_gone_exits_0_so_its_master_does_not_relaunch_it(tmp_path: Path) -> None:
    driver = [sys.executable, str(REPO / "jobs" / "engine" / "driver.py"), "--spec-file", str(tmp_path / "gone.json")]
    done = subprocess.run([*driver, "--state-dir", str(tmp_path), "--run", "r1"], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0 and "superseded, not starting" in done.stderr, done.stderr
