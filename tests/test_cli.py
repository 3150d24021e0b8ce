"""The `dagger` CLI's error boundary and console output: expected failures end in one message and exit 1, never a
traceback, and say what to run next; a stop signal hides no failure of the dagger's own; a preview writes nothing; a
run is quiet; listings print JSON with --json; the shell completes commands and choices."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import yaml
from confluent_kafka.admin import AdminClient
from py4j.protocol import Py4JJavaError, Py4JNetworkError
from pyspark.sql import SparkSession

from jobs.engine.offsets import DataLossError, SourceOffset
from jobs.engine.plan import plan_dagger
from jobs.engine.runner import preview
from jobs.engine.session import broken_by_signal, root_cause
from jobs.sinks import SinkError
from jobs.spec import parse_spec
from odin.apis import victoria
from odin.paths import BIN_DIR
from odin.registry import Registry
from odin.teams.actor import login
from odin.traffic.generator import booking_logs, produce
from tests.support.events import START, surge_truth
from tests.support.kafka import consume_all, new_topic
from tests.support.services import Services, TeamDb
from tests.support.sinks import surge_counts, surge_rows
from tests.support.specs import catalog_spec, spec_file, surge_spec

BAD_EVENT = b"\xff\xff\xff\xff not a protobuf"


def dagger(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN_DIR / "dagger"), *args], capture_output=True, text=True, timeout=timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running(spec: Path, log: Path, until: str, timeout_s: float = 400) -> Iterator[subprocess.Popen[bytes]]:
    """`dagger run SPEC` in a process group of its own, once `until` is in its output; the group is gone after."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(BIN_DIR / "dagger"), "run", str(spec)],
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=out,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and proc.poll() is None and until not in log.read_text():
            time.sleep(0.2)
        assert proc.poll() is None, log.read_text()[-3000:]
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def with_malformed(events: list[Any], every: int = 100) -> tuple[list[bytes], int]:
    """The events' payloads with an undecodable one after every `every`-th, and how many of those."""
    payloads: list[bytes] = []
    bad = 0
    for i, e in enumerate(events):
        if i % every == every // 2:
            payloads.append(BAD_EVENT)
            bad += 1
        payloads.append(e.SerializeToString())
    return payloads, bad


