"""One health check of every team cluster and registered dagger, and the self-healing it calls for.

observe (masters, driver status files, the registry) → judge (jobs/health/judge.py) → heal → report. Healing, in order:
1. what is left of failed daggers' drivers is ended (a driver queued for a worker would start on one a heal brings
   back; one the master cannot reach ends by itself when it finds its run superseded, jobs/engine/status.py);
2. clusters with dead masters or workers are converged by Odin (odin/cluster/lifecycle.py `heal`);
3. the failed daggers are submitted again on their checkpoints (jobs/lifecycle/daggers.py `restart`), within a restart
   budget; past it a dagger is marked crashlooping and its team is paged, once.
Every action goes to the registry's history with its reason (actor `odin-health`); each check writes a JSON report
(the next check's trends start from it) and `dagger_health` / `cluster_health` points to the TSDB.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path

import httpx
from pydantic import BaseModel, Field

from jobs.engine.status import read_status, status_path
from jobs.health.cluster_failover import MOVED, fail_over, is_down
from jobs.health.judge import LEVEL, SIGNALS, DaggerHealth, HealthPolicy, Observation, judge
from jobs.health.kafka_failover import Side, reachable, readers, switch_stream
from jobs.lifecycle.daggers import Daggers, DeployError, followed
from jobs.lifecycle.logs import MasterView, active_master, spark_links
from jobs.lifecycle.submission import DriverStatus, SparkRest, SubmissionError
from jobs.sinks.influx import escape_key
from odin.alerting.alertmanager import post_alert
from odin.apis import http_client
from odin.cluster.health import ClusterHealth
from odin.cluster.lifecycle import ClusterError, Clusters
from odin.cluster.secret import rest_token, secret_file
from odin.paths import write_atomic
from odin.registry import Refused, Registry
from odin.registry.records import AlertRecord, ClusterRecord, DaggerRecord, Outcome

ACTOR = "odin-health"
WATCHED = ("running", "failed", "crashlooping")  # deploying: its deploy run watches it; stopped: nothing to do
KEEP_REPORTS = 1440  # a day of checks, one a minute
Say = Callable[[str], None]


class ClusterEntry(BaseModel):
    team: str
    name: str
    ok: bool
    active_master: str | None
    alive_workers: int
    workers: int
    problems: list[str] = Field(default_factory=list)
    master_ui: str | None = None  # the active master's UI, or the first recorded one when none answers
    down_checks: int = 0  # checks in a row it could run no dagger (no active master or no worker alive)
    healed: bool | None = None  # None: not attempted
    failed_over_to: str | None = None


class StreamEntry(BaseModel):
    """A catalog stream with a failover Kafka cluster, read by checked daggers: is the cluster serving it up?"""

    name: str
    serving: Side
    bootstrap_servers: str
    reachable: bool
    down_checks: int = 0
    switched_to: Side | None = None


class HealthReport(BaseModel):
    checked_at: datetime
    clusters: list[ClusterEntry] = Field(default_factory=list)
    streams: list[StreamEntry] = Field(default_factory=list)
    daggers: list[DaggerHealth] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)  # what the check did, in words, in order
    alerts: list[AlertRecord] = Field(default_factory=list)  # firing, as Alertmanager's receiver recorded them

    def dagger(self, team: str, name: str) -> DaggerHealth | None:
        return next((d for d in self.daggers if (d.team, d.name) == (team, name)), None)


class Reports:
    """The JSON report of each check in `<state>/health/`, and `latest.json`, which the next check starts from."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir / "health"

    def latest(self) -> HealthReport | None:
        with contextlib.suppress(FileNotFoundError, ValueError):
            return HealthReport.model_validate_json((self.dir / "latest.json").read_text())
        return None

    def write(self, report: HealthReport) -> Path:
        runs = self.dir / "reports"
        runs.mkdir(parents=True, exist_ok=True)
        path = runs / f"{report.checked_at:%Y%m%dT%H%M%S%fZ}.json"
        body = report.model_dump_json(indent=2) + "\n"
        path.write_text(body)
        write_atomic(self.dir / "latest.json", body)
        for old in sorted(runs.glob("*.json"))[:-KEEP_REPORTS]:
            old.unlink(missing_ok=True)
        return path


