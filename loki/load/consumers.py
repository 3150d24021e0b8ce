"""The daggers an experiment runs on its load: `local` ones are `dagger run` processes Loki starts (inside their
network link when a network fault aims at them, with their checkpoint on a tmpfs when a disk fault does);
`cluster` ones are deployed on the target's team cluster through the dagger lifecycle. At the end every consumer
is stopped and drained: what is left on its checkpoint is read and every open window closed, so every acknowledged
event is accounted for in the sink. Each drains in the JVM it has, with no second start-up: a local dagger on SIGUSR1,
a cluster's through the lifecycle's stop with a drain. One that could not is stopped, then drained by a
`dagger run --once` on its checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from jobs.engine.status import read_status, status_path
from jobs.lifecycle.daggers import Daggers
from jobs.spec import DaggerSpec, PostgresSink, resolve_streams
from loki.faults.network import Link
from odin.endpoints import Endpoints, Node
from odin.paths import BIN_DIR
from odin.registry import Registry
from odin.registry.records import DaggerRecord
from odin.teams.secrets import TeamSecrets

DRAIN_TIMEOUT_S = 600


class ConsumerError(RuntimeError):
    """A consumer could not start, stop or drain: says which and why (its log is named)."""


@dataclass
class Consumer:
    name: str
    spec: DaggerSpec  # resolved: topics, message and bootstrap servers from the catalog
    placement: str
    spec_file: Path
    log_file: Path
    process: subprocess.Popen[bytes] | None = None
    link: Link | None = None
    disk: Path | None = None  # the tmpfs its checkpoint is on (disk faults)
    cluster: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # what its sink needs to be read: the team's password
    start_up_s: float | None = None  # a cluster consumer's last driver: its start -> first progress (a relaunch's)

    def place(self, daggers: Daggers, cluster: str, actor: str) -> None:
        """A cluster consumer is placed like any deployed dagger (jobs/lifecycle/placement.py): its sink is the team's
        own database, which the drain and the comparison then read with the team's password."""
        sink = self.spec.sink
        if isinstance(sink, PostgresSink):  # the scratch database of local consumers is not a team's
            sink = PostgresSink(table=sink.table)
        asked = self.spec.model_copy(update={"sink": sink, "telemetry_url": None})
        self.spec = daggers.check(asked, cluster, actor).spec
        placed = self.spec.sink
        if isinstance(placed, PostgresSink) and placed.password_env:
            secrets = TeamSecrets(daggers.state_dir).load(self.spec.team)
            self.env = {placed.password_env: secrets.get(placed.password_env, "")}

    @property
    def qualified_name(self) -> str:
        return self.spec.qualified_name

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _ports(nodes: dict[str, Node]) -> list[int]:
    """What a local dagger reaches besides Kafka: the sink's database and the telemetry store."""
    where, ports = Endpoints(nodes), []
    for role, port in (("postgres", "postgres"), ("victoria_metrics", "http"), ("influxdb", "http")):
        with contextlib.suppress(LookupError):
            ports.append(int(where._node(role)["ports"][port]))
    return ports