def test_an_unreachable_broker_fails_fast_with_one_message(tmp_path: Path) -> None:
    """Nothing listens on the port: both commands say which brokers did not answer, within seconds, before Spark
    starts (librdkafka would retry for ever, topic creation waits 30 s)."""
    bootstrap = f"127.0.0.1:{free_port()}"
    spec = surge_spec(SimpleNamespace(kafka_bootstrap=bootstrap), "t-unreachable", {"type": "log"})  # type: ignore[arg-type]
    path = spec_file(spec, tmp_path)

    def timed(command: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
        began = time.monotonic()
        return dagger(*command, str(path), timeout=180), time.monotonic() - began

    commands = (["run", "--once"], ["preview"])
    with ThreadPoolExecutor(len(commands)) as pool:  # side by side: each waits out a metadata timeout
        done = list(pool.map(timed, commands))
    for command, (r, took) in zip(commands, done, strict=True):
        out = r.stdout + r.stderr
        assert r.returncode == 1, (command, out[-3000:])
        assert "Traceback" not in out, out[-3000:]
        assert r.stderr.count("error:") == 1 and f"Kafka at {bootstrap}" in r.stderr, r.stderr
        assert "did not answer" in r.stderr and "bootstrap_servers" in r.stderr, r.stderr
        assert took < 45, (command, took)  # a 10 s metadata timeout, plus the interpreter's start on a busy machine


def test_a_sink_refusing_writes_fails_with_its_message_even_when_stopped(
    services: Services, team_db: TeamDb, tmp_path: Path
) -> None:
    """A postgres sink whose database does not exist. SIGTERM arrives while the sink retries (to the dagger's own
    process, as `kill PID` does: Spark's JVM keeps running and reports the batch's fate): the run still fails with
    the sink's message, rather than exiting 0 as stopped."""
    topic = new_topic(services, partitions=1)
    # 80 s of events per batch: batch 1's watermark (70 s) closes the first window, whose write fails.
    produce(services.kafka_bootstrap, topic, booking_logs(8_000, seed=70, start=START, rate=50), partitions=1)
    database = f"no_such_db_{uuid.uuid4().hex[:6]}"
    dsn = team_db.dsn.rsplit("/", 1)[0] + f"/{database}"  # the team's role, its password in the environment
    spec = surge_spec(services, topic, {**team_db.sink("surge"), "dsn": dsn})
    spec["streams"][0]["kafka"]["max_events_per_trigger"] = 4_000
    log = tmp_path / "run.out"
    with running(spec_file(spec, tmp_path), log, until="attempt 1 failed") as proc:
        os.kill(proc.pid, signal.SIGTERM)  # the sink retries for 7.5 s more, then gives up
        code = proc.wait(120)
    text = log.read_text()
    assert code == 1 and "stopped by signal" not in text, text[-3000:]
    assert "Traceback" not in text and "JVM stacktrace" not in text, text[-3000:]
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, text[-3000:]
    assert "failed: SinkError: postgres sink of" in errors[0] and f'database "{database}" does not exist' in errors[0]
    assert "Check the sink" in text


def test_preview_writes_no_dead_letters(services: Services, spark: SparkSession) -> None:
    topic = new_topic(services, partitions=1)
    events = list(booking_logs(2_000, seed=71, start=START, rate=100))
    payloads, bad = with_malformed(events)
    produce(services.kafka_bootstrap, topic, iter(payloads), partitions=1)
    plan = plan_dagger(parse_spec(surge_spec(services, topic, {"type": "log"})))
    table = preview(plan, spark, limit=100_000, recent=len(payloads))
    assert bad and surge_counts(table.to_pylist()) == surge_truth(events)  # undecodable events skipped
    dlq = f"{topic}.dlq"
    meta = AdminClient({"bootstrap.servers": services.kafka_bootstrap}).list_topics(timeout=10)
    assert dlq not in meta.topics or consume_all(services.kafka_bootstrap, dlq) == []


def test_run_once_is_quiet_and_still_writes_dead_letters(services: Services, tmp_path: Path) -> None:
    """No Spark WARN lines, progress bars or librdkafka CONFWARN lines (consumer settings given to the dead-letter
    producer and the admin client); the dagger's progress lines and summary stay."""
    topic = new_topic(services, partitions=1)
    events = list(booking_logs(1_000, seed=72, start=START, rate=100))
    payloads, bad = with_malformed(events)
    produce(services.kafka_bootstrap, topic, iter(payloads), partitions=1)
    out_file = tmp_path / "surge.jsonl"
    r = dagger(
        "run", "--once", str(spec_file(surge_spec(services, topic, {"type": "log", "path": str(out_file)}), tmp_path))
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert " WARN " not in out and "CONFWARN" not in out and "[Stage " not in out, out[-3000:]
    assert "Setting default log level" not in out, out[-3000:]
    assert "batch 0: " in r.stdout and f"done: {len(events)} events" in r.stdout, r.stdout
    assert surge_rows(out_file) == surge_truth(events)
    assert len(consume_all(services.kafka_bootstrap, f"{topic}.dlq")) == bad  # the streaming reader writes them


def test_sigusr1_drains_a_running_dagger_in_its_own_jvm(services: Services, tmp_path: Path) -> None:
    """Loki's end of a run: the running dagger reads what is left, including events sent after it started, emits
    every window (the last ones too, which no later event closes) and exits 0, with no second JVM."""
    topic = new_topic(services, partitions=2)
    first = list(booking_logs(2_000, seed=73, start=START, rate=100))
    produce(services.kafka_bootstrap, topic, (e.SerializeToString() for e in first), partitions=2)
    out_file, log = tmp_path / "surge.jsonl", tmp_path / "run.out"
    spec = surge_spec(services, topic, {"type": "log", "path": str(out_file)})
    with running(spec_file(spec, tmp_path), log, until="batch 0: ") as proc:
        later = list(booking_logs(1_000, seed=74, start=START + timedelta(seconds=len(first) / 100), rate=100))
        produce(services.kafka_bootstrap, topic, (e.SerializeToString() for e in later), partitions=2)
        jvms = set(_jvms_of(proc.pid))
        os.kill(proc.pid, signal.SIGUSR1)  # to the dagger's own process, as Loki sends it
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            jvms |= set(_jvms_of(proc.pid))
            time.sleep(0.2)
        code = proc.wait(30)
    text = log.read_text()
    assert code == 0 and f"done: {len(first) + len(later)} events" in text, text[-3000:]
    assert "end of input, closing every window" in text, text[-3000:]
    assert surge_rows(out_file) == surge_truth(first + later)
    assert len(jvms) == 1, jvms


def _jvms_of(group: int) -> list[int]:
    """The Spark JVMs of a process group (the dagger's)."""
    jvms = []
    for p in psutil.process_iter(["name"]):
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if p.info["name"] == "java" and os.getpgid(p.pid) == group:
                jvms.append(p.pid)
    return jvms


def test_a_python_worker_slower_to_start_than_sparks_fixed_10_s_costs_a_retry_not_the_run(
    services: Services, tmp_path: Path
) -> None:
    """Spark gives the Python process that runs a streaming source 10 s to connect back (PythonWorkerFactory, not
    configurable). On a busy host it once took longer: the deploy failed ("Timed out while waiting for the Python
    worker to connect back"). The query is started again instead; a slow start here is a Python that sleeps 12 s
    the first time it is asked for the source runner."""
    topic = new_topic(services, partitions=1)
    events = list(booking_logs(300, seed=74, start=START, rate=100))
    produce(services.kafka_bootstrap, topic, iter(events), partitions=1)
    marker, python = tmp_path / "slowed", tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *python_streaming_source_runner*) [ -e {marker} ] || {{ touch {marker}; sleep 12; }};; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    out_file = tmp_path / "surge.jsonl"
    spec = spec_file(surge_spec(services, topic, {"type": "log", "path": str(out_file)}), tmp_path)
    r = subprocess.run(
        [str(BIN_DIR / "dagger"), "run", "--once", str(spec)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": str(python)},
    )
    assert marker.exists()  # the slow start happened
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "did not connect back" in r.stdout + r.stderr
    assert surge_rows(out_file) == surge_truth(events)


class Captured(Exception):
    """Stands for pyspark's captured JVM exceptions (StreamingQueryException...): a message and the Java stack."""

    def __init__(self, desc: str, stack: str = "") -> None:
        super().__init__(desc)
        self._desc, self._stackTrace = desc, stack


SINK_FAILED = """[STREAM_FAILED] Query [id = f0150605, runId = a059ff9f] terminated with exception: \
[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch sink. Reason: \
An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/work/main/jobs/sinks/postgres.py", line 95, in _connect
    self._conn = psycopg.connect(self._conninfo, connect_timeout=10, autocommit=True)
                 ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
psycopg.OperationalError: connection failed: FATAL:  database "nope" does not exist

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/main/.venv/lib/python3.11/site-packages/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
  File "/work/main/jobs/sinks/base.py", line 177, in write
    raise SinkError(
jobs.sinks.base.SinkError: postgres sink of tests.d: batch 1026 failed after 5 attempt(s): OperationalError: \
connection failed: FATAL:  database "nope" does not exist
 SQLSTATE: 39000 SQLSTATE: XXKST
=== Streaming Query ===
Identifier: tests.d_cd853b3c [id = f0150605, runId = a059ff9f]"""

DATA_LOSS = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: \
[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform latestOffset: \
Traceback (most recent call last):
  File "/work/main/jobs/kafka_source.py", line 228, in latestOffset
    end = plan_batch(begin, extents, unavailable, max_rows, self.stream.kafka.fail_on_data_loss)
jobs.engine.offsets.DataLossError: events may have been lost: the checkpoint does not match the broker
  t-1[0]: the checkpoint resumes at offset 2000, the broker holds [0, 500) (beyond its end)
If this is expected, start over with `dagger run --reset-checkpoint`.
 SQLSTATE: 38000"""

READER_FAILED = """Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, most recent failure: \
Lost task 0.0 in stage 1.0 (TID 1) (127.0.0.1 executor driver): org.apache.spark.api.python.PythonException: \
Traceback (most recent call last):
  File "/work/main/jobs/kafka_source.py", line 330, in read_range
    raise KafkaException(
cimpl.KafkaException: KafkaError{code=_TRANSPORT,val=-195,str="t-1[0]: broker down"}

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:600)"""

STOPPED_CONTEXT = """An error occurred while calling o222.stop.
: java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.
This stopped SparkContext was created at:
\tat org.apache.spark.SparkContext.assertNotStopped(SparkContext.scala:128)"""

WORKER_KILLED = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted due to stage \
failure: Task 1 in stage 4.0 failed 1 times: org.apache.spark.SparkException: Python worker exited unexpectedly \
(crashed)
\tat org.apache.spark.api.python.BasePythonRunner.read(PythonRunner.scala:700)
Caused by: java.io.EOFException
\tat java.base/java.io.DataInputStream.readInt(DataInputStream.java:398)"""

STOPPED = "Cannot call methods on a stopped SparkContext."
CALLBACK_LOST_JVM = f"""[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: \
[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch sink. Reason: \
An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/work/main/jobs/engine.py", line 141, in write_batch
    table: pa.Table = df.toArrow()
pyspark.errors.exceptions.captured.IllegalStateException: {STOPPED}
 SQLSTATE: 39000"""

DISK_FULL = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted due to stage \
failure: Task 0 in stage 7.0 failed 1 times
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2900)
Caused by: java.io.IOException: No space left on device
\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)"""


def test_root_causes_are_found_in_sparks_exceptions() -> None:
    sink = root_cause(Captured(SINK_FAILED))
    assert (sink.kind, sink.python) == ("SinkError", True)
    assert sink.message.endswith(
        'failed after 5 attempt(s): OperationalError: connection failed: FATAL:  database "nope" does not exist'
    )
    loss = root_cause(Captured(DATA_LOSS))
    assert loss.kind == "DataLossError" and loss.message.splitlines() == [
        "events may have been lost: the checkpoint does not match the broker",
        "  t-1[0]: the checkpoint resumes at offset 2000, the broker holds [0, 500) (beyond its end)",
        "If this is expected, start over with `dagger run --reset-checkpoint`.",
    ]
    reader = root_cause(Captured(READER_FAILED))
    assert (reader.kind, reader.message) == ("KafkaException", "t-1[0]: broker down")
    disk = root_cause(Captured(DISK_FULL))
    assert (disk.kind, disk.message, disk.python) == ("IOException", "No space left on device", False)
    direct = root_cause(SinkError("kafka sink: sink.password_env names DAGGER_X, which is not set"))
    assert str(direct) == "SinkError: kafka sink: sink.password_env names DAGGER_X, which is not set"


def _java_error_of_a_gone_jvm() -> Py4JJavaError:
    class GoneGateway:
        def send_command(self, _command: str) -> str:
            raise Py4JNetworkError("Answer from Java side is empty")

    class JavaException:
        _target_id = "o239"
        _gateway_client = GoneGateway()

    return Py4JJavaError("An error occurred while calling o238.stop.\n", JavaException())


def test_a_stop_signal_hides_no_failure_of_the_daggers_own() -> None:
    """What the signal does to Spark's JVM and workers is a clean stop; what our code raised is a failure, even then."""
    by_signal = [
        Py4JNetworkError("Answer from Java side is empty"),
        ConnectionRefusedError(111, "Connection refused"),
        Captured(STOPPED_CONTEXT),
        Captured(WORKER_KILLED),
        Captured("[STREAM_FAILED] ... terminated with exception: Job 12 cancelled because SparkContext was shut down"),
        Captured(CALLBACK_LOST_JVM),  # our foreachBatch function's call into Spark, as the JVM went down
        _java_error_of_a_gone_jvm(),  # query.stop() as the JVM shut down: its Java exception cannot be read
    ]
    ours = [
        Captured(SINK_FAILED),
        Captured(DATA_LOSS),
        Captured(READER_FAILED),
        Captured(DISK_FULL),  # a failure of Spark's that no signal explains
        SinkError("postgres sink of tests.d: batch 3 failed after 5 attempt(s)"),
        DataLossError("events may have been lost"),
        Captured(CALLBACK_LOST_JVM.replace(STOPPED, "[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found.")),
    ]
    assert [broken_by_signal(e) for e in by_signal] == [True] * len(by_signal)
    assert [broken_by_signal(e) for e in ours] == [False] * len(ours)


# -- the CLI's surface: shell completion, --json, errors that say what to run next ------------------------------------


def test_the_shell_completes_commands_options_and_choices() -> None:
    # Typer finds the shell among the CLI's ancestors (shellingham): a bash that outlives the CLI, whatever runs pytest
    script = subprocess.run(
        ["bash", "-c", f"{BIN_DIR / 'dagger'} --show-completion; exit $?"], capture_output=True, text=True, timeout=600
    )
    assert script.returncode == 0 and "_DAGGER_COMPLETE=complete_bash" in script.stdout, script.stdout + script.stderr

    def complete(*words: str) -> list[str]:
        """What bash's completion function gets for the words typed so far (the last one being completed)."""
        env = os.environ | {
            "_DAGGER_COMPLETE": "complete_bash",
            "COMP_WORDS": " ".join(["dagger", *words]),
            "COMP_CWORD": str(len(words)),
        }
        done = subprocess.run([str(BIN_DIR / "dagger")], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("lo") == ["logs"]
    assert complete("logs", "--type", "") == ["stdout", "stderr"]
    assert complete("list", "--js") == ["--json"]


def test_listings_print_json_the_same_data_as_their_tables(tmp_path: Path) -> None:
    for command in ("list", "status", "preview", "validate"):
        assert "--json" in dagger(command, "--help").stdout, command
    spec = surge_spec(SimpleNamespace(kafka_bootstrap=f"127.0.0.1:{free_port()}"), "t-json", {"type": "log"})  # type: ignore[arg-type]
    path = spec_file(spec, tmp_path)
    as_json, as_table = dagger("validate", "--json", str(path)), dagger("validate", str(path))
    assert as_json.returncode == as_table.returncode == 0, as_json.stderr + as_table.stderr
    assert "\x1b[" not in as_json.stdout and as_json.stderr == ""
    doc = json.loads(as_json.stdout)  # all of stdout is the document
    assert doc["valid"] and doc["dagger"] == f"tests.{spec['name']}"
    assert [(s["table"], s["topics"], s["proto"]) for s in doc["streams"]] == [
        ("data_stream", ["t-json"], "daggers.events.BookingLog")
    ]
    table = " ".join(as_table.stdout.split())  # the table wraps long lines
    assert " ".join(doc["spark_sql"].split()) in table and f"({doc['output_mode']} mode)" in table
    assert all(f"evaluated in the Kafka reader: {p}" in table for p in doc["evaluated_in_the_kafka_reader"])
    keys = ", ".join(doc["sink"]["keys"])
    assert f"sink log: keys {keys}; values {', '.join(doc['sink']['values'])}; time {doc['sink']['time']}" in table


def test_preview_prints_its_rows_as_json(services: Services, tmp_path: Path) -> None:
    topic = new_topic(services, partitions=1)
    events = list(booking_logs(500, seed=73, start=START, rate=100))
    produce(services.kafka_bootstrap, topic, iter(events), partitions=1)
    path = spec_file(surge_spec(services, topic, {"type": "log"}), tmp_path)
    r = dagger("preview", "--json", "--limit", "100000", str(path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert surge_counts(json.loads(r.stdout)) == surge_truth(events)  # all of stdout is the rows


def test_a_bad_argument_or_spec_says_what_to_give(tmp_path: Path) -> None:
    r = dagger("switch-stream", "booking-log", "--to", "sideways")
    assert r.returncode == 2 and "give `--to failover` or `--to primary`" in r.stderr, r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    for command in (["validate"], ["deploy", "--cluster", "main"], ["update"]):  # before the registry is asked
        r = dagger(*command, str(bad))
        assert r.returncode == 2 and "Every field is in `dagger schema`" in r.stderr, r.stderr


def test_lifecycle_errors_say_what_to_run_next(services: Services, tmp_path: Path) -> None:
    """A team of the login's without clusters or daggers: deploying, stopping and reading logs are refused, each
    saying what to run; its listings are empty, as JSON too."""
    assert services.stack is not None
    registry = Registry.connect(services.registry_url)
    team, state = f"t{uuid.uuid4().hex[:8]}", str(services.stack.state_dir)
    registry.ensure_team(team)
    registry.add_member(team, login())
    try:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(catalog_spec(team, f"{team}_m", services)))
        r = dagger("deploy", str(spec), "--cluster", "nope", "--state-dir", state)
        assert r.returncode == 1 and f"refused: team {team} has no cluster 'nope'" in r.stderr, r.stderr
        assert f"it has none; a platform engineer makes one with `odin cluster create {team} nope`" in r.stderr
        for command in (["stop", team, "nothing"], ["logs", team, "nothing"]):
            r = dagger(*command, "--state-dir", state)
            assert r.returncode == 1 and r.stdout == "", r.stdout
            assert f"refused: team {team} has no dagger 'nothing': see `dagger list --team {team}`" in r.stderr
        listed = dagger("list", "--team", team, "--json", "--state-dir", state)
        assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stdout + listed.stderr
        status = dagger("status", "--team", team, "--json", "--state-dir", state)
        assert status.returncode == 0, status.stderr
        doc = json.loads(status.stdout)
        assert (doc["clusters"], doc["daggers"], doc["actions"]) == ([], [], [])
    finally:
        registry.close()


def test_the_windows_a_batch_closes_are_written_at_once_not_a_trigger_interval_later(
    services: Services, tmp_path: Path
) -> None:
    """Spark emits the windows a watermark closed in the batch after the one that moved it, a batch without events.
    That batch runs at once: with an hour's trigger interval, the windows the first batch's events close reach the
    sink seconds after it, not at the next hour (the query ticks fast; its source holds events to the spec's
    interval). Spark's triggers fall on multiples of the interval: before, batch 1 came up to an hour later."""
    topic = new_topic(services)
    events = list(booking_logs(2_000, seed=83, start=START, rate=10))  # 200 s of event time: windows close
    produce(services.kafka_bootstrap, topic, (e.SerializeToString() for e in events), partitions=2)
    out = tmp_path / "out.jsonl"
    spec = surge_spec(services, topic, {"type": "log", "path": str(out)}) | {"trigger_interval": "3600s"}
    spec["streams"][0]["idle_timeout"] = "7200s"  # longer than the interval (jobs/spec.py)
    commits = tmp_path / "checkpoint" / "commits"
    with running(spec_file(spec, tmp_path), tmp_path / "run.log", until=""):
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not (commits / "1").exists():
            time.sleep(0.5)
        assert (commits / "1").exists(), (tmp_path / "run.log").read_text()[-3000:]
        emitted_after_s = (commits / "1").stat().st_mtime - (commits / "0").stat().st_mtime
    assert emitted_after_s < 30, emitted_after_s
    rows, truth = surge_rows(out), surge_truth(events)
    assert rows and all(truth[k] == n for k, n in rows.items())  # the closed windows, whole


def test_a_watermark_that_closes_no_window_runs_no_batch_of_its_own(services: Services, tmp_path: Path) -> None:
    """Spark runs a batch without events after each move of its watermark (to evict what it closed). A query that
    ticks fast ran one after nearly every batch of events, though a window closes once in many. The source gives
    Spark its watermark in whole windows: here every event is in one minute's window, which no batch closes, and
    the watermark moves once, at the first batch: six batches of events, at most one without. The watermark the
    dagger reports is still the stream's own, not the window's end Spark is given."""
    topic = new_topic(services, partitions=2)
    start = START + timedelta(seconds=15)  # 30 s of event time inside one 60 s window; the delay is 10 s
    produce(services.kafka_bootstrap, topic, booking_logs(3_000, seed=84, start=start, rate=100), partitions=2)
    spec = surge_spec(services, topic, {"type": "log", "path": str(tmp_path / "out.jsonl")})
    spec["streams"][0]["kafka"]["max_events_per_trigger"] = 500  # a batch of events a second
    spec["telemetry_url"] = services.victoria_metrics_url
    offsets = tmp_path / "checkpoint" / "offsets"

    def positions() -> list[int]:  # the events read by the end of each batch, in batch order
        ids = sorted(int(f.name) for f in offsets.glob("[0-9]*")) if offsets.is_dir() else []
        lines = [(offsets / str(i)).read_text().splitlines()[2] for i in ids]
        return [sum(SourceOffset.from_json(line).positions.values()) for line in lines]

    with running(spec_file(spec, tmp_path), tmp_path / "run.log", until=""):
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and 3_000 not in positions():
            time.sleep(0.5)
        assert 3_000 in positions(), (tmp_path / "run.log").read_text()[-3000:]
        time.sleep(3)  # a batch without events would follow within a tick (0.25 s)
        read = positions()
    with_events = sum(1 for before, after in zip([0, *read], read, strict=False) if after > before)
    assert with_events >= 6 and len(read) - with_events <= 1, read
    victoria.flush(services.victoria_metrics_url)
    reported = victoria.query(
        services.victoria_metrics_url,
        f'max(max_over_time(dagger_metrics_watermark_ms{{dagger="tests.{spec["name"]}"}}[1y]))',
    )
    # the last events' time (start + 30 s) less the delay (10 s), as the batch was planned (a batch, 5 s of events,
    # behind): not the start of the window Spark is given, 08:00:00
    assert reported is not None and reported / 1000 >= (start + timedelta(seconds=15)).timestamp() - 1, reported
