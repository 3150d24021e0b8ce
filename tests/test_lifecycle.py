"""A dagger's life on its team's cluster (jobs/lifecycle/daggers.py): deployed in cluster mode through the REST API,
exact in
its sink, updated on its checkpoint, stopped; other teams refused before anything is touched."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import psycopg
import pytest

from jobs.engine import plan as planner
from jobs.engine.plan import DaggerPlan, plan_dagger
from jobs.engine.session import ARROW_ALLOCATOR, DAGGER_JVM
from jobs.engine.status import owner, read_status, status_path
from jobs.lifecycle.daggers import Daggers
from jobs.lifecycle.submission import SparkRest
from jobs.spec import parse_spec
from odin.apis import http_client, victoria
from odin.cluster.lifecycle import Clusters
from odin.cluster.secret import rest_token, secret_file
from odin.cluster.spec import ClusterSpec
from odin.paths import BIN_DIR
from odin.registry import Refused, Registry
from odin.teams.actor import login
from odin.teams.databases import team_database
from odin.teams.secrets import TeamSecrets
from odin.traffic.generator import booking_logs, produce
from tests.support.catalog import CATALOG, START, catalog_events, catalog_stream, produce_to_stream
from tests.support.events import surge_truth
from tests.support.kafka import consume_all, latest_by_key, new_topic
from tests.support.seeds import SURGE_SQL
from tests.support.services import Services, TeamCluster
from tests.support.sinks import sink_reaches
from tests.support.specs import catalog_spec, deployable, surge_spec
from tests.support.waiting import wait_for


def _dagger_jvms(run: str) -> list[psutil.Process]:
    """A deployed dagger's driver JVM (whose arguments carry the run id, as its Python process's do) and its
    executors (which name the driver's RPC port)."""
    [jvm] = [
        p
        for p in psutil.process_iter(["cmdline"])
        if {run, "org.apache.spark.deploy.worker.DriverWrapper"} <= set(p.info["cmdline"] or [])
    ]
    ports = {f":{c.laddr.port}" for c in jvm.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    executors = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in (p.info["cmdline"] or [])
        and any(a.startswith("spark://CoarseGrainedScheduler@") and a.endswith(tuple(ports)) for a in p.info["cmdline"])
    ]
    return [jvm, *executors]


@pytest.mark.usefixtures("leftovers_stopped")
def test_a_catalog_dagger_is_deployed_updated_and_stopped_on_its_teams_cluster(
    services: Services, team_cluster: TeamCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, team = team_cluster.registry, team_cluster.team
    daggers = Daggers(registry, team_cluster.state_dir)
    measurement = f"{team}_surge_{uuid.uuid4().hex[:8]}"
    first = list(booking_logs(3_000, seed=21, start=START, rate=10))  # 5 minutes
    produce_to_stream(services, registry, first, START + timedelta(minutes=8))

    plans: list[DaggerPlan] = []
    monkeypatch.setattr(planner, "plan_dagger", lambda *a, **k: plans.append(plan_dagger(*a, **k)) or plans[-1])
    record = daggers.deploy(parse_spec(catalog_spec(team, measurement, services)), "main", "alice")
    assert len(plans) == 1  # checked, placed and planned once; the driver verifies that plan's fingerprint
    monkeypatch.undo()
    locked = registry.stream(CATALOG).schema_version  # type: ignore[union-attr]
    assert (record.state, record.cluster, record.schema_versions) == ("running", "main", {CATALOG: locked})
    # what the team asked is recorded (a restart places it again); the platform placed its output and checkpoint
    assert record.spec["streams"][0]["stream"] == CATALOG and not record.spec["streams"][0]["topics"]
    assert record.checkpoint == str(team_cluster.state_dir / "daggers" / team / "surge" / "checkpoint")
    everything = catalog_events(services, registry)
    assert sink_reaches(measurement, services, surge_truth(everything)) == surge_truth(everything)
    series = victoria.export(services.victoria_metrics_url, f"{measurement}_num_of_bookings")
    assert series and {s["metric"].get("team") for s in series} == {team}  # the platform's tag, on every point
    # `dagger output` reads the same points back: a row per window and tag set, a column per field
    out = daggers.output(team, "surge", "alice", 1000)
    rows = [dict(zip(out.columns, row, strict=True)) for row in out.rows]
    shown = {
        (int(r["tag_city_id"]), r["tag_s2id"], r["tag_vehicle_type"], r["time"]): r["num_of_bookings"] for r in rows
    }
    truth = surge_truth(everything)
    assert len(shown) == len(rows) == min(1000, len(truth)) and all(truth[k] == n for k, n in shown.items())
    # Every window the sink has is closed: the status's watermark (what `make demo` checks against) passes its end.
    # The driver writes the status after the batch that wrote the sink (it polls its query's progress every 0.5 s).
    last_end = max(datetime.fromisoformat(end) for *_, end in truth)
    status = wait_for(
        lambda: read_status(status_path(Path(record.checkpoint))),
        30,
        f"the status's watermark to pass {last_end}",
        done=lambda s: s is not None and s.watermark is not None and s.watermark >= last_end,
    )
    assert status is not None
    # Its JVMs compile with C1 only (a relaunch's start is what the JIT would slow) and keep a small serial-collected
    # heap, on their own command lines (the suite's JDK_JAVA_OPTIONS says C1 to every JVM, but through the environment).
    jvms = _dagger_jvms(status.run)
    commands = [jvm.cmdline() for jvm in jvms]
    assert len(jvms) == 2 and all(set(DAGGER_JVM.split()) <= set(c) for c in commands), commands  # driver, executor
    # Its Python processes (the driver, its planners, the executors' workers) take Arrow's memory from the system
    # allocator: they start with the platform's ARROW_ALLOCATOR, whatever the worker's own environment says.
    pythons = [p for jvm in jvms for p in jvm.children(recursive=True) if "python" in p.name()]
    assert any(status.run in p.cmdline() for p in pythons) and len(pythons) >= 3, [p.cmdline() for p in pythons]
    assert all(ARROW_ALLOCATOR.items() <= p.environ().items() for p in pythons), [p.cmdline() for p in pythons]

    # A state-incompatible query (other grouping keys) is refused; the dagger keeps running.
    regrouped = SURGE_SQL.replace("vehicle_type AS tag_vehicle_type,", "").replace(",\n       vehicle_type", "")
    with pytest.raises(Refused, match=r"cannot resume .* checkpoint: the query keeps other state.*reset_state: true"):
        daggers.update(parse_spec(catalog_spec(team, measurement, services, regrouped)), "alice")
    assert registry.dagger(team, "surge").state == "running"  # type: ignore[union-attr]

    # A compatible change (a narrower WHERE) resumes the checkpoint: nothing read twice, nothing lost.
    narrower = SURGE_SQL.replace("WHERE status='COMPLETED'", "WHERE status='COMPLETED' AND vehicle_type <> 'BIKE'")
    updated = daggers.update(parse_spec(catalog_spec(team, measurement, services, narrower)), "alice")
    assert (updated.state, updated.spec_version) == ("running", 2) and updated.submission_id != record.submission_id
    second = list(booking_logs(3_000, seed=22, start=START + timedelta(minutes=10), rate=10))
    produce_to_stream(services, registry, second, START + timedelta(minutes=18))
    expected = surge_truth(everything) + Counter({k: n for k, n in surge_truth(second).items() if k[2] != "BIKE"})
    assert sink_reaches(measurement, services, expected) == expected
    [row] = [r for r in daggers.list([team]) if r.name == "surge"]
    assert (row.state, row.cluster, row.lag) == ("running", "main", 0)

    stopped = daggers.stop(team, "surge", "alice")
    assert stopped.state == "stopped"
    rest = SparkRest(
        registry.cluster(team, "main").addresses["rest_urls"],  # type: ignore[union-attr]
        lambda: rest_token(secret_file(team_cluster.state_dir, team, "main"), "alice"),
    )
    assert rest.status(updated.submission_id).state == "KILLED"  # type: ignore[arg-type]
    # Nothing of the driver outlives it: its Python process carries the deployment's run id on its command line.
    status = read_status(status_path(Path(stopped.checkpoint)))
    assert status is not None and status.batches > 0
    # The master reports KILLED when the driver's JVM is gone; stop returns once its Python process is gone too.
    assert not [p for p in psutil.process_iter(["cmdline"]) if status.run in (p.info["cmdline"] or [])]
    stop = next(e for e in registry.history(f"dagger:{team}/surge") if e.action == "dagger_stop")  # newest first
    assert stop.detail["processes"] == "gone" or stop.detail["processes"].startswith("killed:"), stop.detail
    submits = [
        e.detail.get("spec_version") for e in registry.history(f"dagger:{team}/surge") if e.action == "dagger_submit"
    ]
    assert submits == [2, 1]  # newest first: each submission says which version of the spec it ran
    actions = [(e.action, e.outcome) for e in reversed(registry.history(f"dagger:{team}/surge"))]
    assert actions == [
        ("dagger_submit", "ok"),
        ("dagger_deploy", "ok"),
        ("dagger_update", "refused"),
        ("dagger_stop", "ok"),
        ("dagger_update", "ok"),
        ("dagger_submit", "ok"),
        ("dagger_deploy", "ok"),
        ("dagger_stop", "ok"),
    ]


def test_other_teams_are_refused_before_anything_is_touched(services: Services, team_cluster: TeamCluster) -> None:
    registry, team = team_cluster.registry, team_cluster.team
    other = f"o{uuid.uuid4().hex[:8]}"
    registry.ensure_team(other)
    registry.add_member(other, "bob")
    daggers = Daggers(registry, team_cluster.state_dir)
    theirs = parse_spec(catalog_spec(other, f"{other}_m", services) | {"name": "intruder"})
    with pytest.raises(Refused, match=rf"team {other} has no cluster 'main': a team deploys to its own clusters"):
        daggers.deploy(theirs, "main", "bob")
    ours = parse_spec(catalog_spec(team, f"{team}_m", services) | {"name": "intruder"})
    with pytest.raises(Refused, match=rf"bob is not a member of team {team}"):
        daggers.deploy(ours, "main", "bob")
    with pytest.raises(Refused, match=rf"bob is not a member of team {team}"):
        daggers.stop(team, "surge", "bob")
    with pytest.raises(Refused, match=rf"bob is not a member of team {team}"):
        daggers.output(team, "surge", "bob", 10)  # another team's results are theirs
    assert ("bob", "dagger_output", "refused") in {
        (e.actor, e.action, e.outcome) for e in registry.history(f"dagger:{team}/surge")
    }
    fields = catalog_spec(team, f"{team}_m", services) | {"name": "intruder"}
    fields["streams"][0]["stream"] = "no-such-stream"
    unknown = parse_spec(fields)
    with pytest.raises(Refused, match=r"streams\.0\.stream: no stream 'no-such-stream' in the catalog"):
        daggers.deploy(unknown, "main", "alice")
    assert registry.dagger(other, "intruder") is None and registry.dagger(team, "intruder") is None
    assert {e.outcome for e in registry.history(f"dagger:{team}/intruder")} == {"refused"}


def test_a_dagger_the_cluster_has_no_room_for_is_refused_at_once_saying_what_to_do(
    services: Services, own_team: tuple[Registry, Clusters, str]
) -> None:
    """A driver the master cannot place waits unlaunched until the deploy gives up (4 minutes, then "no progress");
    a deploy is refused instead, before anything is submitted, with the cluster's free cores and what to do."""
    registry, clusters, team = own_team
    clusters.create(ClusterSpec(team=team, name="tiny", workers=1, worker_cores=1, worker_memory="1g"), "alice")
    spec = parse_spec(catalog_spec(team, f"{team}_m", services))
    began = time.monotonic()
    with pytest.raises(Refused, match=rf"cluster {team}/tiny has no room for dagger surge: .* 1 of 1 cores") as refused:
        Daggers(registry, services.stack.state_dir).deploy(spec, "tiny", "alice")  # type: ignore[union-attr]
    assert time.monotonic() - began < 60 and f"odin cluster scale {team} tiny --workers N" in str(refused.value)
    assert registry.dagger(team, "surge") is None  # nothing recorded as deployed, nothing submitted
    assert ("dagger_submit", "refused") in {(e.action, e.outcome) for e in registry.history(f"dagger:{team}/surge")}


def test_the_dagger_cli_lists_and_refuses_with_the_reason(team_cluster: TeamCluster) -> None:
    state, team = str(team_cluster.state_dir), team_cluster.team
    team_cluster.registry.add_member(team, login())  # the CLI acts as its login
    listed = subprocess.run(
        [str(BIN_DIR / "dagger"), "list", "--team", team, "--state-dir", state], capture_output=True, text=True
    )
    assert listed.returncode == 0 and "dagger(s)" in listed.stdout, listed.stdout + listed.stderr
    refused = subprocess.run(
        [str(BIN_DIR / "dagger"), "stop", team, "nothing", "--state-dir", state],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 1
    assert f"refused: team {team} has no dagger 'nothing'" in refused.stderr


@pytest.mark.usefixtures("leftovers_stopped")
def test_a_teams_daggers_write_to_its_own_database_and_topics_with_the_platforms_credentials(
    services: Services, team_cluster: TeamCluster
) -> None:
    """The specs name a table and a topic, nothing else: the platform resolves the team's own database (its role and
    password, a team secret that `odin secret set` rotates) and its topic prefix on the catalog's output cluster. The
    password reaches the driver from the team's secrets, never through Spark's submission or a command line."""
    registry, team, state = team_cluster.registry, team_cluster.team, team_cluster.state_dir
    daggers = Daggers(registry, state)
    table, topic = f"surge_pg_{uuid.uuid4().hex[:8]}", f"{team}.surge-{uuid.uuid4().hex[:6]}"
    database = team_database(team, state)  # made with the team (odin team add) or on first use
    registry.add_member(team, login())  # who runs the CLI
    rotated = f"pw-{uuid.uuid4().hex}"
    cli = [str(BIN_DIR / "odin"), "secret", "set", team, database.password_env, "--state-dir", str(state)]
    done = subprocess.run(cli, input=rotated, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and rotated not in done.stdout + done.stderr, done.stderr
    secrets = TeamSecrets(state).path(team)
    assert secrets.stat().st_mode & 0o777 == 0o600 and secrets.parent.stat().st_mode & 0o777 == 0o700

    later = START + timedelta(minutes=20)  # after the first test's events: the stream's event time goes on
    produce_to_stream(
        services, registry, list(booking_logs(1_000, seed=71, start=later, rate=10)), later + timedelta(minutes=8)
    )
    specs = {
        "surge-pg": {"type": "postgres", "table": table},
        "surge-kafka": {"type": "kafka", "topic": topic},
    }
    try:
        for name, sink in specs.items():
            spec = parse_spec(catalog_spec(team, f"{team}_m", services) | {"name": name, "sink": sink})
            assert daggers.deploy(spec, "main", "alice").state == "running"
        placed = daggers.check(parse_spec(registry.dagger(team, "surge-pg").spec), "main", "alice").spec  # type: ignore[union-attr]
        assert placed.sink.dsn == database.dsn and placed.sink.password_env == database.password_env  # type: ignore[union-attr]
        expected = sum(surge_truth(catalog_events(services, registry)).values())
        deadline, got, sent = time.monotonic() + 120, None, None
        while (got, sent) != (expected, expected) and time.monotonic() < deadline:
            time.sleep(2)
            with psycopg.connect(database.dsn, password=rotated) as conn:  # the rotated password is the role's
                exists = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
                got = conn.execute(f"SELECT sum(num_of_bookings) FROM {table}").fetchone()[0] if exists[0] else None  # type: ignore[index]
            records = latest_by_key(consume_all(services.kafka_bootstrap, topic))
            sent = sum(json.loads(m.value())["num_of_bookings"] for m in records.values())
        assert (got, sent) == (expected, expected)
        # what a member sees with `dagger output`: the newest of the table's rows and of the topic's records
        with psycopg.connect(database.dsn, password=rotated) as conn:
            cur = conn.execute(f"SELECT * FROM {table}")
            columns = [c.name for c in cur.description or []]
            stored = [{c: v.isoformat() if isinstance(v, datetime) else v for c, v in zip(columns, row, strict=True)}
                      for row in cur]  # fmt: skip
        sent_rows = [json.loads(m.value()) for m in consume_all(services.kafka_bootstrap, topic)]
        for name, truth in (("surge-pg", stored), ("surge-kafka", sent_rows)):
            cli = [str(BIN_DIR / "dagger"), "output", team, name, "-n", "50", "--json", "--state-dir", str(state)]
            done = subprocess.run(cli, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
            out = json.loads(done.stdout)
            rows = [dict(zip(out["columns"], row, strict=True)) for row in out["rows"]]
            assert len(rows) == min(50, len(truth)) and all(r in truth for r in rows), (name, rows[:3], truth[:3])
            if name == "surge-pg":  # the table's newest windows, the newest last
                assert out["total"] == len(stored)
                assert rows[-1]["window_timestamp"] == max(r["window_timestamp"] for r in stored)
        lines = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])]
        assert not [line for line in lines if rotated in line]
        masters = [n for n in Clusters(registry, state).nodes(team, "main").values() if n["role"] == "spark_master"]
        for node in masters:  # what any team's member may open: the master's pages and JSON
            for page in ("/", "/json/"):
                assert (
                    rotated
                    not in http_client.get(f"http://{node['host']}:{node['ports']['ui']}{page}", timeout=30).text
                )
    finally:
        for name in specs:
            if registry.dagger(team, name) is not None:
                daggers.stop(team, name, "alice")


@pytest.mark.usefixtures("leftovers_stopped")
def test_a_drained_stop_reads_what_is_left_and_closes_every_window(
    services: Services, team_cluster: TeamCluster
) -> None:
    """`dagger stop --drain`: the deployed driver reads what is left and closes the windows no later event would
    close (as `dagger run --once` does on its checkpoint), then ends by itself; the stop records how it went. Only a
    member of the team may ask it (a drain is a stop)."""
    registry, team = team_cluster.registry, team_cluster.team
    daggers = Daggers(registry, team_cluster.state_dir)
    topic, measurement = new_topic(services), f"{team}_surge_drain_{uuid.uuid4().hex[:6]}"
    start = (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0)
    events = list(booking_logs(900, seed=63, start=start, rate=10))  # 90 s: the second window is still open at its end
    produce(services.kafka_bootstrap, topic, iter(events))
    sink = {"type": "influx", "version": 2, "url": services.victoria_metrics_url, "measurement": measurement}
    fields = deployable(surge_spec(services, topic, sink), catalog_stream(services, registry, topic))
    deployed = daggers.deploy(parse_spec(fields | {"team": team, "name": "drain", "parallelism": 1}), "main", "alice")
    path = status_path(Path(deployed.checkpoint))  # type: ignore[arg-type]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and ((s := read_status(path)) is None or s.events < len(events)):
        time.sleep(1)
    truth = surge_truth(events)
    assert sink_reaches(measurement, services, truth, timeout_s=20) != truth  # no later event closes the last window
    with pytest.raises(Refused, match=rf"bob is not a member of team {team}"):
        daggers.stop(team, "drain", "bob", drain_timeout_s=300)

    stopped = daggers.stop(team, "drain", "alice", drain_timeout_s=300)
    assert stopped.state == "stopped"
    assert sink_reaches(measurement, services, truth, timeout_s=30) == truth
    entry = next(e for e in registry.history(f"dagger:{team}/drain") if e.action == "dagger_stop" and e.outcome == "ok")
    assert entry.detail["drain"] == "drained", entry.detail
    ended = read_status(path)
    assert ended is not None and ended.phase == "stopped" and ended.run == owner(Path(deployed.checkpoint)), ended  # type: ignore[arg-type]
