"""A dagger's life on its team's cluster: deploy, stop, update, list. spec → checks → submit → progress → registry.

Deploy submits jobs/engine/driver.py in cluster mode through the cluster's REST API (supervised: the master relaunches a
driver that fails, from its checkpoint) and waits for the query's first progress in the driver's status file
(jobs/engine/status.py). Airflow does the waiting in a trigger (dags/provider/operators/daggers.py); the CLI and tests
poll with the same verdict (`started`). Every call ends in one history entry; refusals come before anything is touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from jobs.engine.status import DaggerStatus, claim, owner, read_status, request_drain, run_alive, status_path
from jobs.lifecycle import START_TIMEOUT_S
from jobs.lifecycle.logs import (
    FileLog,
    LogSource,
    LogType,
    LogUnavailable,
    MasterView,
    SparkLinks,
    WorkerLog,
    active_master,
    local_files,
    spark_links,
)
from jobs.lifecycle.placement import Places, confine, missing, placed_sink
from jobs.lifecycle.submission import DriverStatus, SparkRest, SubmissionError
from jobs.spec import DaggerSpec, InfluxSink, KafkaSink, PostgresSink, SpecError
from odin.cluster.secret import rest_token, secret_file
from odin.endpoints import Endpoints
from odin.environment import nodes as environment_nodes
from odin.paths import REPO, spark_archive_options
from odin.registry import Refused, Registry
from odin.registry.records import ClusterRecord, DaggerRecord
from odin.teams.access import require_member
from odin.teams.databases import ensure_team_database, team_database_at
from odin.teams.secrets import TeamSecrets

if TYPE_CHECKING:
    from jobs.engine.plan import DaggerPlan
    from jobs.lifecycle.outputs import Output

# Imported where used, not here: the planner (sqlglot, protobuf), PySpark, Terraform and Ansible (odin.stack,
# odin.cluster), the output readers' clients. `dagger list/status/stop` and each Airflow task import this module and
# need none of them (tests/test_architecture.py keeps it so).

DRIVER = REPO / "jobs" / "engine" / "driver.py"
STOP_TIMEOUT_S = 90.0
POLL_S = 1.0
PROCESS_GONE_S = 30.0  # after the master reports the driver ended, for its Python process to end too
KEPT_RUNS = 8  # spec files kept per dagger (_spec_file)
ENVIRONMENT = "local"  # the Odin environment the platform's own processes (Airflow, the CLIs) run in
# Each dagger's driver and its executors: small by default, as the local stack's workers are.
RESOURCES = {
    "spark.driver.memory": "1g",
    "spark.driver.cores": "1",
    "spark.executor.memory": "1g",
    "spark.executor.cores": "1",
}
Progress = Callable[[str], None]
# what a dagger's driver and each executor take from a worker (cores, MB), as RESOURCES asks
DRIVER_NEEDS = (int(RESOURCES["spark.driver.cores"]), int(RESOURCES["spark.driver.memory"].removesuffix("g")) * 1024)
EXECUTOR_NEEDS = (
    int(RESOURCES["spark.executor.cores"]),
    int(RESOURCES["spark.executor.memory"].removesuffix("g")) * 1024,
)
ROOM_WAIT_S = 15.0  # a submission waits this long for cores a stopped dagger frees


def _fits(free: list[list[int]], needs: tuple[int, int]) -> bool:
    """Place `needs` (cores, MB) on the first worker of `free` with room for it, taking it from that worker."""
    for worker in free:
        if worker[0] >= needs[0] and worker[1] >= needs[1]:
            worker[0] -= needs[0]
            worker[1] -= needs[1]
            return True
    return False


class DeployError(RuntimeError):
    """The driver was submitted but did not start; the message has its own words (or the master's)."""


@dataclass(frozen=True)
class Deployment:
    """A submitted driver, and where to see it start: what Airflow's trigger is given (JSON-serialisable)."""

    team: str
    name: str
    cluster: str
    submission_id: str
    run: str
    status_file: str
    rest_urls: list[str]
    secret_file: str
    actor: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def rest(self) -> SparkRest:
        return SparkRest(self.rest_urls, lambda: rest_token(Path(self.secret_file), self.actor))


@dataclass(frozen=True)
class Started:
    """The verdict on a deployment: still starting (`done` False), running, or failed with the reason."""

    done: bool
    ok: bool = False
    reason: str = ""


def started(deployment: Deployment, status: DaggerStatus | None, driver: DriverStatus | None) -> Started:
    """Has the deployment's query reported progress yet? From the driver's status file (this run's only) and the
    master's view of the driver, which says when it died before it could write anything."""
    if status is not None and status.run == deployment.run:
        if status.phase == "failed":
            return Started(True, False, f"the dagger failed on start: {status.error}")
        if status.batches > 0:
            return Started(True, True)
    if driver is not None and driver.final:
        reason = driver.message.strip().splitlines()[0] if driver.message.strip() else "no message"
        return Started(True, False, f"the driver ended {driver.state} on {driver.worker or '?'}: {reason}")
    return Started(False)


def verdict(deployment: Deployment) -> Started:
    """The deployment's state now (blocking I/O: Airflow's trigger runs it in a thread)."""
    driver = None
    with contextlib.suppress(SubmissionError):  # no active master for a moment (a failover): ask again later
        driver = deployment.rest().status(deployment.submission_id)
    return started(deployment, read_status(Path(deployment.status_file)), driver)


@dataclass(frozen=True)
class DaggerRow:
    team: str
    name: str
    cluster: str | None
    state: str
    since: datetime | None
    input_rate: float | None
    lag: int | None
    schema_versions: dict[str, int] = field(default_factory=dict)
    submission_id: str | None = None  # the driver's id
    links: SparkLinks | None = None  # where Spark shows the driver (None: not asked)

    def to_dict(self) -> dict[str, Any]:
        """What `dagger list --json` prints: the table's data, unformatted."""
        links = (self.links or SparkLinks(None, None, None, None)).to_dict()
        return {
            "team": self.team,
            "name": self.name,
            "cluster": self.cluster,
            "state": self.state,
            "since": self.since.isoformat() if self.since else None,
            "input_rate": self.input_rate,
            "lag": self.lag,
            "schema_versions": self.schema_versions,
            **links,
            "driver_id": self.submission_id,
        }


LIVE = ("deploying", "running", "stopping", "failed")  # states in which a dagger has a driver that may run


@dataclass(frozen=True)
class DriverLog:
    """A dagger's driver log, and where it is read from (`source.where`)."""

    team: str
    name: str
    links: SparkLinks
    source: LogSource


class Daggers:
    def __init__(self, registry: Registry, state_dir: Path, progress: Progress | None = None) -> None:
        self.registry = registry
        self.state_dir = state_dir
        self.say: Progress = progress or (lambda _msg: None)
        self._held: set[str] = set()  # subjects this instance holds (Registry.exclusive), so it may nest

    # -- checks (no side effects) ----------------------------------------------------------------------------

    def check(self, spec: DaggerSpec, cluster: str, actor: str | None) -> DaggerPlan:
        """Who may deploy it where, its catalog streams and its plan: Refused names the first problem."""
        require_member(self.registry, actor, spec.team)
        return self.plan(spec, cluster)

    def plan(self, spec: DaggerSpec, cluster: str) -> DaggerPlan:
        """check() without asking who: for the platform's own actions (a restart by health) on a recorded spec.
        The spec is placed (jobs/lifecycle/placement.py): what it reads and writes is the platform's to decide."""
        self._cluster(spec.team, cluster)
        try:
            placed = confine(spec, self.places())
        except SpecError as e:
            raise Refused(str(e)) from None
        # after placing: the team database's password must be among the team's secrets
        if unset := missing(placed, TeamSecrets(self.state_dir)):
            raise Refused("\n".join(unset))
        from jobs.engine.plan import plan_dagger

        try:
            return replace(plan_dagger(placed, self.state_dir), asked=spec)
        except SpecError as e:
            raise Refused(str(e)) from None

    def places(self) -> Places:
        """What this environment provides daggers: the catalog, the team's outputs, the dagger's own places."""
        from odin.catalog import load

        where = Endpoints(environment_nodes(ENVIRONMENT, self.state_dir))
        streams = self.registry.streams()
        outputs = {}
        for cluster in load().output_clusters():
            servers = next((s.serving_bootstrap_servers for s in streams if s.kafka_cluster == cluster), None)
            if servers is not None:
                outputs[cluster] = servers
        tsdb = None
        with contextlib.suppress(LookupError):
            tsdb = where.victoria_metrics_url
        return Places(
            state_dir=self.state_dir,
            streams=self.registry.stream,
            catalog_topics=frozenset(t for s in streams for t in s.topics),
            tsdb_url=tsdb,
            kafka_outputs=outputs,
            database=lambda team: team_database_at(where, team),
            provision_database=lambda team: ensure_team_database(where, TeamSecrets(self.state_dir), team),
        )

    def _cluster(self, team: str, name: str) -> ClusterRecord:
        record = self.registry.cluster(team, name)
        if record is None or record.state == "destroyed":
            theirs = [c.name for c in self.registry.clusters(team, states=("ready",))]
            ask = f"a platform engineer makes one with `odin cluster create {team} {name}`"
            raise Refused(
                f"team {team} has no cluster {name!r}: a team deploys to its own clusters only "
                f"({'its clusters: ' + ', '.join(theirs) if theirs else 'it has none'}; {ask})"
            )
        if record.state != "ready":
            raise Refused(f"cluster {team}/{name} is {record.state}: deploy once it is ready (see `odin cluster list`)")
        return record

    def _owned(self, team: str, name: str, actor: str | None) -> DaggerRecord:
        require_member(self.registry, actor, team)
        record = self.registry.dagger(team, name)
        if record is None:
            raise Refused(f"team {team} has no dagger {name!r}: see `dagger list --team {team}`")
        return record

    # -- deploy -------------------------------------------------------------------------------------------------

    def submit(
        self, plan: DaggerPlan, cluster: str, actor: str, *, reset_checkpoint: bool = False, room: bool = True
    ) -> Deployment:
        """Submit the checked plan's driver. The registry records the dagger as `deploying` before the driver exists,
        and a driver whose submission is not recorded is killed: nothing runs that the registry does not know of."""
        spec = plan.spec
        subject = f"dagger:{spec.team}/{spec.name}"
        with self.registry.action(actor, "dagger_submit", subject, cluster=cluster) as detail, self._exclusive(subject):
            known = self.registry.dagger(spec.team, spec.name)
            if known is not None and known.state in ("deploying", "running", "stopping"):
                raise Refused(
                    f"dagger {spec.team}/{spec.name} is {known.state} on {known.cluster}: update it (`dagger update "
                    f"SPEC`) or stop it (`dagger stop {spec.team} {spec.name}`)"
                )
            record = self._cluster(spec.team, cluster)
            if room:
                self._room(spec.team, spec.name, record)
            rest = SparkRest(record.addresses.get("rest_urls", []), self._token(spec.team, cluster, actor))
            run = uuid.uuid4().hex[:12]
            # the spec travels as a file of the dagger's own, not on the driver's command line (`ps` shows that)
            args = ["--spec-file", str(_spec_file(plan, run)), "--state-dir", str(self.state_dir), "--run", run]
            # the class-data archive of Spark's classes, where the worker's host has one (the JVM ignores it if not):
            # the driver's and executors' JVMs start in about half the time (bench/deploy_latency.py)
            from jobs.engine.session import DAGGER_JVM, JVM_ENVIRONMENT

            java_options = f"{spark_archive_options()} {DAGGER_JVM}"
            properties = {
                "spark.app.name": f"dagger-{spec.team}-{spec.name}",
                "spark.master": record.addresses["master_url"],
                "spark.driver.supervise": "true",
                "spark.cores.max": str(spec.parallelism),
                "spark.pyspark.python": sys.executable,
                "spark.pyspark.driver.python": sys.executable,
                "spark.driver.extraJavaOptions": java_options,
                "spark.executor.extraJavaOptions": java_options,
                "spark.ui.killEnabled": "false",  # whoever reaches a UI must not kill another team's jobs from it
                **RESOURCES,
            }
            # what the team asked is recorded: a restart or a move places it again, where the platform is then
            asked = (plan.asked or spec).model_dump(mode="json")
            # the same spec again (a restart, a move) is the same version
            detail["spec_version"] = known.spec_version + (known.spec != asked) if known else 1
            self.registry.put_dagger(
                DaggerRecord(
                    team=spec.team,
                    name=spec.name,
                    spec=asked,
                    spec_version=detail["spec_version"],
                    checkpoint=str(plan.checkpoint),
                    state="deploying",
                    cluster=cluster,
                    submission_id=None,
                    schema_versions=self._schema_versions(spec),
                )
            )
            self.registry.set_dagger_state(spec.team, spec.name, "deploying")
            claim(plan.checkpoint, run)  # before the driver exists: any older driver of the dagger ends
            self.say(f"submitting {spec.team}/{spec.name} to {spec.team}/{cluster}")
            try:
                submission_id = rest.submit(
                    str(DRIVER),
                    [*args, *(["--reset-checkpoint"] if reset_checkpoint else [])],
                    properties,
                    environment=JVM_ENVIRONMENT,
                )
            except BaseException:
                self.registry.set_dagger_state(spec.team, spec.name, "failed")
                raise
            detail |= {"submission_id": submission_id, "run": run}
            try:
                self.registry.set_dagger_submission(spec.team, spec.name, submission_id)
            except BaseException:
                with contextlib.suppress(Exception):  # supervised: it would run on, unrecorded
                    self._kill(rest, submission_id)
                raise
        return Deployment(
            spec.team,
            spec.name,
            cluster,
            submission_id,
            run,
            str(status_path(plan.checkpoint)),
            list(record.addresses["rest_urls"]),
            str(secret_file(self.state_dir, spec.team, cluster)),
            actor,
        )

    @contextlib.contextmanager
    def _exclusive(self, subject: str, recorded_as: tuple[str, str] | None = None) -> Iterator[None]:
        """One request at a time on a dagger (Registry.exclusive); an update's stop and submit are one request.
        `recorded_as` (actor, action): record a refusal here, for a caller outside Registry.action."""
        if subject in self._held:
            yield
            return
        held = False
        try:
            with self.registry.exclusive(subject):
                held = True
                self._held.add(subject)
                try:
                    yield
                finally:
                    self._held.discard(subject)
        except Refused as e:
            if not held and recorded_as is not None:
                self.registry.record(*recorded_as, subject, "refused", str(e))
            raise

    def wait_started(self, deployment: Deployment, timeout_s: float = START_TIMEOUT_S) -> Started:
        deadline = time.monotonic() + timeout_s
        now = verdict(deployment)
        while not now.done and time.monotonic() < deadline:
            time.sleep(POLL_S)
            now = verdict(deployment)
        return now if now.done else Started(True, False, f"no progress within {timeout_s:.0f} s")

    def conclude(
        self, deployment: Deployment, verdict: Started, action: str = "dagger_deploy", message: str = ""
    ) -> DaggerRecord:
        """Record how the deployment ended; a failed one's driver is killed (supervise would relaunch it)."""
        subject = f"dagger:{deployment.team}/{deployment.name}"
        detail = {"run": deployment.run, "submission_id": deployment.submission_id}
        if verdict.ok:
            self.registry.set_dagger_state(deployment.team, deployment.name, "running")
            self.registry.record(deployment.actor, action, subject, "ok", message, detail)
        else:
            self._kill(deployment.rest(), deployment.submission_id)
            self.registry.set_dagger_state(deployment.team, deployment.name, "failed")
            reason = f"{message}: {verdict.reason}" if message else verdict.reason
            self.registry.record(deployment.actor, action, subject, "failed", reason, detail)
        record = self.registry.dagger(deployment.team, deployment.name)
        assert record is not None
        if not verdict.ok:
            raise DeployError(f"dagger {deployment.team}/{deployment.name}: {verdict.reason}")
        return record

    def deploy(self, spec: DaggerSpec, cluster: str, actor: str, *, reset_checkpoint: bool = False) -> DaggerRecord:
        """check → submit → wait for the first progress → registry (the CLI's and tests' way; DAGs defer the wait)."""
        with self.registry.refusals(actor, "dagger_deploy", f"dagger:{spec.team}/{spec.name}"):
            plan = self.check(spec, cluster, actor)
        deployment = self.submit(plan, cluster, actor, reset_checkpoint=reset_checkpoint)
        self.say(f"waiting for the first progress of {deployment.submission_id}")
        return self.conclude(deployment, self.wait_started(deployment))

    # -- stop, update -------------------------------------------------------------------------------------------

    def stop(self, team: str, name: str, actor: str, drain_timeout_s: float | None = None) -> DaggerRecord:
        """With `drain_timeout_s`, the driver first reads what is left on its streams and closes every window (as
        `dagger run --once` would on its checkpoint), for at most that long; then it is stopped as any stop does."""
        subject = f"dagger:{team}/{name}"
        with self.registry.action(actor, "dagger_stop", subject) as detail, self._exclusive(subject):
            record = followed(self.registry, self._owned(team, name, actor))
            if record.state not in ("deploying", "running", "stopping", "failed") or record.submission_id is None:
                raise Refused(
                    f"dagger {team}/{name} is {record.state}: nothing to stop (see `dagger list --team {team}`)"
                )
            detail["submission_id"] = record.submission_id
            self.registry.set_dagger_state(team, name, "stopping")
            if drain_timeout_s is not None and record.checkpoint:
                detail["drain"] = self._drained(Path(record.checkpoint), drain_timeout_s)
            assert record.cluster is not None
            rest = SparkRest(self._cluster_urls(team, record.cluster), self._token(team, record.cluster, actor))
            self.say(f"killing driver {record.submission_id}")
            detail["driver"] = self._kill(rest, record.submission_id)
            if record.checkpoint:
                detail["processes"] = self._processes_gone(Path(record.checkpoint))
            self.registry.set_dagger_state(team, name, "stopped")
        stopped = self.registry.dagger(team, name)
        assert stopped is not None
        return stopped

    def end_driver(self, team: str, name: str, actor: str, timeout_s: float = 15.0) -> str:
        """Kill what is left of the dagger's driver before a restart, as far as its master can: its final state,
        or why it is not known to have ended (a driver on a dead worker; no master). A restart goes on anyway: the
        new run's claim on the checkpoint ends any driver of an older run that Spark still relaunches."""
        record = self.registry.dagger(team, name)
        record = followed(self.registry, record) if record is not None else None
        if record is None or record.cluster is None or record.submission_id is None:
            return "no driver recorded"
        try:
            rest = SparkRest(self._cluster_urls(team, record.cluster), self._token(team, record.cluster, actor))
            return self._kill(rest, record.submission_id, timeout_s)
        except (DeployError, SubmissionError) as e:
            return f"not confirmed: {e}"

    def restart(
        self,
        team: str,
        name: str,
        actor: str,
        reason: str,
        *,
        cluster: str | None = None,
        action: str = "dagger_restart",
    ) -> DaggerRecord:
        """Submit the dagger's recorded spec again on its checkpoint, on its cluster or on `cluster` (a failover),
        as the platform's own action: its driver is gone or ended first (see end_driver). One history entry
        (`action`) with the reason."""
        record = self.registry.dagger(team, name)
        if record is None or record.cluster is None:
            raise Refused(f"no deployed dagger {team}/{name}: see `dagger list --team {team}`")
        spec = DaggerSpec.model_validate(record.spec)
        target = cluster or record.cluster
        try:
            plan = self.plan(spec, target)
        except Refused as e:
            self.registry.record(actor, action, f"dagger:{team}/{name}", "refused", f"{reason}: {e}")
            raise
        self.registry.set_dagger_state(team, name, "failed")  # submit takes a dagger that is not running
        # no room check: the old run's driver, which the master may have relaunched meanwhile, holds its cores until
        # it finds the checkpoint claimed by this submission and exits; until then the master queues this one
        deployment = self.submit(plan, target, actor, room=False)
        return self.conclude(deployment, self.wait_started(deployment), action, reason)

    def prepare_update(
        self, spec: DaggerSpec, actor: str, *, cluster: str | None = None, reset_state: bool = False
    ) -> tuple[DaggerPlan, str]:
        """The new spec's plan and cluster, if its checkpoint can serve it (jobs/engine/checkpoint.py) or `reset_state`
        (it starts over from `kafka.start`); Refused otherwise, before anything is touched."""
        with self.registry.refusals(actor, "dagger_update", f"dagger:{spec.team}/{spec.name}"):
            record = self._owned(spec.team, spec.name, actor)
            target = cluster or record.cluster
            if target is None:
                raise Refused(
                    f"dagger {spec.team}/{spec.name} has no cluster: give one (`--cluster`; `odin cluster list` "
                    "names them)"
                )
            plan = self.check(spec, target, actor)
            from jobs.engine.checkpoint import differences, identity_of, read_identity

            made = read_identity(plan.checkpoint)
            reasons = differences(made, identity_of(plan)) if made is not None else []
            if reasons and not reset_state:
                raise Refused(
                    f"the new spec cannot resume dagger {spec.team}/{spec.name}'s checkpoint: {'; '.join(reasons)}. "
                    "Update with reset_state: true (reads the streams again from kafka.start), or deploy it under a "
                    "new name"
                )
        return plan, target

    def redeploy(self, plan: DaggerPlan, cluster: str, actor: str, *, reset_state: bool = False) -> Deployment:
        """Stop the running driver, then submit the prepared plan on the same checkpoint (or a reset one)."""
        spec = plan.spec
        subject = f"dagger:{spec.team}/{spec.name}"
        with self._exclusive(subject, recorded_as=(actor, "dagger_update")):
            record = self.registry.dagger(spec.team, spec.name)
            if record is not None and record.state in ("deploying", "running", "stopping"):
                self.stop(spec.team, spec.name, actor)
            self.registry.record(actor, "dagger_update", subject, "ok", "", {"reset": reset_state})
            return self.submit(plan, cluster, actor, reset_checkpoint=reset_state)

    def update(
        self, spec: DaggerSpec, actor: str, *, cluster: str | None = None, reset_state: bool = False
    ) -> DaggerRecord:
        plan, target = self.prepare_update(spec, actor, cluster=cluster, reset_state=reset_state)
        deployment = self.redeploy(plan, target, actor, reset_state=reset_state)
        return self.conclude(deployment, self.wait_started(deployment))

    # -- list ---------------------------------------------------------------------------------------------------

    def list(self, teams: Iterable[str] | None = None, *, links: bool = True) -> list[DaggerRow]:
        """The daggers of `teams` (None: every team's); `links`: where Spark shows each driver (each cluster's
        masters are asked once, briefly: a cluster that is down has no links, and slows the list by seconds)."""
        records = (
            self.registry.daggers() if teams is None else [d for t in teams for d in self.registry.daggers(team=t)]
        )
        views: dict[str, tuple[MasterView | None, list[str]]] = {}
        rows = []
        for d in records:
            d = followed(self.registry, d)  # a driver the master relaunched runs under a new id
            found = None
            if links and d.cluster is not None and d.submission_id is not None:
                view, ui_urls = self._master(d.team, d.cluster, views)
                found = spark_links(view, ui_urls, d.submission_id, d.team, d.name)
            status = read_status(status_path(Path(d.checkpoint))) if d.state == "running" else None
            rows.append(
                DaggerRow(
                    d.team,
                    d.name,
                    d.cluster,
                    d.state,
                    d.since,
                    status.input_rate if status else None,
                    status.lag if status else None,
                    d.schema_versions,
                    d.submission_id,
                    found,
                )
            )
        return rows

    def _room(self, team: str, name: str, cluster: ClusterRecord) -> None:
        """Refuse a submission the cluster has no room for (the master would keep its driver waiting, unlaunched,
        until the deploy gives up): a driver and one executor (RESOURCES) on its live workers' free cores and memory,
        as its active master counts them. Asked again for a few seconds: a stopped dagger's cores come back soon.
        Only a whole cluster is judged: while a worker is down or coming back (a heal), the master queues the driver
        for it."""
        deadline = time.monotonic() + ROOM_WAIT_S
        while True:
            view, _ = self._master(team, cluster.name, {})
            if view is None:  # no master answers: the submission itself says so
                return
            workers = [w for w in view.state.get("workers", []) if w.get("state") == "ALIVE"]
            if len(workers) < cluster.workers:
                return
            free = [[w["cores"] - w["coresused"], w["memory"] - w["memoryused"]] for w in workers]
            if _fits(free, DRIVER_NEEDS) and _fits(free, EXECUTOR_NEEDS):  # _fits takes what it places
                return
            if time.monotonic() > deadline:
                cores, mb = sum(w["cores"] for w in workers), sum(w["memory"] for w in workers)
                used = sum(w["coresused"] for w in workers), sum(w["memoryused"] for w in workers)
                raise Refused(
                    f"cluster {team}/{cluster.name} has no room for dagger {name}: a dagger needs a free core and "
                    f"{DRIVER_NEEDS[1]} MB for its driver on one worker and as much again for an executor; the "
                    f"cluster's {len(workers)} live worker(s) have {cores - used[0]} of {cores} cores and "
                    f"{mb - used[1]} of {mb} MB free. Stop a dagger there (`dagger list --team {team}`), or ask a "
                    f"platform engineer for more workers (`odin cluster scale {team} {cluster.name} --workers N`)"
                )
            time.sleep(1)

    def _master(
        self, team: str, cluster: str, seen: dict[str, tuple[MasterView | None, list[str]]]
    ) -> tuple[MasterView | None, list[str]]:
        """The cluster's active master (asked once per `seen`) and its masters' UI URLs."""
        key = f"{team}/{cluster}"
        if key not in seen:
            record = self.registry.cluster(team, cluster)
            ui_urls = list(record.addresses.get("ui_urls", [])) if record and record.state != "destroyed" else []
            seen[key] = (active_master(ui_urls), ui_urls)
        return seen[key]

    # -- logs ---------------------------------------------------------------------------------------------------

    def driver_log(self, team: str, name: str, actor: str, log_type: LogType = LogType.stdout) -> DriverLog:
        """The dagger's driver log, for a member of its team or a platform engineer (a refusal is recorded, as of any
        action): served by the worker that runs the driver, else the worker's file where this host has it."""
        with self.registry.refusals(actor, "dagger_logs", f"dagger:{team}/{name}"):
            record = followed(self.registry, self._owned(team, name, actor))
            if record.submission_id is None or record.cluster is None:
                raise Refused(
                    f"dagger {team}/{name} is {record.state} and has no driver: deploy it "
                    f"(`dagger deploy SPEC --cluster CLUSTER`)"
                )
        driver_id = record.submission_id
        view, ui_urls = self._master(team, record.cluster, {})
        links = spark_links(view, ui_urls, driver_id, team, name)
        problems = []
        if links.worker_ui is not None:
            source = WorkerLog(links.worker_ui, driver_id, log_type)
            try:
                source.read(0, 0)
                return DriverLog(team, name, links, source)
            except LogUnavailable as e:
                problems.append(str(e))
        elif view is None:
            problems.append(f"no master of {team}/{record.cluster} answers ({', '.join(ui_urls) or 'no UI recorded'})")
        else:
            problems.append(f"the master {view.ui} knows no worker running driver {driver_id}")
        from odin.cluster.lifecycle import Clusters

        try:
            nodes = Clusters(self.registry, self.state_dir).nodes(team, record.cluster)
        except (Refused, RuntimeError) as e:  # a destroyed cluster; Terraform cannot read its outputs
            nodes = {}
            problems.append(f"its nodes: {e}")
        files = local_files(nodes, driver_id, log_type)
        if files:
            return DriverLog(team, name, links, FileLog(max(files, key=lambda p: p.stat().st_mtime)))
        raise LogUnavailable(
            f"the log of dagger {team}/{name}'s driver {driver_id} cannot be read from here: {'; '.join(problems)}; "
            "and no worker's work directory on this host has it. "
            f"`dagger status --team {team}` shows its cluster's health"
        )

    def driver_alive(self, log: DriverLog) -> bool:
        """Whether the driver whose log is read may still write to it: the dagger's current driver, in a live state."""
        record = self.registry.dagger(log.team, log.name)
        if record is None:
            return False
        record = followed(self.registry, record)
        return record.state in LIVE and record.submission_id == log.links.driver_id

    # -- output -------------------------------------------------------------------------------------------------

    def output(self, team: str, name: str, actor: str, last: int) -> Output:
        """The dagger's newest `last` output rows, read where the platform placed its sink, with the team's own
        credentials: for a member of its team or a platform engineer (a refusal is recorded, as of any action)."""
        with self.registry.refusals(actor, "dagger_output", f"dagger:{team}/{name}"):
            record = self._owned(team, name, actor)
        from jobs.lifecycle.outputs import (
            Output,
            OutputUnavailable,
            influx_rows,
            kafka_rows,
            postgres_rows,
            proto_decoder,
        )

        spec = DaggerSpec.model_validate(record.spec)
        sink = placed_sink(spec, self.places())
        if isinstance(sink, InfluxSink):
            if sink.url is None:
                raise OutputUnavailable("this environment has no time-series DB")
            columns, rows = influx_rows(sink.url, sink.measurement, team, last)
            where, total = f"VictoriaMetrics {sink.url}, measurement {sink.measurement} (team={team})", None
        elif isinstance(sink, PostgresSink):
            password = TeamSecrets(self.state_dir).load(team).get(sink.password_env or "")
            if password is None:
                raise OutputUnavailable(f"team {team} has no database password yet: its first deploy makes it")
            columns, rows, total = postgres_rows(sink.dsn, password, sink.table, last)
            where = f"team {team}'s database, table {sink.table}"
        elif isinstance(sink, KafkaSink):
            decode = proto_decoder(sink.proto) if sink.format == "proto" and sink.proto else None
            columns, rows = kafka_rows(sink.bootstrap_servers, sink.topic, last, decode)
            where, total = f"Kafka cluster {sink.cluster}, topic {sink.topic}", None
        else:
            raise OutputUnavailable(
                f"dagger {team}/{name} writes its rows to its driver's log: `dagger logs {team} {name}`"
            )
        note = "" if rows else "no rows yet: a window is written once the watermark passes its end"
        return Output(team, name, spec.sink.type, where, columns, rows, note, total)

    # -- helpers ------------------------------------------------------------------------------------------------

    def _token(self, team: str, cluster: str, actor: str) -> Callable[[], str]:
        secret = secret_file(self.state_dir, team, cluster)
        return lambda: rest_token(secret, actor)

    def _cluster_urls(self, team: str, cluster: str) -> list[str]:
        record = self.registry.cluster(team, cluster)
        return list(record.addresses.get("rest_urls", [])) if record else []

    def _schema_versions(self, spec: DaggerSpec) -> dict[str, int]:
        """The catalog streams' schema versions the dagger is locked to (jobs' decoding is of these)."""
        versions = {}
        for s in spec.streams:
            if s.stream is not None:
                known = self.registry.stream(s.stream)
                if known is not None:
                    versions[s.stream] = known.schema_version
        return versions

    def _processes_gone(self, checkpoint: Path, timeout_s: float = PROCESS_GONE_S) -> str:
        """Return once the driver's whole process tree is gone: the master reports KILLED when the driver's JVM
        ended, and its Python process (with what it forked) ends when its gateway closes, which may take a batch.
        Past `timeout_s`, a process on this host is killed, and said so; one elsewhere is reported."""
        status = read_status(status_path(checkpoint))
        if status is None:
            return "no driver status"
        deadline = time.monotonic() + timeout_s
        while run_alive(checkpoint, status.run) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not run_alive(checkpoint, status.run):
            return "gone"
        if status.pid is None or status.host != socket.gethostname() or not psutil.pid_exists(status.pid):
            return f"still running on {status.host or '?'} {timeout_s:.0f} s after the driver ended: not confirmed"
        driver = psutil.Process(status.pid)
        tree = [driver, *driver.children(recursive=True)]
        for p in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        psutil.wait_procs(tree, timeout=10)
        self.say(f"the driver's process {status.pid} outlived it by {timeout_s:.0f} s: killed")
        return f"killed: process {status.pid} and {len(tree) - 1} child(ren) outlived the driver by {timeout_s:.0f} s"

    def _drained(self, checkpoint: Path, timeout_s: float) -> str:
        """Ask the checkpoint's current run to drain and wait, bounded, for its driver to end; how it went."""
        run = owner(checkpoint)
        if run is None:
            return "no run owns the checkpoint: not drained"
        request_drain(checkpoint, run)
        self.say("draining: the driver reads what is left and closes every window")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            status = read_status(status_path(checkpoint))
            if status is not None and status.run == run and status.phase in ("stopped", "failed"):
                return "drained" if status.phase == "stopped" else f"failed while draining: {status.error}"
            time.sleep(POLL_S)
        return f"not drained within {timeout_s:.0f} s"

    def _kill(self, rest: SparkRest, submission_id: str, timeout_s: float = STOP_TIMEOUT_S) -> str:
        """Kill the driver and wait until the master reports it ended; its final state."""
        state = rest.end(submission_id, timeout_s, self.say, POLL_S)
        if state is not None:
            return state
        raise DeployError(f"driver {submission_id} did not end within {timeout_s:.0f} s of being killed")


def followed(registry: Registry, record: DaggerRecord) -> DaggerRecord:
    """The record, with the submission its driver says it runs as now. A master whose worker died relaunches a
    supervised driver under a new submission id; the driver writes its own in its status file (jobs/engine/status.py),
    which is the current run's (the checkpoint's owner), so stop, health and Loki find it. Recorded in history."""
    if record.state not in ("deploying", "running", "stopping", "failed") or not record.checkpoint:
        return record
    checkpoint = Path(record.checkpoint)
    status = read_status(status_path(checkpoint))
    live = status.submission_id if status is not None and status.run == owner(checkpoint) else None
    if live is None or live == record.submission_id:
        return record
    registry.set_dagger_submission(record.team, record.name, live)
    message = f"the master relaunched driver {record.submission_id} as {live}"
    registry.record("platform", "dagger_relaunched", f"dagger:{record.qualified_name}", "ok", message,
                    {"was": record.submission_id, "now": live})  # fmt: skip
    return record.model_copy(update={"submission_id": live})


def _spec_file(plan: DaggerPlan, run: str) -> Path:
    """The placed spec for the run's driver with its plan's fingerprint, which the driver verifies, beside the
    dagger's checkpoint (readable by the platform only). The
    last KEPT_RUNS runs' files stay: a master may relaunch an older run's supervised driver, which must read its
    spec to find it is superseded and exit 0 (a driver whose file is gone exits 0 too: jobs/engine/driver.py)."""
    runs = plan.checkpoint.parent / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    for old in sorted(runs.glob("*.json"), key=lambda p: p.stat().st_mtime)[:-KEPT_RUNS]:
        old.unlink(missing_ok=True)
    path = runs / f"{run}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"spec": plan.spec.model_dump(mode="json"), "plan": plan.fingerprint}, f)
    return path