def points(report: HealthReport) -> list[str]:
    """Influx line protocol: one `dagger_health` point per dagger, one `cluster_health` per cluster."""
    ts = int(report.checked_at.timestamp() * 1e9)
    lines = []
    for c in report.clusters:
        tags = f"team={escape_key(c.team)},cluster={escape_key(c.name)}"
        fields = f"ok={int(c.ok)}i,alive_workers={c.alive_workers}i,workers={c.workers}i,down_checks={c.down_checks}i"
        lines.append(f"cluster_health,{tags} {fields} {ts}")
    for d in report.daggers:
        tags = f"team={escape_key(d.team)},dagger={escape_key(d.name)},cluster={escape_key(d.cluster or '-')}"
        reasons = "; ".join(d.reasons).replace("\\", "\\\\").replace('"', '\\"')
        fields = (
            f"level={LEVEL[d.verdict]}i,healthy={int(d.verdict == 'healthy')}i,lag={d.lag}i,"
            f"input_rate={d.input_rate},processed_rate={d.processed_rate},restarts={d.restarts}i,"
            f'progress_age_s={d.progress_age_s if d.progress_age_s is not None else -1.0},reasons="{reasons}",'
            + ",".join(f"{s}={int(s in d.signals)}i" for s in SIGNALS)
        )
        lines.append(f"dagger_health,{tags} {fields} {ts}")
    return lines


def alertmanager_pager(alertmanager_url: str) -> Callable[[DaggerHealth], None]:
    """Pages through Alertmanager (routed to the dagger's team, recorded by the platform's receiver)."""

    def page(v: DaggerHealth) -> None:
        labels = {
            "alertname": "DaggerCrashlooping",
            "severity": "page",
            "team": v.team,
            "dagger": v.name,
            "cluster": v.cluster or "-",
        }
        summary = f"{v.qualified_name}: crashlooping, no more restarts"
        description = f"{'; '.join(v.reasons)}. Fix the dagger, then `dagger update` or `dagger deploy` it again."
        post_alert(alertmanager_url, labels, {"summary": summary, "description": description})

    return page


