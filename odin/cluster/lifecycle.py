"""Team clusters: create, scale, destroy. spec → Terraform plan (logged) → apply → Ansible → health → registry.

Each cluster is its own Terraform root instance (terraform/clusters/<environment>, the spark_cluster module) with
its own state, and its own directory `<state>/clusters/<team>/<name>/` (Terraform state, REST secret, the nodes'
data, logs and pids). Locally, its processes share loopback in a block of ports the registry records. Every call
ends in one history entry (ok, refused before anything was touched, or failed).
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from odin import form_choices, processes
from odin.cluster.health import ClusterHealth, check_cluster, wait_healthy
from odin.cluster.secret import ensure_secret, secret_file
from odin.cluster.spec import ClusterSpec
from odin.models import format_errors
from odin.paths import TERRAFORM_DIR
from odin.ports import free_block
from odin.provision import converged
from odin.provision.ansible import SKIPPED, PlaybookResult, run_playbook
from odin.provision.inventory import build_inventory
from odin.provision.terraform import Plan, Terraform
from odin.registry import Refused, Registry
from odin.registry.records import ClusterRecord, DaggerRecord
from odin.stack import extravars

PORT_BLOCK = 48  # terraform/modules/spark_cluster: 5 masters x 3, ZooKeeper, 16 workers x 2
HEALTH_TIMEOUT_S = 90.0
Progress = Callable[[str], None]
Node = dict[str, Any]
# What destroy does with daggers still running: stop them, or move them to another cluster of the team.
Relocate = Callable[[list[DaggerRecord], str | None], None]
TENANTS = "odin.cluster_tenants"  # the entry point group of what runs on clusters and moves off them (the daggers')


def tenants(registry: Registry, state_dir: Path, actor: str, log: Progress) -> Relocate:
    """What stops or moves the daggers still on a cluster being destroyed, from the installed dagger lifecycle
    (pyproject.toml's entry point): Odin provisions clusters and does not import what runs on them."""
    found = entry_points(group=TENANTS, name="daggers")
    if not found:
        raise Refused(f"stopping or moving daggers needs the dagger lifecycle's entry point ({TENANTS}): make setup")
    make: Callable[[Registry, Path, str, Progress], Relocate] = next(iter(found)).load()
    return make(registry, state_dir, actor, log)


class ClusterError(RuntimeError):
    """Provisioning failed part way; the message says where, and the registry has the cluster as `failed`."""


@dataclass(frozen=True)
class ClusterReport:
    record: ClusterRecord
    plan_summary: str
    playbook: PlaybookResult | None
    converged: list[str] = field(default_factory=list)  # the nodes Ansible ran on (changed, or a process down)


class Clusters:
    def __init__(self, registry: Registry, state_dir: Path, progress: Progress | None = None) -> None:
        self.registry = registry
        self.state_dir = state_dir
        self.say: Progress = progress or (lambda _msg: None)

    # -- where a cluster lives ----------------------------------------------------------------------------------

    def root(self, team: str, name: str) -> Path:
        return self.state_dir / "clusters" / team / name

    def secret_file(self, team: str, name: str) -> Path:
        return secret_file(self.state_dir, team, name)

    def _terraform(self, spec: ClusterSpec) -> Terraform:
        return Terraform(
            spec.environment,
            self.state_dir,
            config_dir=TERRAFORM_DIR / "clusters" / spec.environment,
            work_dir=self.root(spec.team, spec.name) / "terraform",
        )

    def _variables(self, spec: ClusterSpec, port_base: int | None) -> dict[str, Any]:
        variables: dict[str, Any] = {
            "cluster": spec.qualified_name,
            "masters": spec.masters,
            "workers": spec.workers,
            "worker_cores": spec.worker_cores,
            "worker_memory": spec.worker_memory,
        }
        if spec.environment == "local":
            variables |= {"base_dir": str(self.root(spec.team, spec.name)), "port_base": port_base}
        elif spec.gcp is not None:
            variables |= spec.gcp.model_dump()
        return variables

    # -- commands -----------------------------------------------------------------------------------------------

    def create(self, spec: ClusterSpec, actor: str) -> ClusterReport:
        subject = f"cluster:{spec.qualified_name}"
        with self.registry.action(actor, "cluster_create", subject, **spec.model_dump(exclude={"gcp"})) as detail:
            known = self.registry.cluster(spec.team, spec.name)
            if known is not None and known.state not in ("destroyed", "failed"):
                raise Refused(f"cluster {spec.qualified_name} exists ({known.state}): scale it, or destroy it first")
            if spec.team not in self.registry.teams():
                raise Refused(f"team {spec.team!r} is not in the registry: add it first (odin team add)")
            self._preflight(spec)
            retried = known.addresses.get("port_base") if known is not None and known.state == "failed" else None
            port_base = retried or (self._allocate_ports(spec) if spec.environment == "local" else None)
            record = ClusterRecord(
                team=spec.team,
                name=spec.name,
                environment=spec.environment,
                masters=spec.masters,
                workers=spec.workers,
                worker_cores=spec.worker_cores,
                worker_memory=spec.worker_memory,
                state="provisioning",
                terraform_state=str(self.root(spec.team, spec.name) / "terraform"),
                addresses={"port_base": port_base} if port_base is not None else {},
            )
            self.registry.put_cluster(record)
            report = self._converge(spec, record, detail)
        return report

    def scale(self, team: str, name: str, workers: int, actor: str) -> ClusterReport:
        subject = f"cluster:{team}/{name}"
        with self.registry.action(actor, "cluster_scale", subject, workers=workers) as detail:
            record = self._existing(team, name)
            if record.state not in ("ready", "failed"):
                raise Refused(f"cluster {team}/{name} is {record.state}: scale it once it is ready")
            try:
                spec = ClusterSpec.model_validate({**self.spec_of(record).model_dump(), "workers": workers})
            except ValidationError as e:
                raise Refused(format_errors(e)) from None
            detail["from"] = record.workers
            self.registry.set_cluster_state(team, name, "provisioning", workers=workers)
            report = self._converge(spec, record.model_copy(update={"workers": workers}), detail)
        return report

    def heal(self, team: str, name: str, actor: str, reason: str) -> ClusterReport:
        """Bring a cluster's dead masters and workers back: the same converge as create, on its recorded spec
        (Ansible starts what is not running and leaves the rest alone)."""
        subject = f"cluster:{team}/{name}"
        with self.registry.action(actor, "cluster_heal", subject, reason=reason) as detail:
            record = self._existing(team, name)
            if record.state not in ("ready", "failed"):
                raise Refused(f"cluster {team}/{name} is {record.state}: heal it once it is ready or failed")
            return self._converge(self.spec_of(record), record, detail)

    def nodes(self, team: str, name: str) -> dict[str, Node]:
        """The cluster's nodes, from its own Terraform state."""
        nodes: dict[str, Node] = self._terraform(self.spec_of(self._existing(team, name))).outputs().get("nodes", {})
        return nodes

    def check(self, team: str, name: str) -> ClusterHealth:
        record = self._existing(team, name)
        return check_cluster(self.nodes(team, name), record.workers)

    def stop(self, team: str, name: str) -> int:
        """Stop the cluster's processes (its drivers with their workers), as `odin down` stops its environment's; the
        registry keeps the cluster as it was, so the first health check after `odin up` heals it. Returns how many
        nodes it has."""
        record = self._existing(team, name)
        nodes = self.nodes(team, name)
        if nodes:
            stopped = self._playbook("stop.yml", nodes, self.spec_of(record))
            if not stopped.ok:
                raise ClusterError(f"could not stop {team}/{name}: {stopped.failures}")
        return len(nodes)

    def destroy(
        self,
        team: str,
        name: str,
        actor: str,
        *,
        stop_daggers: bool = False,
        move_daggers_to: str | None = None,
        relocate: Relocate | None = None,
    ) -> None:
        subject = f"cluster:{team}/{name}"
        with self.registry.action(actor, "cluster_destroy", subject) as detail:
            record = self._existing(team, name)
            running = self.registry.daggers(team=team, cluster=name, states=("deploying", "running"))
            if running:
                names = ", ".join(d.name for d in running)
                if not (stop_daggers or move_daggers_to):
                    raise Refused(
                        f"{len(running)} dagger(s) run on {team}/{name} ({names}): stop them first, or destroy "
                        "with stop_daggers: true or move_daggers_to: <another cluster of the team>"
                    )
                if move_daggers_to == name:
                    raise Refused(f"move_daggers_to: {name} is the cluster being destroyed")
                if move_daggers_to is not None and self._ready(team, move_daggers_to) is None:
                    raise Refused(f"move_daggers_to: {team} has no ready cluster {move_daggers_to!r}")
                relocate = relocate or tenants(self.registry, self.state_dir, actor, self.say)
                detail["daggers"] = names
                relocate(running, move_daggers_to)
            self.registry.set_cluster_state(team, name, "destroying")
            spec = self.spec_of(record)
            tf = self._terraform(spec)
            nodes = tf.outputs().get("nodes", {})
            if nodes:
                self.say("stopping the cluster's processes")
                stopped = self._playbook("stop.yml", nodes, spec)
                if not stopped.ok:
                    raise ClusterError(f"could not stop {team}/{name}: {stopped.failures}")
            self.say("terraform destroy")
            tf.apply(tf.plan(self._variables(spec, record.addresses.get("port_base")), destroy=True))
            shutil.rmtree(self.root(team, name), ignore_errors=True)
            self.registry.set_cluster_state(team, name, "destroyed", addresses={})
            form_choices.refresh(self.registry, self.state_dir)

    # -- steps ----------------------------------------------------------------------------------------------

    def _converge(self, spec: ClusterSpec, record: ClusterRecord, detail: dict[str, Any]) -> ClusterReport:
        try:
            tf = self._terraform(spec)
            before: dict[str, Node] = tf.outputs().get("nodes", {})
            plan = tf.plan(self._variables(spec, record.addresses.get("port_base")))
            detail["terraform"] = plan.summary()
            self.say(f"terraform plan: {plan.summary()}")
            self._log_plan(plan)
            if not plan.empty:
                tf.apply(plan)
            nodes: dict[str, Node] = plan.outputs["nodes"]
            removed = {n: before[n] for n in sorted(set(before) - set(nodes))}
            if removed:
                self.say(f"stopping removed nodes: {', '.join(removed)}")
                gone = self._playbook("stop.yml", removed, spec)
                if not gone.ok:
                    raise ClusterError(f"could not stop removed nodes: {gone.failures}")
                self._last_converge(spec).forget(set(removed))
            result, todo = self._converge_nodes(spec, nodes)
            if not result.ok:
                failures = "; ".join(f"{f.host}/{f.task}: {f.message}" for f in result.failures)
                raise ClusterError(f"ansible could not converge {spec.qualified_name}: {failures}")
            self.say("health check")
            problems = wait_healthy(nodes, spec.workers, HEALTH_TIMEOUT_S)
            if problems:
                raise ClusterError(f"{spec.qualified_name} is not healthy: {'; '.join(problems)}")
        except BaseException:
            self.registry.set_cluster_state(spec.team, spec.name, "failed")
            raise
        addresses = {**record.addresses, **plan.outputs["addresses"]}
        self.registry.set_cluster_state(spec.team, spec.name, "ready", addresses=addresses, workers=spec.workers)
        form_choices.refresh(self.registry, self.state_dir)
        ready = self.registry.cluster(spec.team, spec.name)
        assert ready is not None
        return ClusterReport(ready, plan.summary(), result, sorted(todo))

    def _log_plan(self, plan: Plan) -> None:
        for change in plan.changes:
            self.say(f"  {'/'.join(change.actions)} {change.address}")

    def _converge_nodes(self, spec: ClusterSpec, nodes: dict[str, Node]) -> tuple[PlaybookResult, set[str]]:
        """`cluster.yml` on the nodes whose inputs changed since their last successful converge or with a process
        not running (odin/provision/converged.py): a heal after a worker's loss converges that worker. A cluster on
        remote hosts converges every node: its pid files are there, not here. Returns the nodes it converged."""
        secret = self.secret_file(spec.team, spec.name)
        ensure_secret(secret)
        inventory, variables = build_inventory(nodes), self._extravars(spec)
        digests = converged.node_digests("cluster.yml", inventory, variables, [*converged.inputs(), secret])
        last = self._last_converge(spec)
        if spec.environment != "local":
            todo = set(nodes)
        else:
            down = {n for n, node in nodes.items() if not all(p.running for p in processes.of_node(node))}
            todo = last.stale(digests) | down
        if not todo:
            self.say("ansible: every node is converged and running")
            return PlaybookResult("cluster.yml", SKIPPED, 0), todo
        private = self.root(spec.team, spec.name) / "ansible"
        result = last.converge(
            todo,
            digests,
            lambda limit: run_playbook("cluster.yml", inventory, variables, private, limit=limit, on_task=self.say),
        )
        return result, todo

    def _last_converge(self, spec: ClusterSpec) -> converged.LastConverge:
        return converged.LastConverge(self.root(spec.team, spec.name), "cluster")

    def _extravars(self, spec: ClusterSpec) -> dict[str, Any]:
        return extravars(spec.environment, self.state_dir) | {
            "odin_cluster_secret_file": str(self.secret_file(spec.team, spec.name))
        }

    def _playbook(self, playbook: str, nodes: dict[str, Node], spec: ClusterSpec) -> PlaybookResult:
        private = self.root(spec.team, spec.name) / "ansible"
        return run_playbook(playbook, build_inventory(nodes), self._extravars(spec), private, on_task=self.say)

    def _preflight(self, spec: ClusterSpec) -> None:
        """Environment gcp needs what cannot be fetched here: say what, before anything is changed."""
        if spec.environment != "gcp":
            return
        missing = []
        if not _google_provider_available():
            missing.append(
                "the Terraform provider hashicorp/google (this machine cannot download it: put it in a plugin "
                "mirror, e.g. ~/.terraform.d/plugins/registry.terraform.io/hashicorp/google/)"
            )
        credentials = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        if not (credentials and Path(credentials).is_file()) and not os.environ.get("GOOGLE_CREDENTIALS"):
            missing.append("GCP credentials (GOOGLE_APPLICATION_CREDENTIALS: a service account key file)")
        if missing:
            raise Refused(f"environment gcp cannot be provisioned from here; missing: {'; '.join(missing)}")

    def _allocate_ports(self, spec: ClusterSpec) -> int:
        """A block of PORT_BLOCK free loopback ports that no other registered cluster holds."""
        taken: set[int] = set()
        for c in self.registry.clusters():
            base = c.addresses.get("port_base")
            if isinstance(base, int) and c.state != "destroyed":
                taken.update(range(base, base + PORT_BLOCK))
        return free_block(PORT_BLOCK, taken, random.Random())

    def _existing(self, team: str, name: str) -> ClusterRecord:
        record = self.registry.cluster(team, name)
        if record is None or record.state == "destroyed":
            raise Refused(f"no cluster {team}/{name} (odin cluster list)")
        return record

    def _ready(self, team: str, name: str) -> ClusterRecord | None:
        record = self.registry.cluster(team, name)
        return record if record is not None and record.state == "ready" else None

    @staticmethod
    def spec_of(record: ClusterRecord) -> ClusterSpec:
        return ClusterSpec(
            team=record.team,
            name=record.name,
            environment=record.environment,  # type: ignore[arg-type]
            masters=record.masters,
            workers=record.workers,
            worker_cores=record.worker_cores,
            worker_memory=record.worker_memory,
        )


def _google_provider_available() -> bool:
    roots = [Path(os.environ.get("TF_PLUGIN_CACHE_DIR", "/nonexistent")), Path.home() / ".terraform.d" / "plugins"]
    return any((r / "registry.terraform.io" / "hashicorp" / "google").is_dir() for r in roots)
