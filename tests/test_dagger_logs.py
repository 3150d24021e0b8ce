"""`dagger logs` and where Spark shows a deployed dagger's driver (jobs/lifecycle/logs.py). First what another team's
member could misuse: reading a team's driver log (it may hold the team's data) is refused and recorded before
anything is read. Then a member reads, follows and finds the driver of a dagger deployed on the team's cluster, in
`dagger logs`, `dagger list` and `dagger status`, as tables and as JSON."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from jobs.lifecycle.daggers import LIVE, Daggers
from jobs.lifecycle.logs import FileLog, follow, tail
from jobs.spec import parse_spec
from odin.apis import http_client
from odin.cluster.lifecycle import Clusters
from odin.paths import BIN_DIR
from odin.registry import Refused
from odin.teams.actor import login
from odin.traffic.generator import booking_logs, produce
from tests.support.catalog import START, catalog_stream
from tests.support.kafka import new_topic
from tests.support.services import Services, TeamCluster
from tests.support.specs import deployable, surge_spec


def dagger(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN_DIR / "dagger"), *args], capture_output=True, text=True, timeout=timeout)


def refusals(team_cluster: TeamCluster, name: str, actor: str) -> list[str]:
    subject = f"dagger:{team_cluster.team}/{name}"
    return [
        e.message
        for e in team_cluster.registry.history(subject)
        if (e.actor, e.action, e.outcome) == (actor, "dagger_logs", "refused")
    ]


def test_a_member_of_another_team_is_refused_a_teams_driver_log_and_the_refusal_is_recorded(
    services: Services, team_cluster: TeamCluster, ordinary_login: str
) -> None:
    registry, team, state = team_cluster.registry, team_cluster.team, team_cluster.state_dir
    other = f"o{uuid.uuid4().hex[:8]}"
    registry.ensure_team(other)
    registry.add_member(other, "bob")
    daggers = Daggers(registry, state)
    # whether the dagger exists is no business of bob's either: the same refusal, before the registry is asked
    for name in ("surge", f"none-{uuid.uuid4().hex[:6]}"):
        with pytest.raises(Refused, match=rf"^bob is not a member of team {team}: only its members"):
            daggers.driver_log(team, name, "bob")
        [message] = refusals(team_cluster, name, "bob")
        assert f"bob is not a member of team {team}" in message

    # The CLI acts as the OS login, which is not a member of this team of alice's (nor a platform engineer).
    theirs = f"a{uuid.uuid4().hex[:8]}"
    registry.ensure_team(theirs)
    registry.add_member(theirs, "alice")
    for follow_it in ([], ["--follow"]):
        r = dagger("logs", theirs, "surge", *follow_it, "--state-dir", str(state))
        assert r.returncode == 1 and r.stdout == "", r.stdout + r.stderr
        assert f"refused: {ordinary_login} is not a member of team {theirs}" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    recorded = [e for e in registry.history(f"dagger:{theirs}/surge") if e.action == "dagger_logs"]
    assert [(e.actor, e.outcome) for e in recorded] == [(ordinary_login, "refused")] * 2


def test_tail_and_follow_read_a_growing_log_line_by_line(tmp_path: Path) -> None:
    """The reading itself, on a file a thread writes: the last lines, a line being written shown once complete,
    a replaced (shorter) file read again from its start, and the end once the writer is gone."""
    path = tmp_path / "stdout"
    path.write_bytes(b"".join(f"line {i}\n".encode() for i in range(50_000)) + b"half")
    shown, pos = tail(FileLog(path), 3)
    assert shown == ["line 49998", "line 49999", "half"]
    assert tail(FileLog(path), 3, partial=False) == (["line 49997", "line 49998", "line 49999"], pos)
    assert tail(FileLog(path), 0)[0] == [] and pos == path.stat().st_size - len("half")

    def write() -> None:
        time.sleep(0.5)
        with path.open("ab") as f:
            f.write(b" done\nnext\n")
        time.sleep(0.5)
        path.write_bytes(b"new file\n")  # replaced: shorter than what was read

    writer = threading.Thread(target=write)
    writer.start()
    got: list[str] = []
    until = time.monotonic() + 30
    why = follow(FileLog(path), pos, got.append, poll_s=0.2, alive=writer.is_alive, recheck_s=0.3, deadline=until)
    writer.join()
    assert (why, got) == ("the driver ended", ["half done", "next", "new file"])


def test_a_member_reads_follows_and_finds_the_driver_of_a_deployed_dagger(
    services: Services, team_cluster: TeamCluster
) -> None:
    registry, team, state = team_cluster.registry, team_cluster.team, team_cluster.state_dir
    registry.add_member(team, login())  # who runs the CLI
    # a stream of its own, whose events the test sends when it wants the driver to write (a batch each)
    topic, name = new_topic(services), f"logs-{uuid.uuid4().hex[:6]}"
    sink = {"type": "influx", "version": 2, "url": services.victoria_metrics_url, "measurement": f"{team}_logs"}
    fields = deployable(surge_spec(services, topic, sink), catalog_stream(services, registry, topic))
    daggers = Daggers(registry, state)
    record = daggers.deploy(parse_spec(fields | {"team": team, "name": name, "parallelism": 1}), "main", "alice")
    try:
        driver = record.submission_id
        assert driver is not None
        cluster = registry.cluster(team, "main")
        assert cluster is not None
        master_ui = cluster.addresses["ui_urls"][0]
        [worker] = [n for n in Clusters(registry, state).nodes(team, "main").values() if n["role"] == "spark_worker"]
        work = Path(worker["dirs"]["data"]) / "work" / driver  # what the worker wrote
        worker_ui = f"http://{worker['host']}:{worker['ports']['ui']}"

        # the last lines of the dagger's own log (its Python logging), as the worker's UI serves them
        r = dagger("logs", team, name, "--lines", "5", "--state-dir", str(state))
        assert r.returncode == 0, r.stderr
        shown = r.stdout.splitlines()
        written = (work / "stdout").read_text().splitlines()
        assert len(shown) == 5 and any(written[i : i + 5] == shown for i in range(len(written))), (shown, written)
        assert f"{team}/{name}: the stdout of driver {driver}, from {worker_ui}" in r.stderr, r.stderr
        assert "start: query started" in (work / "stdout").read_text()  # the dagger's lines are in stdout
        r = dagger("logs", team, name, "--type", "stderr", "--lines", "100000", "--state-dir", str(state))
        assert r.returncode == 0 and r.stdout.startswith("Launch Command: "), r.stdout[:300] + r.stderr
        assert (work / "stderr").read_text().startswith(r.stdout.rstrip("\n").split("\n")[0])

        # --follow prints what the driver writes after it started (its telemetry line for each batch of the events
        # sent now), until Ctrl-C
        before = (work / "stdout").stat().st_size
        following = ["logs", team, name, "-f", "-n", "0", "--interval", "0.5", "--state-dir", str(state)]
        proc = subprocess.Popen(
            [str(BIN_DIR / "dagger"), *following],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # Ctrl-C as a terminal sends it, even where the suite runs with SIGINT ignored (a background job)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
        try:
            produce(services.kafka_bootstrap, topic, booking_logs(200, seed=81, start=START, rate=10), partitions=2)
            first = lines.get(timeout=90)
        finally:
            proc.send_signal(signal.SIGINT)
            code = proc.wait(30)
        assert code == 0, proc.stderr.read()  # type: ignore[union-attr]
        assert first.rstrip("\n") in (work / "stdout").read_bytes()[before:].decode(), first

        # dagger list: the driver's id in the table, and where Spark shows it on one line, whole
        r = dagger("list", "--team", team, "--state-dir", str(state))
        assert r.returncode == 0, r.stderr
        log_page = f"{worker_ui}/logPage/?driverId={driver}&logType=stdout"
        assert driver in r.stdout and f"{team}/{name} driver {driver}: master UI {master_ui}" in r.stdout, r.stdout
        assert log_page in r.stdout, r.stdout
        r = dagger("list", "--team", team, "--json", "--state-dir", str(state))
        assert r.returncode == 0, r.stderr
        [row] = [row for row in json.loads(r.stdout) if row["name"] == name]
        assert (row["driver_id"], row["master_ui"], row["worker_ui"]) == (driver, master_ui, worker_ui)
        assert (row["state"], row["cluster"], row["driver_log_ui"]) == ("running", "main", log_page)
        # the links lead where they say: the master runs the driver; the worker's page is its log; the app is its
        assert driver in [d["id"] for d in http_client.get(f"{master_ui}/json/", timeout=30).json()["activedrivers"]]
        assert f"stdout log page for {driver}" in http_client.get(log_page, timeout=30).text
        assert f"dagger-{team}-{name}" in http_client.get(row["app_ui"], timeout=30).text

        # dagger status: the same driver and links, in the tables and as JSON
        r = dagger("status", "--team", team, "--json", "--state-dir", str(state))
        report = json.loads(r.stdout)
        failing = any(d["verdict"] in ("failed", "crashlooping") for d in report["daggers"])
        assert r.returncode == (1 if failing else 0), r.stderr
        [health] = [d for d in report["daggers"] if d["name"] == name]
        assert (health["driver_id"], health["driver_log_ui"], health["app_ui"]) == (driver, log_page, row["app_ui"])
        assert [c["master_ui"] for c in report["clusters"] if c["name"] == "main"] == [master_ui]
        r = dagger("status", "--team", team, "--state-dir", str(state))
        assert driver in r.stdout and f"{team}/{name} driver {driver}: master UI {master_ui}" in r.stdout, r.stdout

        # stopped: its log stays readable, and following it ends by itself
        daggers.stop(team, name, "alice")
        r = dagger("logs", team, name, "-f", "-n", "3", "--interval", "0.5", "--state-dir", str(state), timeout=60)
        assert r.returncode == 0 and len(r.stdout.splitlines()) == 3, r.stdout + r.stderr
        assert f"dagger {team}/{name} is stopped: its log ends here" in r.stderr
    finally:
        now = registry.dagger(team, name)
        if now is not None and now.state in LIVE:
            daggers.stop(team, name, "alice")


def test_the_log_of_a_dagger_the_team_does_not_have_is_refused_saying_where_to_look(team_cluster: TeamCluster) -> None:
    registry, team, state = team_cluster.registry, team_cluster.team, team_cluster.state_dir
    registry.add_member(team, login())
    name = f"never-{uuid.uuid4().hex[:6]}"
    r = dagger("logs", team, name, "--state-dir", str(state), timeout=60)
    assert r.returncode == 1 and f"team {team} has no dagger {name!r}: see `dagger list --team {team}`" in r.stderr
    assert len(refusals(team_cluster, name, login())) == 1
