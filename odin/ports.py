"""Free 127.0.0.1 ports for isolated stacks (tests, benchmarks), so they never collide with `make up` or each other."""

from __future__ import annotations

import random
import socket
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


def free_block(size: int, taken: set[int], rng: random.Random) -> int:
    """First port of `size` consecutive free ports (bounded search), below the ephemeral range: a port chosen
    there can be taken by an outgoing connection before its service starts."""
    low, high = _ephemeral()
    top = low if low - size > 10000 else 65000  # below it, or above it when it starts too low
    bottom = 10000 if top == low else high + 1
    for _ in range(500):
        base = rng.randrange(bottom, top - size)
        block = range(base, base + size)
        if not taken.intersection(block) and all(_free(p) for p in block):
            taken.update(block)
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
