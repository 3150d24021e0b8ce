"""A fault tells what reverts it before it is applied: Loki writes that to its watchdog's orders first, so a Loki
stopped or killed at any point of a fault's start leaves no fault the watchdog does not know of."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from loki.faults.faults import Fault, FaultError, revert
from loki.faults.procs import ProcessId, start_time
from loki.faults.watchdog import FaultOrder, Orders, Watchdog
from loki.playbook import Case
from loki.resources import Resource


def _state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2]


def _settled(pid: int, states: str, timeout_s: float = 10.0) -> str:
    """The process's state once it is one of `states`: a signal takes effect when the process is next scheduled."""
    deadline = time.monotonic() + timeout_s
    while _state(pid) not in states and time.monotonic() < deadline:
        time.sleep(0.05)
    return _state(pid)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[dict[str, Any], int]]:
    """An Odin-like node: one process group of its own, its pid file where Odin keeps them."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    run = tmp_path / "run"
    run.mkdir()
    (run / "broker-1@kafka.pid").write_text(f"{proc.pid} {start_time(proc.pid)} spec")  # Odin's pid file
    try:
        yield {"name": "broker-1", "dirs": {"run": str(run)}}, proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _pause(node: dict[str, Any]) -> Fault:
    case = Case(name="p", type="pause", target="broker/kafka", start=timedelta(0), duration=timedelta(seconds=5))
    return Fault(case, Resource("broker/kafka", node=node))


def test_a_pause_is_announced_with_its_undo_before_the_process_stops(node: tuple[dict[str, Any], int]) -> None:
    spec, pid = node
    announced: list[tuple[dict[str, Any], str]] = []
    fault = _pause(spec)
    undo = fault.start(announce=lambda u: announced.append((json.loads(json.dumps(u)), _state(pid))))
    [(_, state)] = announced  # once
    assert state != "T", "announced while the process still ran (sleeping, or running as it just started)"
    assert announced[0][0] == json.loads(json.dumps(undo)) and undo["paused"] == [pid]
    assert _settled(pid, "T") == "T"
    revert(announced[0][0])  # what the watchdog runs, from the order alone
    assert _settled(pid, "SR") in "SR"


def test_a_fault_with_nothing_to_hit_is_refused_before_anything_is_announced(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    fault = _pause({"name": "broker-1", "dirs": {"run": str(tmp_path / "run")}})
    announced: list[dict[str, Any]] = []
    with pytest.raises(FaultError, match="no live process to pause"):
        fault.start(announce=announced.append)
    assert announced == [] and fault.undo is None


def test_a_watchdog_ends_a_fault_whose_loki_died_right_after_announcing_it(
    node: tuple[dict[str, Any], int], tmp_path: Path
) -> None:
    """A stand-in Loki (a child process) announces a pause to its watchdog, applies it, and is killed before it does
    anything more: the watchdog continues the process once the owner is gone."""
    spec, pid = node
    orders = tmp_path / "watchdog.json"
    script = f"""
import json, os, signal, time
from datetime import timedelta
from pathlib import Path
from loki.faults.faults import Fault
from loki.faults.procs import ProcessId
from loki.faults.watchdog import FaultOrder, Orders, Watchdog
from loki.playbook import Case
from loki.resources import Resource
me = ProcessId.me()
watch = Watchdog.start(Path({str(orders)!r}), Orders(run_id="t", owner_pid=me.pid, owner_started=me.started,
                                                until=time.time() + 120))
case = Case(name="p", type="pause", target="broker/kafka", start=timedelta(0), duration=timedelta(seconds=60))
fault = Fault(case, Resource("broker/kafka", node=json.loads({json.dumps(json.dumps(spec))})))
fault.start(announce=lambda u: watch.fault(FaultOrder(case="p", resource="broker/kafka",
                                                      deadline=time.time() + 60, undo=u)))
print(watch.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    loki = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent.parent
    )
    assert loki.returncode == -signal.SIGKILL, loki.stderr
    watchdog = int(loki.stdout.split()[0])
    try:
        log, deadline = orders.with_suffix(".log"), time.monotonic() + 20
        while "reverting p on broker/kafka" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "reverting p on broker/kafka" in log.read_text(), log.read_text()
        assert _settled(pid, "SR") in "SR", "the watchdog did not continue the paused process"
    finally:
        if ProcessId.of(watchdog) is not None:
            os.kill(watchdog, signal.SIGKILL)


def test_a_second_order_for_the_same_fault_replaces_the_first(tmp_path: Path) -> None:
    """A stressor's process group is known only once it runs: its fault is announced again, completed."""
    me = ProcessId.me()
    watch = Watchdog(tmp_path / "w.json", Orders(run_id="t", owner_pid=me.pid, owner_started=me.started, until=0))
    watch.fault(FaultOrder(case="c", resource="r", deadline=1, undo={}))
    watch.fault(FaultOrder(case="c", resource="r", deadline=1, undo={"stress_pgid": 42}))
    watch.fault(FaultOrder(case="c", resource="other", deadline=1, undo={}))
    saved = Orders.model_validate_json((tmp_path / "w.json").read_text())
    assert [(f.resource, f.undo) for f in saved.faults] == [("r", {"stress_pgid": 42}), ("other", {})]
