"""What the Daggers page shows, gathered for one Airflow user: their teams' daggers (state, cluster, since, input
rate, lag and the input rate of the last half hour), the teams' clusters with their latest health check, recent Loki
runs, and one dagger's detail (its output from the TSDB, its driver log, its spec's history, the forms that change it).

Who sees what is the platform's rule (odin/teams/access.py): a team's members see its daggers, platform engineers every
team's; a refusal is recorded in the registry's history, as every refusal is. Whatever cannot be reached (the registry,
VictoriaMetrics, a master) becomes a line in `problems`, never an exception the page would not survive: only "who are
you asking about" (NotFound) and "not yours" (Forbidden) end a request.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from odin.apis import http_client, victoria

ENVIRONMENT = "local"  # the Odin environment this Airflow belongs to (its ODIN_HOME)
RATE_WINDOW_S, RATE_STEP_S = 30 * 60, 30  # the sparkline: input rate over the last half hour
OUTPUT_WINDOW_S = 3 * 3600  # a dagger's output chart: its points of the last three hours (by their window's time)
OUTPUT_MAX_SERIES = 2000  # series read back for one output chart (the surge query has one per cell and vehicle)
LOG_LINES = 60
HISTORY_ENTRIES = 50
LOKI_RUNS = 20
TSDB_TIMEOUT_S = 5.0
NODES_TTL_S = 30.0  # the environment's nodes come from Terraform's outputs (a subprocess): read at most this often
PAGE_ACTION = "daggers_page"  # the history's action for a refused look at a team's daggers

Series = list[tuple[float, float]]  # (unix seconds, value)


class NotFound(LookupError):
    """What the request names does not exist; the message names it."""


class Forbidden(PermissionError):
    """The user may not see it; the message says why (and the refusal is in the registry's history)."""


# -- the environment ----------------------------------------------------------------------------------------------

_nodes: tuple[float, dict[str, Any], Path] | None = None
_nodes_lock = threading.Lock()


def _environment() -> tuple[dict[str, Any], Path]:
    """The environment's nodes (cached briefly) and its state directory."""
    global _nodes
    from odin.environment import nodes
    from odin.paths import default_state_dir

    with _nodes_lock:
        if _nodes is None or time.monotonic() - _nodes[0] > NODES_TTL_S:
            _nodes = (time.monotonic(), nodes(ENVIRONMENT), default_state_dir())
        return _nodes[1], _nodes[2]


@contextmanager
def platform() -> Iterator[tuple[Any, Path, str | None]]:
    """The registry (closed on exit), the state directory and VictoriaMetrics' URL (None: the environment has none)."""
    from odin.endpoints import Endpoints
    from odin.environment import connect_registry

    nodes, state_dir = _environment()
    try:
        vm: str | None = Endpoints(nodes).victoria_metrics_url
    except LookupError:
        vm = None
    registry = connect_registry(nodes)
    try:
        yield registry, state_dir, vm
    finally:
        registry.close()


# -- who may see what -------------------------------------------------------------------------------------------


def _team_exists(registry: Any, team: str) -> None:
    if team not in registry.teams():
        raise NotFound(f"there is no team {team!r} in the registry")


def allowed_teams(registry: Any, user: str, team: str | None = None) -> list[str] | None:
    """The teams `user` may see (None: every team, a platform engineer's); with `team`, that one or Forbidden."""
    from odin.registry import Refused
    from odin.teams.access import visible_teams

    if team is None:
        return visible_teams(registry, user)
    _team_exists(registry, team)
    try:
        with registry.refusals(user, PAGE_ACTION, f"team:{team}"):
            return visible_teams(registry, user, team)
    except Refused as e:
        raise Forbidden(str(e)) from None


def _owned_dagger(registry: Any, user: str, team: str, name: str) -> Any:
    """The dagger's record, for a member of its team or a platform engineer: NotFound, Forbidden (recorded)."""
    from odin.registry import Refused
    from odin.teams.access import require_member

    _team_exists(registry, team)
    try:
        with registry.refusals(user, PAGE_ACTION, f"dagger:{team}/{name}"):
            require_member(registry, user, team)
    except Refused as e:
        raise Forbidden(str(e)) from None
    record = registry.dagger(team, name)
    if record is None:
        raise NotFound(f"team {team} has no dagger {name!r}")
    return record


# -- the overview -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DaggerItem:
    row: Any  # jobs.lifecycle.daggers.DaggerRow: team, name, cluster, state, since, input rate, lag
    verdict: str | None  # the latest health check's
    rates: Series


@dataclass(frozen=True)
class ClusterItem:
    team: str
    name: str
    state: str
    masters: int
    workers: int
    ok: bool | None  # the latest health check's; None: not in it
    alive_workers: int | None
    problems: list[str]
    master_ui: str | None


@dataclass(frozen=True)
class LokiItem:
    id: str
    playbook: str
    team: str | None
    cluster: str | None
    state: str
    actor: str
    verdict: str | None
    score: float | None
    started_at: datetime | None
    ended_at: datetime | None


@dataclass
class Overview:
    user: str
    teams: list[str] | None  # None: every team (a platform engineer)
    daggers: list[DaggerItem] = field(default_factory=list)
    clusters: list[ClusterItem] = field(default_factory=list)
    health_checked_at: datetime | None = None
    runs: list[LokiItem] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _problem(problems: list[str], what: str) -> Callable[[BaseException], None]:
    return lambda e: problems.append(f"{what}: {type(e).__name__}: {e}")


def overview(user: str, team: str | None = None) -> Overview:
    """What the Daggers page shows `user` (only `team`'s with `team`)."""
    try:
        with platform() as (registry, state_dir, vm):
            teams = allowed_teams(registry, user, team)
            page = Overview(user, teams)
            wanted = None if teams is None else set(teams)
            health = _latest_health(state_dir, page.problems)
            page.health_checked_at = health.checked_at if health else None
            page.daggers = _daggers(registry, state_dir, vm, teams, health, page.problems)
            page.clusters = _clusters(registry, wanted, health, page.problems)
            page.runs = _loki_runs(registry, wanted, page.problems)
            return page
    except (NotFound, Forbidden):
        raise
    except Exception as e:  # the registry or the environment cannot be reached: the page says so
        page = Overview(user, [])
        page.problems.append(f"the platform registry cannot be reached: {type(e).__name__}: {e}")
        return page


def _latest_health(state_dir: Path, problems: list[str]) -> Any:
    from jobs.health.checkup import Reports

    try:
        return Reports(state_dir).latest()
    except Exception as e:
        _problem(problems, "the latest health report")(e)
        return None


def _daggers(
    registry: Any, state_dir: Path, vm: str | None, teams: list[str] | None, health: Any, problems: list[str]
) -> list[DaggerItem]:
    from jobs.lifecycle.daggers import Daggers

    if teams == []:
        return []
    try:
        rows = Daggers(registry, state_dir).list(teams, links=False)  # no need to ask masters for Spark's URLs
    except Exception as e:
        _problem(problems, "the daggers (registry)")(e)
        return []
    rates: dict[str, Series] = {}
    if vm is None:
        problems.append("input rates: this environment has no VictoriaMetrics")
    elif rows:
        try:
            rates = input_rates(vm, sorted({r.team for r in rows}))
        except Exception as e:
            _problem(problems, f"input rates from VictoriaMetrics ({vm})")(e)
    items = []
    for r in rows:
        verdict = health.dagger(r.team, r.name) if health else None
        items.append(DaggerItem(r, verdict.verdict if verdict else None, rates.get(f"{r.team}.{r.name}", [])))
    return items


def _clusters(registry: Any, teams: set[str] | None, health: Any, problems: list[str]) -> list[ClusterItem]:
    try:
        records = [c for c in registry.clusters() if c.state != "destroyed" and (teams is None or c.team in teams)]
    except Exception as e:
        _problem(problems, "the clusters (registry)")(e)
        return []
    checked = {(c.team, c.name): c for c in (health.clusters if health else [])}
    items = []
    for c in records:
        h = checked.get((c.team, c.name))
        items.append(
            ClusterItem(
                c.team,
                c.name,
                c.state,
                c.masters,
                c.workers,
                h.ok if h else None,
                h.alive_workers if h else None,
                list(h.problems) if h else [],
                h.master_ui if h else None,
            )
        )
    return items


def _loki_runs(registry: Any, teams: set[str] | None, problems: list[str]) -> list[LokiItem]:
    """Recent runs: a team's (on its perf clusters) for its members; every run for platform engineers."""
    from loki.store import SimulationStore

    try:
        runs = SimulationStore(registry).runs()
    except Exception as e:
        _problem(problems, "Loki's runs (registry)")(e)
        return []
    mine = [r for r in runs if teams is None or r.team in teams][:LOKI_RUNS]
    return [
        LokiItem(r.id, r.playbook, r.team, r.cluster, r.state, r.actor, r.verdict, r.score, r.started_at, r.ended_at)
        for r in mine
    ]


# -- the TSDB ---------------------------------------------------------------------------------------------------


def input_rates(vm: str, teams: list[str], now: float | None = None) -> dict[str, Series]:
    """Each dagger's input rate (events/s) over the last half hour, keyed by its telemetry name `<team>.<name>`: one
    range query for all of the teams' daggers."""
    end = now or time.time()
    expr = f'max by (dagger) (dagger_metrics_input_rate{{team=~"{victoria.any_of(teams)}"}})'
    params = {"query": expr, "start": end - RATE_WINDOW_S, "end": end, "step": f"{RATE_STEP_S}s"}
    r = http_client.get(f"{vm}/api/v1/query_range", params=params, timeout=TSDB_TIMEOUT_S)
    r.raise_for_status()
    out: dict[str, Series] = {}
    for series in r.json().get("data", {}).get("result", []):
        name = series.get("metric", {}).get("dagger")
        if name:
            out[name] = [(float(t), float(v)) for t, v in series.get("values", [])]
    return out


def outputs(vm: str, measurement: str, team: str, now: float | None = None) -> dict[str, Series]:
    """An influx sink's output: each field of `measurement`, summed over its tags' series at each point's time (a
    window's end), over the last hours. Points are read back as written (VictoriaMetrics' export), not resampled."""
    end = now or time.time()
    match = f'{{__name__=~"{victoria.any_of([measurement])}_.+",team="{victoria.literal(team)}"}}'
    params = {"match[]": match, "start": int(end - OUTPUT_WINDOW_S), "end": int(end)}
    with http_client.stream("GET", f"{vm}/api/v1/export", params=params, timeout=TSDB_TIMEOUT_S * 2) as r:
        r.raise_for_status()
        sums: dict[str, dict[float, float]] = {}
        for n, line in enumerate(r.iter_lines()):
            if n >= OUTPUT_MAX_SERIES:
                break
            if not line.strip():
                continue
            doc = json.loads(line)
            fieldname = doc["metric"].get("__name__", "")[len(measurement) + 1 :] or "?"
            points = sums.setdefault(fieldname, {})
            for t, v in zip(doc.get("timestamps", []), doc.get("values", []), strict=False):
                if v is not None:
                    points[t / 1000] = points.get(t / 1000, 0.0) + float(v)
    return {f: sorted(points.items()) for f, points in sorted(sums.items())}


# -- one dagger ---------------------------------------------------------------------------------------------------


@dataclass
class Detail:
    user: str
    team: str
    name: str
    state: str = "?"
    cluster: str | None = None
    since: datetime | None = None
    spec_version: int | None = None
    schema_versions: dict[str, int] = field(default_factory=dict)
    submission_id: str | None = None
    status: Any = None  # jobs.engine.status.DaggerStatus, from the status file beside its checkpoint
    health: Any = None  # jobs.health.judge.DaggerHealth of the latest check
    sink_type: str | None = None
    measurement: str | None = None
    output: dict[str, Series] = field(default_factory=dict)
    output_note: str = ""
    rates: Series = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    log_where: str = ""
    log_note: str = ""
    history: list[Any] = field(default_factory=list)  # odin.registry.records.HistoryEntry, newest first
    forms: dict[str, dict[str, Any]] = field(default_factory=dict)  # DAG id -> its form's fields for this dagger
    form_note: str = ""
    airflow_runs: dict[str, str] = field(default_factory=dict)  # DAG id -> the latest run that asked it of this dagger
    problems: list[str] = field(default_factory=list)


def detail(user: str, team: str, name: str) -> Detail:
    """One dagger, for a member of its team or a platform engineer (NotFound, Forbidden otherwise)."""
    with platform() as (registry, state_dir, vm):
        record = _owned_dagger(registry, user, team, name)
        page = Detail(user, team, name)
        try:
            _fill(page, registry, state_dir, vm, record)
        except Exception as e:  # whatever the registry or the files did not give, the page says so
            _problem(page.problems, "reading the dagger")(e)
        return page


def _fill(page: Detail, registry: Any, state_dir: Path, vm: str | None, record: Any) -> None:
    from jobs.engine.status import read_status, status_path
    from jobs.lifecycle.daggers import followed

    record = followed(registry, record)
    page.state, page.cluster, page.since = record.state, record.cluster, record.since
    page.spec_version, page.schema_versions, page.submission_id = (
        record.spec_version,
        dict(record.schema_versions),
        record.submission_id,
    )
    page.status = read_status(status_path(Path(record.checkpoint)))
    health = _latest_health(state_dir, page.problems)
    page.health = health.dagger(page.team, page.name) if health else None
    page.history = registry.history(f"dagger:{page.team}/{page.name}", limit=HISTORY_ENTRIES)
    page.airflow_runs = _airflow_runs(page.history)
    page.forms, page.form_note = forms(record.spec, record.cluster)
    _output(page, record, vm)
    _driver_log(page, registry, state_dir)


def _output(page: Detail, record: Any, vm: str | None) -> None:
    sink = record.spec.get("sink") or {}
    page.sink_type = sink.get("type")
    if vm is None:
        page.output_note = "this environment has no VictoriaMetrics"
        return
    try:
        rates = input_rates(vm, [page.team])
        page.rates = rates.get(f"{page.team}.{page.name}", [])
    except Exception as e:
        _problem(page.problems, f"input rate from VictoriaMetrics ({vm})")(e)
    if page.sink_type != "influx":
        page.output_note = f"its sink is {page.sink_type or '?'}: only an influx sink's output is in the TSDB"
        return
    page.measurement = sink.get("measurement") or f"{page.team}_{page.name}"
    try:
        page.output = outputs(vm, page.measurement, page.team)
    except Exception as e:
        page.output_note = f"VictoriaMetrics ({vm}) did not answer: {type(e).__name__}: {e}"
        return
    if not page.output:
        hours = OUTPUT_WINDOW_S // 3600
        page.output_note = f"no points of {page.measurement} (team {page.team}) in the last {hours} hours"


def _driver_log(page: Detail, registry: Any, state_dir: Path) -> None:
    """The driver's last lines, through the lifecycle (jobs/lifecycle/daggers.py `driver_log`, which decides who may
    read it); else why not, beside what the driver's status file says."""
    from jobs.lifecycle.daggers import Daggers
    from jobs.lifecycle.logs import LogUnavailable, tail
    from odin.registry import Refused

    try:
        log = Daggers(registry, state_dir).driver_log(page.team, page.name, page.user)
        page.log_lines, _ = tail(log.source, LOG_LINES)
        page.log_where = log.source.where
    except (Refused, LogUnavailable) as e:
        page.log_note = f"{e}; what the driver's status file says is above"
    except Exception as e:
        page.log_note = f"the driver's log could not be read: {type(e).__name__}: {e}"


def _airflow_runs(history: list[Any]) -> dict[str, str]:
    """The latest Airflow run of each request DAG that asked something of the dagger (newest first in history)."""
    runs: dict[str, str] = {}
    for e in history:
        dag, run = e.detail.get("request"), e.detail.get("airflow_run")
        if isinstance(dag, str) and isinstance(run, str):
            runs.setdefault(dag, run)
    return runs


# the deploy form's fields (dags/provider/params/daggers.py) and where each sits in a spec
_TOP = ("sql", "watermark_delay", "trigger_interval", "parallelism")
_STREAM = ("table", "stream")
_KAFKA = ("start", "max_events_per_trigger")


def forms(spec: dict[str, Any], cluster: str | None) -> tuple[dict[str, dict[str, Any]], str]:
    """The deploy, update and stop forms' fields for this dagger, as its recorded spec has them (defaults left out):
    flat fields where the form has them all, else the whole spec in the form's `spec` field."""
    from jobs.spec import DaggerSpec

    team, name = spec.get("team"), spec.get("name")
    stop = {"team": team, "name": name}
    try:
        asked = DaggerSpec.model_validate(spec).model_dump(mode="json", exclude_defaults=True)
    except Exception:  # recorded by an older platform: as recorded
        asked = dict(spec)
    asked.update(team=team, name=name)
    sink_type = (spec.get("sink") or {}).get("type") or "log"  # a default, so left out above: the form needs it
    asked["sink"] = {"type": sink_type, **(asked.get("sink") or {})}
    streams = asked.get("streams") or []
    stream = streams[0] if len(streams) == 1 else {}
    kafka = stream.get("kafka") or {}
    fits = (
        len(streams) == 1
        and stream.get("stream")
        and set(stream) <= {*_STREAM, "kafka"}
        and set(kafka) <= set(_KAFKA)
        and set(asked) <= {"team", "name", "streams", "sink", *_TOP}
    )
    if not fits:
        whole = {"team": team, "name": name, "cluster": cluster, "spec": asked}
        note = "its spec has settings the form's fields do not: the whole spec goes into the form's `spec` field"
        return {"dagger_deploy": whole, "dagger_update": whole, "dagger_stop": stop}, note
    sink = dict(asked.get("sink") or {})
    fields: dict[str, Any] = {"team": team, "name": name, "cluster": cluster}
    fields |= {k: stream[k] for k in _STREAM if k in stream}
    fields |= {k: kafka[k] for k in _KAFKA if k in kafka}
    fields |= {k: asked[k] for k in _TOP if k in asked}
    fields["sink_type"] = sink.pop("type")
    if sink:
        fields["sink"] = sink
    return {"dagger_deploy": fields, "dagger_update": fields, "dagger_stop": stop}, ""
