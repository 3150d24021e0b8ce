"""Faults made real on this machine. Each starts, and reverts itself when its duration ends or the run is halted;
what reverting needs is returned by `start` (and journaled), so `loki halt` can revert the faults of a run whose
process died (`revert_from_journal`).

  kill          SIGKILL a node's process group (a Spark master or worker, a broker: the host is gone) or a driver's
                processes; with `restart`, Odin converges the node back after the downtime.
  pause         SIGSTOP the processes, SIGCONT after the downtime (a hung host or broker).
  broker_loss   kill the broker and bring it back: Tansu keeps topics in memory, so it comes back empty (a data-disk
                loss, which the report shows as such).
  cpu_pressure, memory_pressure   stress-ng (Debian), in a process group of its own.
  disk_full     a file filling the tmpfs Loki mounted for a local consumer's checkpoint.
  network_partition, network_loss iptables rules inside the run's network namespace of a local consumer.
  latency, bandwidth              the run's proxy in front of the broker, inside that namespace (no netem here).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from loki.faults.procs import start_time
from loki.playbook import Case
from loki.resources import Resource

Restore = Callable[[Resource], None]  # brings a killed node back (Odin converges it)
Announce = Callable[[dict[str, Any]], None]  # told what reverts a fault, before it is applied


class FaultError(RuntimeError):
    """A fault that could not be started (what is missing or refused)."""


def _signal(pids: list[int], sig: signal.Signals, group: bool) -> list[int]:
    hit = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            (os.killpg if group else os.kill)(pid, sig)
            hit.append(pid)
    return hit


@dataclass
class Fault:
    """One case's fault on one resource."""

    case: Case
    resource: Resource
    restore: Restore | None = None  # for kill with restart, broker_loss
    link: Any = None  # the consumer's network link (loki.faults.network.Link), for network faults
    disk: Path | None = None  # the consumer's checkpoint filesystem, for disk_full
    undo: dict[str, Any] | None = None  # set by start: what revert needs

    @property
    def group(self) -> bool:
        """Whether the resource's pids lead process groups (Odin's nodes) rather than being single processes."""
        return self.resource.kind in ("spark", "broker")

    def start(self, announce: Announce | None = None) -> dict[str, Any]:
        """Start the fault; returns what reverting it needs. `announce` gets that before anything is applied (the
        watchdog's order: a Loki killed mid-start leaves no fault its watchdog does not know of), and again if
        applying it learnt more (the stressor's process group)."""
        intent = self._intent()
        self.undo = dict(intent)  # from here on a revert undoes whatever part of it was applied
        if announce is not None:
            announce(intent)
        self._apply()
        if announce is not None and self.undo != intent:
            announce(self.undo)
        return self.undo

    def _intent(self) -> dict[str, Any]:
        """What reverting the fault will need, computed before it is applied: reverting it early is harmless (a
        continue of a running process, the removal of a file or rule that is not there)."""
        kind, r = self.case.type, self.resource
        if kind in ("kill", "broker_loss", "pause"):
            pids = r.pids()
            if not pids:
                raise FaultError(f"{r.name}: no live process to {'pause' if kind == 'pause' else 'kill'}")
            if kind != "pause":
                return {"killed": pids}
            starts = {str(p): start_time(p) for p in pids}  # so a revert never continues a pid reused since
            return {"paused": pids, "group": self.group, "starts": starts}
        if kind in ("cpu_pressure", "memory_pressure"):
            return {}  # the stressor's group is known once it runs; stress-ng ends itself (--timeout) regardless
        if kind == "disk_full":
            if self.disk is None:
                raise FaultError(f"{r.name}: disk_full needs a local consumer (its checkpoint is on a tmpfs)")
            return {"filler": str(self.disk / ".loki-filler")}
        if self.link is None:
            raise FaultError(f"{r.name}: the consumer has no network link of the run's")
        if kind in ("network_partition", "network_loss"):
            probability = self.case.magnitude if kind == "network_loss" else None
            return {"netns": self.link.netns, "rules": self.link.rules(probability)}
        return {"proxy": True}  # latency, bandwidth: the proxy lives in Loki's process and ends with it

    def _apply(self) -> None:
        kind, undo = self.case.type, self.undo or {}
        if kind in ("kill", "broker_loss"):
            undo["killed"] = _signal(undo["killed"], signal.SIGKILL, self.group)
        elif kind == "pause":
            _signal(undo["paused"], signal.SIGSTOP, self.group)
        elif kind in ("cpu_pressure", "memory_pressure"):
            self.undo = {"stress_pgid": self._stress()}
        elif kind == "disk_full":
            self._fill(Path(undo["filler"]))
        elif kind in ("network_partition", "network_loss"):
            self.link.add(undo["rules"])
        elif kind == "latency":
            self.link.proxy.shape(delay_ms=self.case.magnitude or 0, jitter_ms=self.case.jitter_ms)
        elif kind == "bandwidth":
            self.link.proxy.shape(bytes_per_s=self.case.magnitude)

    def revert(self) -> None:
        """Undo what start did; safe to call twice, and after a failed start."""
        undo, self.undo = self.undo, None
        if not undo:
            return
        revert(undo, self.link)
        brought_back = self.case.type == "broker_loss" or (self.case.type == "kill" and self.case.restart)
        if brought_back and self.restore is not None:
            self.restore(self.resource)

    def _stress(self) -> int:
        binary = shutil.which("stress-ng")
        if binary is None:
            raise FaultError("stress-ng is not installed (Debian package stress-ng; `make setup` installs it)")
        seconds = max(1, int(self.case.duration.total_seconds()))
        if self.case.type == "cpu_pressure":
            args = ["--cpu", str(int(self.case.magnitude or 1))]
        else:
            mib = int(self.case.magnitude or 64)
            available = psutil.virtual_memory().available // 2**20
            if mib > available // 2:  # the playbook's bound is static; the host keeps at least half of what is free
                raise FaultError(f"memory_pressure: {mib} MiB is more than half of the {available} MiB available now")
            args = ["--vm", "1", "--vm-bytes", f"{mib}M", "--vm-keep"]
        proc = subprocess.Popen(
            [binary, *args, "--timeout", f"{seconds}s", "--quiet"],
            start_new_session=True,  # its own group: revert kills every stressor it forked
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return proc.pid

    @staticmethod
    def _fill(filler: Path) -> None:
        free = shutil.disk_usage(filler.parent).free
        with filler.open("wb") as f:
            os.posix_fallocate(f.fileno(), 0, max(1, free - 4096))
        with contextlib.suppress(OSError), filler.with_name(".loki-last-bytes").open("wb") as f:
            f.write(b"\0" * 8192)  # whatever fallocate left, so nothing is free


def revert(undo: dict[str, Any], link: Any = None) -> None:
    """Revert a fault from what its start returned (also from a journal: `loki halt` of a dead run)."""
    if "paused" in undo:
        starts = undo.get("starts") or {}
        same = [p for p in undo["paused"] if str(p) not in starts or start_time(int(p)) == starts[str(p)]]
        _signal([int(p) for p in same], signal.SIGCONT, bool(undo.get("group", True)))
    if "stress_pgid" in undo:
        _signal([int(undo["stress_pgid"])], signal.SIGKILL, True)
    if "filler" in undo:
        filler = Path(undo["filler"])
        for f in (filler, filler.with_name(".loki-last-bytes")):
            f.unlink(missing_ok=True)
    if "rules" in undo:
        from loki.faults.network import remove_rules

        remove_rules(str(undo["netns"]), list(undo["rules"]))
    if undo.get("proxy") and link is not None:
        link.proxy.shape()
