"""A run's watchdog: a process of its own session that outlives Loki, and ends the run's faults if Loki cannot.

Loki starts it when a run starts (`Watchdog.start`) and keeps its orders, a JSON file in the run's folder, up to
date: each active fault with its deadline and what reverts it (as data), the consumers it started, their network
namespaces and tmpfs mounts. The watchdog reads them every POLL_S and:
  - reverts a fault whose deadline (its end + GRACE_S) has passed and that Loki has not taken back (a Loki that is
    alive but stuck still has its faults end);
  - when Loki's process is gone (a `kill -9`, a killed Airflow task: pid and start time no longer match), or the
    run's time limit has passed: reverts every fault at once, stops the consumers, removes namespaces and mounts,
    journals it and marks the run halted;
  - exits as soon as Loki marks the orders `done` (a normal end: Loki reverted everything itself).
Every loop is bounded by the run's time limit (`until`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from pydantic import BaseModel, Field

from loki.faults.faults import revert
from loki.faults.procs import ProcessId, start_time

POLL_S = 0.5
GRACE_S = 3.0  # Loki reverts at a fault's end; the watchdog only if Loki has not a little later
STOP_WAIT_S = 20.0  # a consumer's SIGTERM, before SIGKILL
LIMIT_MARGIN_S = 900.0  # beyond the run's max_duration: reverts and the drain may take this long


class Restore(BaseModel):
    """What brings a killed node back: Odin's converge of the environment's broker, or of a team cluster."""

    kind: str  # broker, spark
    environment: str
    state_dir: str
    cluster: str | None = None  # team/name for spark


class FaultOrder(BaseModel):
    case: str
    resource: str
    deadline: float  # epoch seconds: the fault's end
    undo: dict[str, Any] = Field(default_factory=dict)
    restore: Restore | None = None
    taken: bool = False  # Loki is reverting it (a converge may take a while): not the watchdog's unless Loki dies


class ConsumerOrder(BaseModel):
    name: str
    pgid: int | None = None  # a local consumer's process group (its own session)
    started: int | None = None  # its leader's start time
    dagger: str | None = None  # team/name of a consumer deployed on a cluster
    netns: str | None = None
    mount: str | None = None


class Orders(BaseModel):
    run_id: str
    owner_pid: int
    owner_started: int
    until: float  # epoch seconds: past it, the run is over whatever Loki says
    registry_url: str | None = None
    state_dir: str = ""
    actor: str = "loki"
    faults: list[FaultOrder] = Field(default_factory=list)
    consumers: list[ConsumerOrder] = Field(default_factory=list)
    done: bool = False


def write(path: Path, orders: Orders) -> None:
    """Atomically: the watchdog never reads half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(orders.model_dump_json())
    tmp.replace(path)


class Watchdog:
    """Loki's side: start the watchdog, keep its orders, tell it the run ended."""

    def __init__(self, path: Path, orders: Orders) -> None:
        self.path, self.orders = path, orders
        self.pid: int | None = None
        self._lock = threading.Lock()  # reverts run in threads of their own

    @classmethod
    def start(cls, path: Path, orders: Orders) -> Watchdog:
        watch = cls(path, orders)
        write(path, orders)
        with path.with_suffix(".log").open("ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "loki.faults.watchdog", str(path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # its own session: a signal to Loki's group or a closed terminal spares it
                close_fds=True,
                cwd="/",
            )
        watch.pid = proc.pid
        return watch

    def update(self, change: Callable[[Orders], None]) -> None:
        with self._lock:
            change(self.orders)
            write(self.path, self.orders)

    def fault(self, order: FaultOrder) -> None:
        """Watch a fault (replacing an earlier order for the same case and resource: its undo, completed)."""
        key = (order.case, order.resource)
        self.update(lambda o: setattr(o, "faults", [*[f for f in o.faults if (f.case, f.resource) != key], order]))

    def take(self, case: str, resource: str) -> None:
        """Loki reverts this fault itself now."""

        def taken(o: Orders) -> None:
            for f in o.faults:
                if (f.case, f.resource) == (case, resource):
                    f.taken = True

        self.update(taken)

    def reverted(self, case: str, resource: str) -> None:
        self.update(lambda o: setattr(o, "faults", [f for f in o.faults if (f.case, f.resource) != (case, resource)]))

    def consumer(self, order: ConsumerOrder) -> None:
        self.update(lambda o: setattr(o, "consumers", [*[c for c in o.consumers if c.name != order.name], order]))

    def done(self) -> None:
        self.update(lambda o: setattr(o, "done", True))


# -- the watchdog process ------------------------------------------------------------------------------------------


