"""What an experiment could touch in an environment, by name: Odin's nodes, team clusters, running daggers, topics.

Names are paths a playbook's `blast_radius` and fault targets match with globs:
  broker/<node>                   a Kafka broker of the environment (the perf cluster's, for broker faults)
  spark/<team>/<cluster>/<node>   a master or worker of a team cluster
  spark/<team>/<cluster>/active-master   whichever of its masters leads when the run is planned
  spark/<team>/<cluster>/worker-of/<dagger>   the worker running a dagger's driver when the fault starts
  driver/<team>/<dagger>          the driver of a dagger running on a team cluster
  topic/<topic>                   a topic of the catalog
  host/<environment>              the machine(s) of the environment (CPU and memory pressure)
  dagger/<consumer>, link/<consumer>   a consumer the run starts, and its network path to Kafka (planned only)
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from confluent_kafka.admin import AdminClient

from jobs.lifecycle.daggers import followed
from odin import processes
from odin.cluster.health import check_cluster
from odin.cluster.lifecycle import Clusters
from odin.endpoints import Node
from odin.registry import Registry

TIMEOUT_S = 5.0
ACTIVE_MASTER = "active-master"
WORKER_OF = "worker-of"


@dataclass(frozen=True)
class Resource:
    name: str
    detail: str = ""
    node: Node | None = None  # the Odin node it is (or runs on): where its processes' pid files are
    cluster: str | None = None  # team/cluster of a Spark node or driver
    submission_id: str | None = None  # a driver's
    topics: frozenset[str] | None = field(default_factory=frozenset)  # a broker's, as it lists them; None: unknown
    address: str | None = None  # a broker's host:port

    @property
    def kind(self) -> str:
        return self.name.split("/", 1)[0]

    def pids(self) -> list[int]:
        """Its live processes' ids now: the node's process groups, or a driver's JVM and its Python."""
        if self.kind == "driver" and self.node is not None and self.submission_id:
            workers = [p.pid for p in processes.of_node(self.node) if p.pid]
            return [p.pid for p in driver_processes(workers, self.submission_id)]
        if self.node is not None:
            return [p.pid for p in processes.of_node(self.node) if p.pid]
        return []


def driver_processes(worker_pids: list[int], submission_id: str) -> list[psutil.Process]:
    """A cluster-mode driver's JVM (Spark's DriverWrapper, run in its worker's work/<submission id> directory)
    and its children (the dagger's Python)."""
    for worker in worker_pids:
        try:
            children = psutil.Process(worker).children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        for p in children:
            try:
                if "DriverWrapper" in " ".join(p.cmdline()) and Path(p.cwd()).name == submission_id:
                    return [p, *p.children(recursive=True)]
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
    return []


def broker_topics(bootstrap: str) -> frozenset[str] | None:
    """The topics a broker holds (internal ones aside); None when it does not answer."""
    try:
        listed = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000}).list_topics(timeout=TIMEOUT_S)
    except Exception:
        return None
    return frozenset(t for t in listed.topics if not t.startswith("__"))


def inventory(environment: str, nodes: dict[str, Node], registry: Registry, state_dir: Path) -> list[Resource]:
    """Every resource of the environment an experiment could name, sorted by name."""
    found: list[Resource] = [Resource(f"host/{environment}", "CPU and memory of the environment's machine")]
    for node in nodes.values():
        if node["role"] == "kafka_broker":
            bootstrap = f"{node['host']}:{node['ports']['kafka']}"
            topics = broker_topics(bootstrap)
            detail = f"{bootstrap}, " + ("not answering" if topics is None else f"{len(topics)} topic(s)")
            # `topics` None when it does not answer: what it holds is unknown, never taken as nothing
            found.append(Resource(f"broker/{node['name']}", detail, node=node, topics=topics, address=bootstrap))
    clusters = Clusters(registry, state_dir)
    workers_of: dict[str, list[Node]] = {}
    for c in registry.clusters(states=("ready", "failed")):
        if c.environment != environment:
            continue
        nodes_of = clusters.nodes(c.team, c.name)
        for node in nodes_of.values():
            role = node["role"].removeprefix("spark_")
            found.append(Resource(f"spark/{c.team}/{c.name}/{node['name']}", role, node=node, cluster=c.qualified_name))
            if node["role"] == "spark_worker":
                workers_of.setdefault(c.qualified_name, []).append(node)
        active = check_cluster(nodes_of, c.workers).active_master
        if active is not None:  # which master leads is known only now: the alias names it for a fault
            found.append(
                Resource(f"spark/{c.team}/{c.name}/{ACTIVE_MASTER}", f"master (active: {active})",
                         node=nodes_of[active], cluster=c.qualified_name)
            )  # fmt: skip
    for d in (followed(registry, d) for d in registry.daggers(states=("running",))):
        if d.cluster is None or d.submission_id is None:
            continue
        for worker in workers_of.get(d.cluster, []):
            resource = Resource(
                f"driver/{d.team}/{d.name}",
                f"driver {d.submission_id} on {d.cluster}",
                node=worker,
                cluster=d.cluster,
                submission_id=d.submission_id,
            )
            if resource.pids():  # the worker that runs it
                found.append(resource)
                break
    for s in registry.streams():
        for t in s.topics:
            found.append(Resource(f"topic/{t}", f"{s.name}" + (" (perf)" if s.perf_twin_of else "")))
    return sorted(found, key=lambda r: r.name)


def matching(pattern: str, resources: list[Resource]) -> list[Resource]:
    return [r for r in resources if fnmatch.fnmatchcase(r.name, pattern)]


def covered(name: str, blast_radius: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, glob) for glob in blast_radius)


def environment_nodes(environment: str, state_dir: Path | None) -> tuple[dict[str, Node], Path]:
    """The environment's nodes (Odin's Terraform outputs) and its state directory."""
    from odin.stack import Stack

    stack = Stack(environment, state_dir)
    return stack.nodes(), stack.state_dir