class Checkup:
    def __init__(
        self,
        registry: Registry,
        state_dir: Path,
        *,
        policy: HealthPolicy | None = None,
        metrics_url: str | None = None,
        pager: Callable[[DaggerHealth], None] | None = None,
        say: Say | None = None,
        teams: Collection[str] | None = None,
    ) -> None:
        """`teams`: check these teams' clusters and daggers only (default: all)."""
        self.registry, self.state_dir = registry, state_dir
        self.teams = None if teams is None else set(teams)
        self.policy = policy or HealthPolicy()
        self.metrics_url = metrics_url
        self.pager = pager
        self.say: Say = say or (lambda _m: None)
        self.clusters = Clusters(registry, state_dir, self.say)
        self.daggers = Daggers(registry, state_dir, self.say)
        self.reports = Reports(state_dir)

    # -- observe ------------------------------------------------------------------------------------------------

    def _clusters(self) -> dict[tuple[str, str], tuple[ClusterRecord, ClusterHealth]]:
        out = {}
        for record in self.registry.clusters(states=("ready", "failed")):
            if self.teams is not None and record.team not in self.teams:
                continue
            out[(record.team, record.name)] = (record, self.clusters.check(record.team, record.name))
        return out

    def _driver(self, record: DaggerRecord, cluster: ClusterRecord | None) -> tuple[DriverStatus | None, str]:
        record = followed(self.registry, record)
        if cluster is None or record.submission_id is None:
            return None, "no cluster or submission recorded"
        token = secret_file(self.state_dir, record.team, cluster.name)
        try:
            rest = SparkRest(list(cluster.addresses.get("rest_urls", [])), lambda: rest_token(token, ACTOR))
            return rest.status(record.submission_id), ""
        except SubmissionError as e:
            return None, str(e)

    def _restarts(self, record: DaggerRecord, now: datetime) -> int:
        since = now - self.policy.budget_window
        count = 0
        for entry in self.registry.history(f"dagger:{record.qualified_name}", limit=200):  # newest first
            if entry.at < since or entry.action in ("dagger_deploy", "dagger_update"):
                break  # a deploy or update by a person starts a new budget
            count += entry.action == "dagger_restart" and entry.outcome != "refused"
        return count

    def observe(
        self,
        record: DaggerRecord,
        clusters: dict[tuple[str, str], tuple[ClusterRecord, ClusterHealth]],
        previous: HealthReport | None,
    ) -> Observation:
        now = datetime.now(UTC)
        cluster_record, cluster_health = clusters.get((record.team, record.cluster or ""), (None, None))
        driver, driver_error = self._driver(record, cluster_record)
        return Observation(
            record=record,
            now=now,
            driver=driver,
            driver_error=driver_error,
            status=read_status(status_path(Path(record.checkpoint))),
            cluster=cluster_health,
            restarts=self._restarts(record, now),
            previous=previous.dagger(record.team, record.name) if previous else None,
        )

    def _judge_all(
        self, clusters: dict[tuple[str, str], tuple[ClusterRecord, ClusterHealth]], previous: HealthReport | None
    ) -> list[DaggerHealth]:
        daggers = self.registry.daggers(states=WATCHED)
        mine = [d for d in daggers if self.teams is None or d.team in self.teams]
        return [judge(self.observe(d, clusters, previous), self.policy) for d in mine]

    # -- check and heal -----------------------------------------------------------------------------------------

    def run(self, heal: bool = True, record: bool = True) -> HealthReport:
        """One check; `heal`: act on the verdicts; `record`: write the report (the next check's trends start from
        it) and the TSDB points. A look without either (`dagger status`) changes nothing."""
        previous = self.reports.latest()
        clusters = self._clusters()
        verdicts = self._judge_all(clusters, previous)
        alerts = [a for a in self.registry.alerts() if self.teams is None or a.team in self.teams]
        views = {key: active_master(r.addresses.get("ui_urls", [])) for key, (r, _h) in clusters.items()}
        verdicts = [_linked(v, clusters, views) for v in verdicts]
        entries = [_entry(r, h, previous, views[key]) for key, (r, h) in clusters.items()]
        report = HealthReport(
            checked_at=datetime.now(UTC),
            clusters=entries,
            streams=self._streams(previous),
            daggers=verdicts,
            alerts=alerts,
        )
        if heal:
            self._heal(report, verdicts)
        if record:
            path = self.reports.write(report)
            self._send(report)
            self.say(f"health report {path}")
        return report

    def _streams(self, previous: HealthReport | None) -> list[StreamEntry]:
        entries = []
        earlier = {s.name: s for s in previous.streams} if previous else {}
        for stream in self.registry.streams():
            if not stream.failover_bootstrap_servers:
                continue
            read = [d for d in readers(self.daggers, stream.name) if self.teams is None or d.team in self.teams]
            if not read:
                continue
            up = reachable(stream.serving_bootstrap_servers)
            before = earlier.get(stream.name)
            entries.append(
                StreamEntry(
                    name=stream.name,
                    serving="failover" if stream.on_failover else "primary",
                    bootstrap_servers=stream.serving_bootstrap_servers,
                    reachable=up,
                    down_checks=0 if up else (before.down_checks if before else 0) + 1,
                )
            )
        return entries

    def _heal(self, report: HealthReport, verdicts: list[DaggerHealth]) -> None:
        act = report.actions.append
        switched = self._switch_streams(report)
        moved = self._fail_over(report)
        restarts = [
            v
            for v in verdicts
            if v.action == "restart" and (v.team, v.cluster) not in moved and v.qualified_name not in switched
        ]
        for v in restarts:  # before any cluster heal brings back a worker a master would relaunch them on
            act(f"{v.qualified_name}: ended its driver ({self.daggers.end_driver(v.team, v.name, ACTOR)})")
        for entry in report.clusters:
            if not entry.ok:
                reason = "; ".join(entry.problems)
                self.say(f"healing cluster {entry.team}/{entry.name}: {reason}")
                try:
                    self.clusters.heal(entry.team, entry.name, ACTOR, reason)
                    entry.healed = True
                    act(f"cluster {entry.team}/{entry.name}: converged ({reason})")
                except (ClusterError, Refused) as e:
                    entry.healed = False
                    act(f"cluster {entry.team}/{entry.name}: could not converge: {e}")
        for v in restarts:
            reason = "; ".join(v.reasons)
            try:
                self.daggers.restart(v.team, v.name, ACTOR, reason)
                act(f"{v.qualified_name}: restarted from its checkpoint ({reason})")
            except (DeployError, Refused, SubmissionError) as e:
                act(f"{v.qualified_name}: restart failed: {e}")
        for v in verdicts:
            if v.action == "give_up":
                self._give_up(v)
                act(f"{v.qualified_name}: crashlooping, paged ({'; '.join(v.reasons)})")

    def _switch_streams(self, report: HealthReport) -> set[str]:
        """Streams whose primary Kafka cluster stayed unreachable switch to their mirror when it answers
        (jobs/health/kafka_failover.py), their daggers restarted there; the daggers switched (team/name)."""
        switched: set[str] = set()
        for entry in report.streams:
            if entry.serving != "primary" or entry.down_checks < self.policy.kafka_failover_after_checks:
                continue
            stream = self.registry.stream(entry.name)
            if stream is None or not stream.failover_bootstrap_servers:
                continue
            if not reachable(stream.failover_bootstrap_servers):
                report.actions.append(f"stream {entry.name}: primary and failover Kafka clusters both unreachable")
                continue
            reason = f"its Kafka cluster {entry.bootstrap_servers} unreachable for {entry.down_checks} checks"
            try:
                done = switch_stream(self.daggers, entry.name, ACTOR, reason, authorize=False)
            except Refused as e:
                report.actions.append(f"stream {entry.name}: no failover: {e}")
                continue
            entry.switched_to = "failover"
            switched.update(done.moved, done.failed)
            report.actions += [f"{name}: moved to the failover Kafka cluster ({reason})" for name in done.moved]
            report.actions += [f"{name}: failover to the mirror failed: {why}" for name, why in done.failed.items()]
        return switched

    def _fail_over(self, report: HealthReport) -> set[tuple[str, str | None]]:
        """Clusters down for `failover_after_checks` checks, of teams that allow it: their daggers move to another
        cluster of the team (jobs/health/cluster_failover.py) before anything else; (team, cluster) of those failed
        over."""
        done: set[tuple[str, str | None]] = set()
        for entry in report.clusters:
            if entry.down_checks < self.policy.failover_after_checks or not self.registry.auto_failover(entry.team):
                continue
            if not self.registry.daggers(team=entry.team, cluster=entry.name, states=MOVED):
                continue
            reason = f"down for {entry.down_checks} checks: {'; '.join(entry.problems)}"
            try:
                moved = fail_over(self.daggers, self.clusters, entry.team, entry.name, ACTOR, reason, authorize=False)
            except Refused as e:
                report.actions.append(f"cluster {entry.team}/{entry.name}: no failover: {e}")
                continue
            entry.failed_over_to = moved.target
            done.add((entry.team, entry.name))
            for name in moved.moved:
                report.actions.append(f"{entry.team}/{name}: moved to cluster {moved.target} ({reason})")
            for name, why in moved.failed.items():
                report.actions.append(f"{entry.team}/{name}: failover to {moved.target} failed: {why}")
        return done

    def _give_up(self, v: DaggerHealth) -> None:
        self.daggers.end_driver(v.team, v.name, ACTOR)
        self.registry.set_dagger_state(v.team, v.name, "crashlooping")
        subject = f"dagger:{v.qualified_name}"
        self.registry.record(ACTOR, "dagger_crashlooping", subject, "ok", "; ".join(v.reasons))
        outcome: Outcome = "ok"
        message = f"crashlooping: {'; '.join(v.reasons)}"
        if self.pager is not None:
            try:
                self.pager(v)
            except httpx.HTTPError as e:  # recorded as a failed page; the DaggerCrashlooping rule still fires
                outcome, message = "failed", f"{message}; the page was not sent: {e}"
        self.registry.record(ACTOR, "dagger_page", subject, outcome, message)

    def _send(self, report: HealthReport) -> None:
        if not self.metrics_url:
            return
        try:
            http_client.post(
                f"{self.metrics_url}/write", content="\n".join(points(report)), timeout=5
            ).raise_for_status()
        except httpx.HTTPError as e:  # the report on disk is still there; the next check writes again
            self.say(f"health points to {self.metrics_url}: {e}")