def _log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def _journal(orders: Orders, step: str, **detail: Any) -> None:
    """Best effort: the registry may be what failed."""
    if orders.registry_url is None:
        return
    try:
        from loki.store import SimulationStore
        from odin.registry import Registry

        registry = Registry.connect(orders.registry_url, check=False)
        try:
            store = SimulationStore(registry)
            store.journal(orders.run_id, step, by="watchdog", **detail)
            if step == "halted":
                current = store.get(orders.run_id)
                if current is not None and current.state == "running":
                    store.finish(orders.run_id, "halted", summary={"halted_by": f"watchdog: {detail.get('reason')}"})
        finally:
            registry.close()
    except Exception as e:
        _log(f"journal {step}: {type(e).__name__}: {e}")


def _restore(orders: Orders, r: Restore) -> None:
    from odin.spec import Service
    from odin.stack import Stack

    if r.kind == "broker":
        stack = Stack(r.environment, Path(r.state_dir))
        report = stack.up(stack.resolve(None, {Service.kafka_broker}, None))
        _log(f"broker converged: ok={report.ok}")
    elif r.kind == "spark" and r.cluster and orders.registry_url:
        from odin.cluster.lifecycle import Clusters
        from odin.registry import Registry

        registry = Registry.connect(orders.registry_url, check=False)
        try:
            team, name = r.cluster.split("/", 1)
            Clusters(registry, Path(r.state_dir)).heal(team, name, orders.actor, f"loki run {orders.run_id}: watchdog")
        finally:
            registry.close()


def revert_fault(orders: Orders, f: FaultOrder, why: str) -> None:
    _log(f"reverting {f.case} on {f.resource}: {why}")
    try:
        revert(f.undo)
        if f.restore is not None:
            _restore(orders, f.restore)
        _journal(orders, "fault.reverted", case=f.case, resource=f.resource, reason=why)
    except Exception as e:
        _log(f"revert {f.case} on {f.resource}: {type(e).__name__}: {e}")
        _journal(orders, "fault.revert_failed", case=f.case, resource=f.resource, error=str(e))


def _group(pgid: int, started: int) -> list[psutil.Process]:
    """The processes of the consumer's session, not started before its leader (a pid reused since is not it)."""
    out = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if os.getsid(p.pid) == pgid and (start_time(p.pid) or 0) >= started:
                out.append(p)
    return out


def stop_consumer(orders: Orders, c: ConsumerOrder) -> None:
    if c.pgid is not None and c.started is not None:
        procs = _group(c.pgid, c.started)
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(procs, timeout=STOP_WAIT_S)
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(alive, timeout=10)
        _log(f"consumer {c.name}: stopped {len(procs)} process(es)")
    if c.dagger is not None and orders.registry_url:
        with contextlib.suppress(Exception):
            from jobs.lifecycle.daggers import Daggers
            from odin.registry import Registry

            registry = Registry.connect(orders.registry_url, check=False)
            try:
                team, name = c.dagger.split("/", 1)
                Daggers(registry, Path(orders.state_dir)).stop(team, name, orders.actor)
                _log(f"consumer {c.name}: dagger {c.dagger} stopped")
            finally:
                registry.close()
    if c.mount is not None:
        subprocess.run(["umount", "-l", c.mount], capture_output=True, timeout=30)
    if c.netns is not None:
        subprocess.run(["ip", "netns", "del", c.netns], capture_output=True, timeout=30)


def wind_up(orders: Orders, reason: str, done: set[tuple[str, str]]) -> None:
    """Loki is gone (or out of time): end everything it started."""
    for f in orders.faults:
        if (f.case, f.resource) not in done:
            revert_fault(orders, f, reason)
            done.add((f.case, f.resource))
    for c in orders.consumers:
        try:
            stop_consumer(orders, c)
        except Exception as e:
            _log(f"consumer {c.name}: {type(e).__name__}: {e}")
    _journal(orders, "halted", reason=reason)


def watch(path: Path) -> int:
    orders = Orders.model_validate_json(path.read_text())
    owner = ProcessId(orders.owner_pid, orders.owner_started)
    done: set[tuple[str, str]] = set()
    _log(f"watching run {orders.run_id} (loki pid {owner.pid}) until {time.ctime(orders.until)}")
    for _ in range(int((orders.until - time.time()) / POLL_S) + 2):  # bounded by the run's time limit
        with contextlib.suppress(OSError, ValueError):
            orders = Orders.model_validate_json(path.read_text())
        if orders.done:
            _log("loki ended the run itself")
            return 0
        if not owner.alive:
            wind_up(orders, "the loki process is gone", done)
            return 0
        now = time.time()
        for f in orders.faults:
            if not f.taken and (f.case, f.resource) not in done and now >= f.deadline + GRACE_S:
                revert_fault(orders, f, "its duration is over and loki did not revert it")
                done.add((f.case, f.resource))
        time.sleep(POLL_S)
    wind_up(orders, "the run's time limit passed", done)
    return 0


if __name__ == "__main__":  # pragma: no cover - the detached process
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sys.exit(watch(Path(sys.argv[1])))
