"""Free 127.0.0.1 ports for isolated stacks (tests, benchmarks), so they never collide with `make up` or each other."""

from __future__ import annotations

import random
import socket
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


def free_block(size: int, taken: set[int], rng: random.Random) -> int:
    """First port of `size` consecutive free ports (bounded search)."""
    for _ in range(500):
        base = rng.randrange(20000, 60000 - size)
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
