"""Free 127.0.0.1 ports for isolated stacks (tests, benchmarks), so they never collide with `make up` or each other."""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import get_args

from odin.spec import PortName

WORKER_SLOTS = 16  # spark_worker / spark_worker_ui are bases: worker i listens on base + i


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports: any connection may take one at any time."""
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return low, high


# Blocks chosen by live processes on this machine, one file `<base>-<size>-<pid>` each. A port is free to bind from
# its choice until its service starts, and again whenever that service is down (a killed worker, a broker Loki
# restarts): without these, another process's stack or team cluster could take it then (seen with two test workers).
RESERVATIONS = Path(tempfile.gettempdir()) / "daggers-ports"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def _reserved() -> Iterator[set[int]]:
    """The ports live processes reserved, under a machine-wide lock; stale reservations are removed."""
    RESERVATIONS.mkdir(parents=True, exist_ok=True)
    with (RESERVATIONS / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        held: set[int] = set()
        for entry in RESERVATIONS.glob("*-*-*"):
            base, size, pid = (int(x) for x in entry.name.split("-"))
            if _alive(pid):
                held.update(range(base, base + size))
            else:
                entry.unlink(missing_ok=True)
        yield held


def free_block(size: int, taken: set[int], rng: random.Random) -> int:
    """First port of `size` consecutive free ports (bounded search), below the ephemeral range: a port chosen
    there can be taken by an outgoing connection before its service starts. The block stays reserved for as long as
    this process lives, so no other process on the machine chooses it meanwhile."""
    low, high = _ephemeral()
    top = low if low - size > 10000 else 65000  # below it, or above it when it starts too low
    bottom = 10000 if top == low else high + 1
    with _reserved() as held:
        held |= taken
        for _ in range(500):
            base = rng.randrange(bottom, top - size)
            block = range(base, base + size)
            if not held.intersection(block) and all(_free(p) for p in block):
                taken.update(block)
                (RESERVATIONS / f"{base}-{size}-{os.getpid()}").touch()
                return base
    raise RuntimeError(f"no block of {size} free ports found on 127.0.0.1")


def stack_ports() -> dict[str, int]:
    """A port for every name the local environment accepts in `ports`."""
    rng = random.Random()
    taken: set[int] = set()
    bases = {"spark_worker", "spark_worker_ui"}
    ports = {name: free_block(1, taken, rng) for name in get_args(PortName) if name not in bases}
    # Worker i uses base + i (i from 1): reserve the base too so nothing else gets it.
    ports["spark_worker"] = free_block(WORKER_SLOTS + 1, taken, rng)
    ports["spark_worker_ui"] = free_block(WORKER_SLOTS + 1, taken, rng)
    return ports
