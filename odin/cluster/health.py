"""Health of a team's Spark cluster, as its masters report it and as its processes are: every master reachable, one
active (the others standby), the declared workers ALIVE with it, and every node's processes running.

The masters' view lags (a worker is dead to them only after `spark.worker.timeout`); a node's own processes, read
back from their pid files (odin/processes.py), show a kill at once, so both are asked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from odin.apis import http_client
from odin.processes import of_node

Node = dict[str, Any]
TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ClusterHealth:
    masters: int  # declared
    workers: int  # declared
    active_master: str | None = None
    alive_workers: frozenset[str] = frozenset()  # host:port of workers ALIVE on the active master, process running
    down: tuple[str, ...] = ()  # nodes with a process that is not running
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems


def _master_doc(node: Node) -> dict[str, Any]:
    doc: dict[str, Any] = http_client.get(
        f"http://{node['host']}:{node['ports']['ui']}/json/", timeout=TIMEOUT_S
    ).json()
    return doc


def check_cluster(nodes: dict[str, Node], workers: int) -> ClusterHealth:
    """Never raises: what cannot be reached is a problem, with the reason."""
    problems: list[str] = []
    down = tuple(sorted(name for name, node in nodes.items() if not all(p.running for p in of_node(node))))
    problems += [f"{name}: process not running" for name in down]
    masters = {name: node for name, node in sorted(nodes.items()) if node["role"] == "spark_master"}
    alive: list[tuple[str, dict[str, Any]]] = []
    for name, node in masters.items():
        if name in down:
            continue
        try:
            doc = _master_doc(node)
        except (httpx.HTTPError, ValueError) as e:
            problems.append(f"{name}: {type(e).__name__}: {e}")
            continue
        if doc.get("status") == "ALIVE":
            alive.append((name, doc))
        elif doc.get("status") != "STANDBY":
            problems.append(f"{name}: {doc.get('status')}")
    active, alive_workers = None, frozenset[str]()
    if len(alive) != 1:
        problems.append(f"{len(alive)} masters ALIVE ({', '.join(n for n, _ in alive) or 'none'}), expected 1")
    else:
        active, doc = alive[0]
        # a worker whose process is gone is dead, even while the master still waits out its heartbeat
        gone = {(nodes[n]["host"], nodes[n]["ports"].get("worker")) for n in down}
        alive_workers = frozenset(
            f"{w['host']}:{w['port']}"
            for w in doc.get("workers", [])
            if w.get("state") == "ALIVE" and (w["host"], w["port"]) not in gone
        )
        if len(alive_workers) < workers:
            problems.append(f"{len(alive_workers)} of {workers} workers ALIVE on {active}")
    return ClusterHealth(len(masters), workers, active, alive_workers, down, tuple(problems))


def health(nodes: dict[str, Node], workers: int) -> list[str]:
    """What is wrong with a cluster; nothing when it is healthy."""
    return list(check_cluster(nodes, workers).problems)


def wait_healthy(nodes: dict[str, Node], workers: int, timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    problems = health(nodes, workers)
    while problems and time.monotonic() < deadline:
        time.sleep(1)
        problems = health(nodes, workers)
    return problems