def _mount_tmpfs(path: Path, size_mb: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "loki-checkpoint", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        raise ConsumerError(f"cannot mount a tmpfs for the checkpoint at {path}: {done.stderr.strip()}")


def prepare(
    name: str,
    spec: DaggerSpec,
    placement: str,
    run_dir: Path,
    registry: Registry,
    *,
    cluster: str | None = None,
    network: bool = False,
    disk_mb: int | None = None,
    nodes: dict[str, Node] | None = None,
) -> Consumer:
    """The consumer's resolved spec written to the run's folder, its link and disk made, nothing started."""
    home = run_dir / "consumers" / name
    home.mkdir(parents=True, exist_ok=True)
    spec = resolve_streams(spec, lambda s: registry.stream(s))
    disk = None
    if disk_mb is not None and placement == "local":
        disk = home / "disk"
        _mount_tmpfs(disk, disk_mb)
        spec = spec.model_copy(update={"checkpoint_dir": disk / "checkpoint"})
    elif placement == "local":
        spec = spec.model_copy(update={"checkpoint_dir": home / "checkpoint"})
    spec_file = home / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
    consumer = Consumer(name, spec, placement, spec_file, home / "dagger.log", disk=disk, cluster=cluster)
    if network and placement == "local":
        kafka = sorted({int(b.rsplit(":", 1)[1]) for s in spec.streams for b in s.kafka.bootstrap_servers.split(",")})
        consumer.link = Link.create(f"loki-{run_dir.name[-12:]}-{name[:8]}", kafka, _ports(nodes or {}))
    return consumer


def start(consumer: Consumer, daggers: Daggers | None, actor: str) -> None:
    if consumer.placement == "cluster":
        assert daggers is not None and consumer.cluster is not None
        daggers.deploy(consumer.spec, consumer.cluster, actor)
        return
    command = [str(BIN_DIR / "dagger"), "run", str(consumer.spec_file)]
    if consumer.link is not None:
        command = consumer.link.wrap(command)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1"}
    with consumer.log_file.open("ab") as log:
        consumer.process = subprocess.Popen(command, stdout=log, stderr=log, env=env, start_new_session=True)


def stop(consumer: Consumer, daggers: Daggers | None, actor: str, timeout_s: float = 120) -> None:
    """Stop it (SIGTERM: after the current batch; the cluster lifecycle's stop), never leaving a process behind."""
    if consumer.placement == "cluster":
        assert daggers is not None
        record = _deployed(consumer, daggers)
        if record is not None and record.state in ("deploying", "running", "stopping", "failed"):
            daggers.stop(consumer.spec.team, consumer.spec.name, actor)
        return
    proc = consumer.process
    if proc is None or proc.poll() is not None:
        return
    # The dagger alone: it stops its query after the batch. Its group holds Spark's JVM and Python workers, which the
    # same signal would end under the running query (it then failed, and stopped with a stack trace).
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        pass
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what it left behind, or all of it if it did not stop in time
        proc.wait(30)


def _deployed(consumer: Consumer, daggers: Daggers) -> DaggerRecord | None:
    """The cluster consumer's record; its driver's start-up noted on the consumer (the report's relaunch figure)."""
    record = daggers.registry.dagger(consumer.spec.team, consumer.spec.name)
    if record is not None and (status := read_status(status_path(Path(record.checkpoint)))) is not None:
        consumer.start_up_s = status.start_up_s
    return record


def drained_in_place(
    consumer: Consumer, daggers: Daggers | None, actor: str, timeout_s: float = DRAIN_TIMEOUT_S
) -> bool:
    """A running dagger told to drain, in the JVM it has: a local one by SIGUSR1 (jobs/engine/runner.py), True once
    it exited 0; a cluster one by the lifecycle's stop with a drain (its driver drains, then ends), True once the
    stop says it drained. False if it was not running, or failed: it is then stopped and drained from its checkpoint
    (`stop`, `drain`), which is exact either way, its sink being idempotent per batch."""
    if consumer.placement == "cluster":
        assert daggers is not None
        team, name = consumer.spec.team, consumer.spec.name
        record = _deployed(consumer, daggers)
        if record is None or record.state not in ("deploying", "running", "stopping"):
            return False
        daggers.stop(team, name, actor, drain_timeout_s=timeout_s)
        stop = next((e for e in daggers.registry.history(f"dagger:{team}/{name}") if e.action == "dagger_stop"), None)
        return stop is not None and stop.detail.get("drain") == "drained"
    proc = consumer.process
    if proc is None or proc.poll() is not None:
        return False
    _clear_disk(consumer)
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGUSR1)
    try:
        return proc.wait(timeout_s) == 0
    except subprocess.TimeoutExpired:
        return False


def _clear_disk(consumer: Consumer) -> None:
    if consumer.disk is not None:
        for leftover in (".loki-filler", ".loki-last-bytes"):  # a disk fault's, if a halt came mid-fault
            (consumer.disk / leftover).unlink(missing_ok=True)


def drain(consumer: Consumer, registry: Registry) -> None:
    """Read what is left on the consumer's checkpoint and close every open window (`dagger run --once`)."""
    spec = consumer.spec
    if consumer.placement == "cluster":
        record = registry.dagger(spec.team, spec.name)
        if record is None:
            raise ConsumerError(f"consumer {consumer.name}: {spec.qualified_name} is not in the registry")
        spec = spec.model_copy(update={"checkpoint_dir": Path(record.checkpoint)})
        consumer.spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
    _clear_disk(consumer)
    started = time.monotonic()
    with consumer.log_file.open("ab") as log:
        done = subprocess.run(
            [str(BIN_DIR / "dagger"), "run", "--once", str(consumer.spec_file)],
            stdout=log,
            stderr=log,
            timeout=DRAIN_TIMEOUT_S,
            env={**os.environ, **consumer.env, "PYTHONUNBUFFERED": "1"},
        )
    if done.returncode != 0:
        raise ConsumerError(
            f"consumer {consumer.name}: draining its checkpoint failed after {time.monotonic() - started:.0f}s; "
            f"see {consumer.log_file}"
        )


def close(consumer: Consumer) -> None:
    """Remove what prepare made outside the run's folder: the network namespace, the tmpfs."""
    if consumer.link is not None:
        consumer.link.close()
        consumer.link = None
    if consumer.disk is not None:
        subprocess.run(["umount", str(consumer.disk)], capture_output=True, timeout=30)
