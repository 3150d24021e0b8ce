"""Loki against the real local stack: the perf mirror, refusals that touch nothing, `loki halt`, and standard
playbooks at small scale with their reports checked against the sink and the feeders' ground truth."""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from loki.faults.network import Link
from loki.playbook import STANDARD_DIR
from loki.store import SimulationStore
from odin.kafka.ends import fetched_end
from odin.kafka.topics import ensure_topics
from odin.paths import BIN_DIR
from odin.registry import Registry
from odin.registry.records import StreamRecord
from odin.traffic.generator import api_logs, produce
from tests.support.kafka import consume_all
from tests.support.loki_runs import ENV, as_platform_engineer, assert_accounted, assert_exact, simulate, state_args
from tests.support.services import Services


def _ends(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "loki-tests-ends"})
    try:
        out = {}
        for t in topics:
            meta = c.list_topics(t, timeout=10).topics[t]
            for p in meta.partitions:
                tp = TopicPartition(t, p)
                low, high = c.get_watermark_offsets(tp, timeout=10)
                out[(t, p)] = fetched_end(c, tp, low, high, 10)
        return out
    finally:
        c.close()


def _broker_pid(services: Services, name: str) -> int:
    from odin import processes

    assert services.stack is not None
    [pid] = [p.pid for p in processes.of_node(services.stack.nodes()[name]) if p.pid]
    return pid


def _perf_stream(services: Services) -> StreamRecord:
    """The booking log's perf twin, its topics created as the feeders make them."""
    registry = Registry.connect(services.registry_url)
    try:
        perf = registry.stream("booking-log-perf")
    finally:
        registry.close()
    assert perf is not None
    ensure_topics({"bootstrap.servers": perf.bootstrap_servers}, dict.fromkeys(perf.topics, 2))
    return perf


def _state_letter(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2]


