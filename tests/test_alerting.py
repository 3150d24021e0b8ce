"""Alerting with real parts (odin/alerting): the repo's vmalert rules and the per-team Alertmanager routing pass
their own tools' checks; a stalled query fires its alert through vmalert and Alertmanager to the platform's
receiver and the registry, routed to the dagger's team; the crashlooping page takes the same path; a notification
that does not validate is refused with the field named, and counted."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest
import yaml

from jobs.health.checkup import Checkup, alertmanager_pager
from jobs.health.judge import DaggerHealth, HealthPolicy
from jobs.lifecycle.daggers import Daggers
from jobs.spec import parse_spec
from odin.alerting import routing
from odin.apis import http_client
from odin.cluster.lifecycle import Clusters
from odin.paths import BIN_DIR, REPO
from odin.processes import of_node
from odin.registry import Registry
from odin.registry.records import AlertRecord
from odin.spec import Service
from odin.teams.actor import login
from odin.traffic.generator import booking_logs, produce
from tests.support.catalog import catalog_stream, closing_markers
from tests.support.events import surge_truth
from tests.support.kafka import new_topic
from tests.support.services import Services, TeamCluster
from tests.support.sinks import sink_reaches
from tests.support.specs import deployable, surge_spec

RULES = sorted((REPO / "odin" / "alerting" / "rules").glob("*.yml"))


def _vmalert_dry_run(*rules: Path) -> subprocess.CompletedProcess[str]:
    argv = ["vmalert", "-dryRun", *(f"-rule={r}" for r in rules)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_the_repo_rules_pass_vmalert_dry_run_and_a_broken_rule_is_refused(tmp_path: Path) -> None:
    assert RULES
    ok = _vmalert_dry_run(*RULES)
    assert ok.returncode == 0, ok.stderr[-2000:]
    names = {r["alert"] for f in RULES for g in yaml.safe_load(f.read_text())["groups"] for r in g["rules"]}
    for wanted in ("DaggerStalled", "DaggerLagGrowing", "DaggerThroughputCollapse", "DaggerMalformedSpike"):
        assert wanted in names
    assert {"DaggerLateSpike", "DaggerSinkErrors", "ClusterDegraded", "DaggerCrashlooping"} <= names
    for f in RULES:  # every alert can be routed and says what is wrong
        for group in yaml.safe_load(f.read_text())["groups"]:
            for rule in group["rules"]:
                assert rule["labels"]["severity"] in ("warning", "critical", "page"), rule["alert"]
                assert "team" in rule["expr"] and rule["annotations"]["summary"], rule["alert"]
    broken = tmp_path / "broken.yml"
    broken.write_text("groups:\n  - name: x\n    rules:\n      - alert: A\n        expr: sum(by team\n")
    refused = _vmalert_dry_run(broken)
    assert refused.returncode != 0 and 'invalid expression for rule "x"."A"' in refused.stderr


def _route(config: Path, **labels: str) -> str:
    argv = ["amtool", "config", "routes", "test", f"--config.file={config}", *(f"{k}={v}" for k, v in labels.items())]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_each_team_gets_its_own_receiver_and_amtool_accepts_the_routing(tmp_path: Path) -> None:
    config = tmp_path / "alertmanager.yml"
    assert routing.write(config, ["payments", "rides"], "http://127.0.0.1:9095") is True
    routing.check(config)  # amtool check-config
    assert _route(config, alertname="DaggerStalled", team="rides", dagger="surge") == "team-rides"
    assert _route(config, alertname="DaggerStalled", team="payments") == "team-payments"
    assert _route(config, alertname="DaggerStalled", team="unknown") == "platform"
    assert routing.write(config, ["payments", "rides"], "http://127.0.0.1:9095") is False  # unchanged: no reload
    bad = yaml.safe_load(config.read_text())
    bad["route"]["receiver"] = "nobody"
    config.write_text(yaml.safe_dump(bad))
    with pytest.raises(routing.RoutingError, match='undefined receiver "nobody"'):
        routing.check(config)


@pytest.fixture(scope="module")
def alerting(services: Services) -> Iterator[Services]:
    """vmalert and Alertmanager (with the platform's receiver) converged into the shared stack, stopped after."""
    assert services.stack is not None
    report = services.stack.up(services.stack.resolve(None, {Service.vmalert}, None))
    try:
        assert report.ok, [f.message for f in report.playbook.failures]
        nodes = services.stack.nodes()
        yield Services(nodes, services.stack, report)
    finally:
        services.stack.down(only={Service.vmalert, Service.alertmanager})


def _alerts(registry: Registry, team: str, alertname: str, timeout_s: float) -> list[AlertRecord]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [a for a in registry.alerts(team=team) if a.alertname == alertname]
        if found:
            return found
        time.sleep(2)
    return []


def test_the_crashlooping_page_reaches_the_team_receiver_and_bad_notifications_are_refused(
    alerting: Services,
) -> None:
    registry = Registry.connect(alerting.registry_url)
    team = f"t{uuid.uuid4().hex[:8]}"
    try:
        registry.ensure_team(team)
        assert alerting.stack is not None and alerting.stack.sync_alert_routes() is True
        assert _route(alerting.alertmanager_config, team=team) == f"team-{team}"
        now = datetime.now(UTC)
        looping = DaggerHealth(
            team=team, name="looper", cluster="main", checked_at=now, state="running", verdict="crashlooping"
        )
        alertmanager_pager(alerting.alertmanager_url)(looping.model_copy(update={"reasons": ["its driver ended"]}))
        [page] = _alerts(registry, team, "DaggerCrashlooping", timeout_s=60)
        assert (page.status, page.receiver, page.subject) == ("firing", f"team-{team}", f"dagger:{team}/looper")
        assert page.labels["severity"] == "page" and "its driver ended" in page.annotations["description"]

        junk = {"version": "4", "receiver": "x", "status": "firing", "alerts": [{"status": "burning", "labels": {}}]}
        refused = http_client.post(f"{alerting.alert_receiver_url}/alerts/platform", json=junk, timeout=10)
        assert refused.status_code == 422
        fields = {e["field"] for e in refused.json()["refused"]}
        assert {"body.alerts.0.status", "body.alerts.0.fingerprint"} <= fields, fields
        assert http_client.get(f"{alerting.alert_receiver_url}/health", timeout=10).json()["rejected"] >= 1
    finally:
        registry.close()


def _driver_processes(worker_pid: int, submission_id: str) -> list[psutil.Process]:
    """The driver's JVM (Spark's DriverWrapper, run in the worker's work/<driver id> directory) and its Python."""
    for p in psutil.Process(worker_pid).children(recursive=True):
        try:
            if "DriverWrapper" in " ".join(p.cmdline()) and Path(p.cwd()).name == submission_id:
                return [p, *p.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    raise AssertionError(f"no driver process {submission_id} under worker {worker_pid}")


def _survivors(processes: list[psutil.Process], timeout_s: float) -> list[str]:
    """The driver's Python leaves a moment after its JVM (once it sees the gateway gone): wait for it, bounded; what
    is still running then, with its command line."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = []
        for p in processes:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{p.pid} {p.status()} {' '.join(p.cmdline())[:300]}")
            except psutil.NoSuchProcess:
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)


def test_a_stalled_query_fires_its_alert_through_vmalert_and_alertmanager_into_the_registry(
    alerting: Services, team_cluster: TeamCluster
) -> None:
    registry, team = team_cluster.registry, team_cluster.team
    assert alerting.stack is not None
    alerting.stack.sync_alert_routes()  # the session's team may predate the alerting stack
    daggers = Daggers(registry, team_cluster.state_dir)
    topic, measurement = new_topic(alerting), f"{team}_surge_stall_{uuid.uuid4().hex[:6]}"
    start = (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0)
    events = list(booking_logs(800, seed=61, start=start, rate=10))
    produce(alerting.kafka_bootstrap, topic, iter([*events, *closing_markers(start + timedelta(minutes=5))]))
    sink = {"type": "influx", "version": 2, "url": alerting.victoria_metrics_url, "measurement": measurement}
    fields = deployable(surge_spec(alerting, topic, sink), catalog_stream(alerting, registry, topic))
    fields |= {"team": team, "name": "stall", "parallelism": 1}
    deployed = daggers.deploy(parse_spec(fields), team_cluster.cluster, team_cluster.member)
    assert deployed.submission_id is not None
    assert sink_reaches(measurement, alerting, surge_truth(events)) == surge_truth(events)

    nodes = Clusters(registry, team_cluster.state_dir).nodes(team, team_cluster.cluster)
    [worker] = [n for n in nodes.values() if n["role"] == "spark_worker"]
    [process] = of_node(worker)
    assert process.pid is not None
    checkup = Checkup(
        registry,
        team_cluster.state_dir,
        policy=HealthPolicy(stall_after=timedelta(seconds=20)),
        metrics_url=alerting.victoria_metrics_url,
        teams=[team],
    )
    # Its stream is quiet now: an idle query is not a stalled one (Spark reports no progress while idle; the driver
    # says it is alive; bench.deploy_latency saw a dagger on a finished stream restarted until it was crashlooping)
    time.sleep(25)
    idle = checkup.run(heal=False, record=False).dagger(team, "stall")
    assert idle is not None and "stalled" not in idle.signals and idle.verdict == "healthy", idle
    stopped = _driver_processes(process.pid, deployed.submission_id)
    for p in stopped:  # the query stalls: its driver is alive to the master, but makes no progress
        p.send_signal(signal.SIGSTOP)
    fault = datetime.now(UTC)
    detected: datetime | None = None
    found: list[AlertRecord] = []
    try:
        deadline = time.monotonic() + 240
        while not found and time.monotonic() < deadline:
            report = checkup.run(heal=False)  # a look that records: the alert rules read its points
            stalled = report.dagger(team, "stall")
            assert stalled is not None
            if detected is None and "stalled" in stalled.signals:
                detected = report.checked_at
                assert stalled.verdict == "failed" and "query stalled" in stalled.reasons[0], stalled
            found = [a for a in registry.alerts(team=team) if a.alertname == "DaggerStalled"]
            time.sleep(0 if found else 10)
    finally:
        for p in stopped:
            p.send_signal(signal.SIGCONT)
    assert detected is not None, "the health check never saw the stall"
    [alert] = found
    assert (alert.status, alert.receiver, alert.subject) == ("firing", f"team-{team}", f"dagger:{team}/stall")
    assert alert.labels["severity"] == "critical" and alert.labels["cluster"] == team_cluster.cluster
    assert alert.received_at is not None
    seen, recorded = (detected - fault).total_seconds(), (alert.received_at - fault).total_seconds()
    print(f"\nstalled query: detected by health {seen:.0f} s, alert recorded {recorded:.0f} s after the fault")
    assert [a.alertname for a in checkup.run(heal=False, record=False).alerts] == ["DaggerStalled"]
    registry.add_member(team, login())  # who runs the CLI (alone, this test had no other test make it one)
    shown = subprocess.run(
        [str(BIN_DIR / "dagger"), "status", "--team", team, "--state-dir", str(team_cluster.state_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert re.search(rf"DaggerStalled\s+.\s+critical\s+.\s+dagger:{team}/stall\s+.\s+team-{team}", shown.stdout), shown
    daggers.stop(team, "stall", team_cluster.member)
    assert _survivors(stopped[:1], timeout_s=30) == [], "the stalled driver's JVM outlived its stop"
    if leftovers := _survivors(stopped[1:], timeout_s=60):  # Python workers it forked: orphans, reaped by init
        for p in stopped[1:]:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        warnings.warn(f"processes of the stopped driver still ran 60 s later: {leftovers}", stacklevel=1)
