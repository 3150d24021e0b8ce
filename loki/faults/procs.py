"""A process named by its pid *and* its start time: a pid alone may have been reused by another process since it was
recorded (a Loki run that died hours ago), and signalling that one would hit a stranger."""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (clock ticks after boot); None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            raw = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: fields after the last ')' are fixed
    return int(raw[raw.rindex(")") + 2 :].split()[19])


@dataclass(frozen=True)
class ProcessId:
    pid: int
    started: int

    @classmethod
    def of(cls, pid: int) -> ProcessId | None:
        started = start_time(pid)
        return None if started is None else cls(pid, started)

    @classmethod
    def me(cls) -> ProcessId:
        found = cls.of(os.getpid())
        assert found is not None
        return found

    @property
    def alive(self) -> bool:
        """The same process still runs (a zombie counts as gone)."""
        if start_time(self.pid) != self.started:
            return False
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                raw = f.read()
        except OSError:
            return False
        return raw[raw.rindex(")") + 2] != "Z"

    def signal(self, sig: signal.Signals) -> bool:
        """Send `sig` if it is still the same process; whether it was sent."""
        if not self.alive:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)
            return True
        return False