def test_the_perf_mirror_copies_a_data_stream_into_its_perf_twin_offset_for_offset(services: Services) -> None:
    registry = Registry.connect(services.registry_url)
    try:
        stream, twin = registry.stream("api-log"), registry.stream("api-log-perf")
    finally:
        registry.close()
    assert stream is not None and twin is not None
    assert twin.bootstrap_servers == services.perf_kafka_bootstrap != stream.bootstrap_servers
    [topic] = stream.topics
    ensure_topics({"bootstrap.servers": stream.bootstrap_servers}, {topic: 2})
    produce(stream.bootstrap_servers, topic, api_logs(3000, seed=5), partitions=2)
    job = subprocess.Popen(
        [str(BIN_DIR / "odin"), "mirror", "--perf", "api-log", *state_args(services)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, start_new_session=True,
    )  # fmt: skip
    try:
        source = _ends(stream.bootstrap_servers, [topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with_suffix = {(t.replace(topic, f"{topic}-perf"), p): e for (t, p), e in source.items()}
            if job.poll() is not None or _ends(twin.bootstrap_servers, [f"{topic}-perf"]) == with_suffix:
                break
            time.sleep(1)
        os.killpg(job.pid, signal.SIGTERM)
        out, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 0, out + err
    assert "record(s) copied" in out
    original = {(m.partition(), m.offset(), m.value()) for m in consume_all(stream.bootstrap_servers, topic)}
    copied = {(m.partition(), m.offset(), m.value()) for m in consume_all(twin.bootstrap_servers, f"{topic}-perf")}
    assert copied == original and len(copied) >= 3000


def _playbook(tmp_path: Path, name: str, **changes: Any) -> Path:
    data = yaml.safe_load((STANDARD_DIR / f"{name}.yaml").read_text())
    data.update(changes)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_fault_outside_the_blast_radius_is_refused_with_nothing_touched(services: Services, tmp_path: Path) -> None:
    """The data streams' broker holds non-perf topics: pausing it is refused, and so is a target the blast radius
    leaves out; nothing is touched (same broker processes, running; same topic offsets)."""
    as_platform_engineer(services)
    case = {"name": "data broker", "type": "pause", "target": "broker/kafka-broker", "start": "5s", "duration": "5s"}
    book = _playbook(tmp_path, "broker-pause", cases=[case])
    perf = _perf_stream(services)
    pids = {n: _broker_pid(services, n) for n in ("kafka-broker", "kafka-perf")}
    offsets = _ends(perf.bootstrap_servers, perf.topics)
    run = subprocess.run(
        [str(BIN_DIR / "loki"), "simulate", str(book), *state_args(services)],
        capture_output=True, text=True, env=ENV, timeout=300,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert "broker/kafka-broker is outside blast_radius" in run.stderr
    plan = subprocess.run(
        [str(BIN_DIR / "loki"), "plan", str(_playbook(tmp_path, "broker-pause", blast_radius=["broker/*",
         "dagger/surge", "topic/*-perf"], cases=yaml.safe_load(book.read_text())["cases"])), *state_args(services)],
        capture_output=True, text=True, env=ENV, timeout=300,
    )  # fmt: skip
    assert plan.returncode == 1
    assert "broker/kafka-broker serves catalog data streams; a pause would harm them" in plan.stderr
    assert {n: _broker_pid(services, n) for n in pids} == pids
    assert all(_state_letter(pid) in "SR" for pid in pids.values())
    assert _ends(perf.bootstrap_servers, perf.topics) == offsets


def test_a_broker_that_does_not_answer_is_not_taken_for_an_empty_one(services: Services, tmp_path: Path) -> None:
    """The data broker hangs: it lists no topics, and a kill of it passed the non-perf check as if it held none.
    Failing closed, the plan refuses it (it does not answer; the catalog says it serves data streams)."""
    as_platform_engineer(services)
    case = {"name": "kill data", "type": "kill", "target": "broker/kafka-broker", "start": "5s", "duration": "5s"}
    book = _playbook(tmp_path, "broker-pause", cases=[case], blast_radius=["broker/*", "dagger/surge", "topic/*-perf"])
    pid = _broker_pid(services, "kafka-broker")
    os.killpg(pid, signal.SIGSTOP)
    try:
        plan = subprocess.run(
            [str(BIN_DIR / "loki"), "plan", str(book), *state_args(services)],
            capture_output=True, text=True, env=ENV, timeout=300,
        )  # fmt: skip
    finally:
        os.killpg(pid, signal.SIGCONT)
    assert plan.returncode == 1, plan.stdout + plan.stderr
    assert "broker/kafka-broker did not answer: what it holds is unknown, so a kill is refused" in plan.stderr


def _consumer_sessions(run_dir: Path) -> list[int]:
    """The local consumers' sessions, as Loki gave them to its watchdog."""
    orders = json.loads((run_dir / "watchdog.json").read_text())
    return [int(c["pgid"]) for c in orders["consumers"] if c["pgid"]]


def test_a_killed_loki_leaves_no_fault_namespace_mount_or_consumer_behind(services: Services, tmp_path: Path) -> None:
    """`kill -9` of `loki simulate` while the perf broker is paused: its watchdog (a process of its own session)
    continues the broker within the fault's duration + 10 s, stops the consumer, removes its network namespace and
    its checkpoint's tmpfs, and marks the run halted."""
    as_platform_engineer(services)
    book = _playbook(
        tmp_path,
        "network-partition",
        load={"feeders": [{"stream": "booking-log-perf", "rate": {"shape": "steady", "events_per_s": 100},
                           "duration": "90s"}],
              "consumers": [{"name": "surge", "placement": "local", "spec_file": "surge.yaml",
                             "count_column": "num_of_bookings"}]},
        steady_state={"probes": [], "settle": "10s"},
        cases=[{"name": "paused", "type": "pause", "target": "broker/kafka-perf", "start": "2s", "duration": "30s"},
               {"name": "cut", "type": "network_partition", "target": "link/surge", "start": "80s", "duration": "5s"},
               {"name": "full", "type": "disk_full", "target": "dagger/surge", "start": "80s", "duration": "5s"}],
        blast_radius=["broker/kafka-perf", "topic/*-perf", "dagger/surge", "link/surge"],
    )  # fmt: skip
    pid = _broker_pid(services, "kafka-perf")
    out = tmp_path / "loki.out"
    with out.open("w") as log:
        run = subprocess.Popen(
            [str(BIN_DIR / "loki"), "simulate", str(book), "--reports", str(tmp_path / "runs"), *state_args(services)],
            stdout=log, stderr=subprocess.STDOUT, text=True, env=ENV, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and _state_letter(pid) != "T" and run.poll() is None:
            time.sleep(0.2)
        assert _state_letter(pid) == "T", out.read_text()[-3000:]
        paused_at = time.monotonic()
        os.kill(run.pid, signal.SIGKILL)  # loki alone: what it started lives in sessions of their own
        run.wait(30)
        while time.monotonic() < paused_at + 40 and _state_letter(pid) == "T":
            time.sleep(0.2)
        assert _state_letter(pid) in "SR", "the broker was not continued within the fault's duration + 10 s"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        os.kill(pid, signal.SIGCONT)
    [run_dir] = (tmp_path / "runs").iterdir()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and "halted" not in _steps(services, run_dir.name):
        time.sleep(1)
    steps = _steps(services, run_dir.name)
    assert "halted" in steps and steps.count("fault.reverted") == 1, steps
    [pgid] = _consumer_sessions(run_dir)
    left = [p.pid for p in psutil.process_iter() if _sid(p.pid) == pgid]
    assert not left, f"consumer processes left: {left}"
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    assert f"loki-{run_dir.name[-12:]}" not in namespaces, namespaces
    assert str(run_dir) not in Path("/proc/mounts").read_text()


def test_a_fault_ends_on_time_while_loki_hangs(services: Services, tmp_path: Path) -> None:
    """Loki stopped (SIGSTOP) during a 5 s pause of the perf broker: the watchdog continues the broker when the
    fault's duration is over; Loki, continued, ends the run normally."""
    as_platform_engineer(services)
    book = _playbook(
        tmp_path,
        "broker-pause",
        load={"feeders": [{"stream": "booking-log-perf", "rate": {"shape": "steady", "events_per_s": 20},
                           "duration": "20s"}]},
        steady_state={"probes": [], "interval": "1s", "settle": "5s"},
        cases=[{"name": "short pause", "type": "pause", "target": "broker/kafka-perf", "start": "2s",
                "duration": "5s"}],
        blast_radius=["broker/kafka-perf", "topic/*-perf"],
    )  # fmt: skip
    pid = _broker_pid(services, "kafka-perf")
    run = subprocess.Popen(
        [str(BIN_DIR / "loki"), "simulate", str(book), "--reports", str(tmp_path / "runs"), *state_args(services)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and _state_letter(pid) != "T" and run.poll() is None:
            time.sleep(0.2)
        assert _state_letter(pid) == "T", "the fault never started"
        paused_at = time.monotonic()
        os.kill(run.pid, signal.SIGSTOP)
        while time.monotonic() < paused_at + 15 and _state_letter(pid) == "T":
            time.sleep(0.2)
        assert _state_letter(pid) in "SR", "the broker was not continued within the fault's duration + 10 s"
        os.kill(run.pid, signal.SIGCONT)
        out, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        os.kill(pid, signal.SIGCONT)
    assert run.returncode == 0, out[-3000:]
    [run_dir] = (tmp_path / "runs").iterdir()
    assert "its duration is over and loki did not revert it" in (run_dir / "watchdog.log").read_text()


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _steps(services: Services, run_id: str) -> list[str]:
    registry = Registry.connect(services.registry_url)
    try:
        return [e.step for e in SimulationStore(registry).entries(run_id)]
    finally:
        registry.close()


def test_loki_halt_reverts_a_running_fault(services: Services, tmp_path: Path) -> None:
    """A load-only experiment pauses the perf broker for long; `loki halt` stops the run and the broker runs on."""
    as_platform_engineer(services)
    book = _playbook(
        tmp_path,
        "broker-pause",
        load={"feeders": [{"stream": "booking-log-perf", "rate": {"shape": "steady", "events_per_s": 200},
                           "duration": "120s"}]},
        steady_state={"probes": []},
        cases=[{"name": "long pause", "type": "pause", "target": "broker/kafka-perf", "start": "3s",
                "duration": "100s"}],
        blast_radius=["broker/kafka-perf", "topic/*-perf"],
    )  # fmt: skip
    pid = _broker_pid(services, "kafka-perf")
    run = subprocess.Popen(
        [str(BIN_DIR / "loki"), "simulate", str(book), *state_args(services)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _state_letter(pid) != "T" and run.poll() is None:
            time.sleep(0.5)
        assert _state_letter(pid) == "T", "the fault never started"
        halted = subprocess.run(
            [str(BIN_DIR / "loki"), "halt", *state_args(services)], capture_output=True, text=True, env=ENV, timeout=300
        )
        assert halted.returncode == 0, halted.stdout + halted.stderr
        assert "halting" in halted.stdout
        assert _state_letter(pid) in "SR"
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        os.kill(pid, signal.SIGCONT)
    assert run.returncode == 1, out
    registry = Registry.connect(services.registry_url)
    try:
        [last] = SimulationStore(registry).runs(playbook="broker-pause")[:1]
        steps = [e.step for e in SimulationStore(registry).entries(last.id)]
    finally:
        registry.close()
    assert last.state == "halted" and "fault.started" in steps and "fault.reverted" in steps


@pytest.mark.slow
def test_broker_pause_at_small_scale_loses_nothing_and_counts_nothing_twice(services: Services) -> None:
    report, record = simulate(services, "broker-pause")
    assert_accounted(report, services, record)
    assert_exact(report)
    [case] = report["cases"]
    assert case["detect_s"] is not None and case["recover_s"] is not None
    print(f"broker-pause: detected {case['detect_s']} s, recovered {case['recover_s']} s after the fault started")


def test_loki_feed_records_exactly_what_the_broker_acknowledged(services: Services) -> None:
    as_platform_engineer(services)
    perf = _perf_stream(services)
    before = _ends(perf.bootstrap_servers, perf.topics)
    run = subprocess.run(
        [str(BIN_DIR / "loki"), "feed", "broker-pause", "--rate-scale", "0.05", "--time-scale", "0.05",
         *state_args(services)],
        capture_output=True, text=True, env=ENV, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    row = next(line for line in run.stdout.splitlines() if line.strip().startswith("│ 0"))
    sent, acked, failed, indeterminate, _malformed = (int(c.strip().replace(",", "")) for c in row.split("│")[2:7])
    after = _ends(perf.bootstrap_servers, perf.topics)
    assert sent == acked == sum(after[k] - before.get(k, 0) for k in after) > 5000
    assert failed == indeterminate == 0


ECHO_CLIENT = """
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"ping")
print(s.recv(4).decode(), flush=True)
time.sleep(30)  # the connection stays open while the link is closed
"""


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_a_link_forwards_and_closes_with_its_connections_open() -> None:
    """A consumer behind a link (loki/faults/network.py) reaches the host's port through the proxy; closing the link
    while
    connections are open ends them cleanly (a proxy stopped with pumps pending left coroutines that failed at
    garbage collection: 'Event loop is closed')."""
    echo = socket.create_server(("127.0.0.1", 0))
    port = echo.getsockname()[1]

    def serve() -> None:
        conn, _ = echo.accept()
        conn.sendall(conn.recv(4))
        conn.recv(1)  # until the proxy closes its side

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    link = Link.create(f"t-echo-{uuid.uuid4().hex[:6]}", [port], [])
    client = subprocess.Popen(link.wrap([sys.executable, "-c", ECHO_CLIENT, str(port)]), stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert client.stdout is not None and client.stdout.readline().strip() == "ping"
        deadline = time.monotonic() + 5  # counted once the write drained: maybe after the client read the reply
        while link.proxy.bytes_forwarded < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert link.proxy.bytes_forwarded == 8
    finally:
        link.close()
        client.kill()
        client.wait()
        echo.close()
    gc.collect()
    server.join(10)
    assert not server.is_alive(), "the proxy kept its connection to the host open"
