"""The processes Ansible started for a node, read back from their pid files (`<run>/<node>@<proc>.pid`).

Pid files hold `<pid> <start time> <spec hash>`; a pid only counts as ours while /proc shows the same start time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Process:
    node: str
    name: str
    pid: int | None  # None: pid file left by a process that is gone

    @property
    def running(self) -> bool:
        return self.pid is not None


def _start_time(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def read(pidfile: Path) -> int | None:
    try:
        pid_s, start, *_spec = pidfile.read_text().split()
        pid = int(pid_s)
    except (OSError, ValueError):
        return None
    return pid if _start_time(pid) == start else None


def of_node(node: dict[str, Any]) -> list[Process]:
    run_dir = Path(node["dirs"]["run"])
    return [
        Process(node["name"], f.stem.split("@", 1)[1], read(f)) for f in sorted(run_dir.glob(f"{node['name']}@*.pid"))
    ]