def _linked(
    v: DaggerHealth,
    clusters: dict[tuple[str, str], tuple[ClusterRecord, ClusterHealth]],
    views: dict[tuple[str, str], MasterView | None],
) -> DaggerHealth:
    """The verdict with where Spark shows its driver, from its cluster's active master."""
    key = (v.team, v.cluster or "")
    if key not in clusters or v.driver_id is None:
        return v
    links = spark_links(views[key], clusters[key][0].addresses.get("ui_urls", []), v.driver_id, v.team, v.name)
    return v.model_copy(update={"app_ui": links.app_ui, "driver_log_ui": links.log_page()})


def _entry(
    record: ClusterRecord, health: ClusterHealth, previous: HealthReport | None, view: MasterView | None = None
) -> ClusterEntry:
    before = (
        next((c for c in previous.clusters if (c.team, c.name) == (record.team, record.name)), None)
        if (previous)
        else None
    )
    return ClusterEntry(
        team=record.team,
        name=record.name,
        ok=health.ok,
        active_master=health.active_master,
        alive_workers=len(health.alive_workers),
        workers=health.workers,
        problems=list(health.problems),
        master_ui=view.ui if view else next(iter(record.addresses.get("ui_urls", [])), None),
        down_checks=((before.down_checks if before else 0) + 1) if is_down(health) else 0,
    )
