"""What `loki simulate | feed | halt` and the loki_chaos DAG do: plan -> simulate -> verify -> report -> store."""

from __future__ import annotations

import csv
import signal
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from loki.access import ACTION, authorise, may_halt
from loki.broker_check import check as check_broker
from loki.faults.faults import revert
from loki.faults.procs import ProcessId
from loki.load.feeder import FATE_NAMES, Digest, run_feed
from loki.plan import ExperimentPlan, plan, template_values
from loki.playbook import Playbook
from loki.report import build, write
from loki.resources import environment_nodes, inventory
from loki.simulate import Simulation
from loki.store import HALT_REQUESTED, SimulationStore, new_run_id
from loki.verify import against_truth
from odin.environment import connect_registry
from odin.kafka.topics import ensure_topics
from odin.registry import Registry

Actor = Callable[[Registry], str]  # who acts, established with the registry at hand (odin.teams.actor, the DAG's user)
HALT_WAIT_S = 180
TRUTH_WINDOW_S = 60.0  # the ground truth's windows (the surge query's)


def registry_stream_bootstrap(registry: Registry, stream: str) -> str:
    record = registry.stream(stream)
    assert record is not None  # the plan checked it
    return record.serving_bootstrap_servers


def write_truth(digests: list[Digest], path: Path) -> None:
    """The feeders' ground truth at its finest: events per window of event time and key, by fate."""
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["feeder", "window_start", "key", *FATE_NAMES])
        for i, d in enumerate(digests):
            for (window, key), counts in sorted(d.keys.items()):
                out.writerow([i, datetime.fromtimestamp(window, UTC).isoformat(), key, *counts])


def reports_dir(state_dir: Path, reports: Path | None) -> Path:
    return reports or state_dir / "loki" / "runs"


class PlanRefused(RuntimeError):
    """The plan refuses the run (nothing was touched): one refusal per line, each with its path."""


def _environment(environment: str, state_dir: Path | None) -> tuple[dict[str, Any], Path]:
    """The environment's nodes and state directory; PlanRefused when it was never brought up."""
    nodes, state = environment_nodes(environment, state_dir)
    if not nodes:
        raise PlanRefused(f"target.environment: {environment!r} was never brought up: run `odin up`")
    return nodes, state


def experiment_plan(book: Playbook, registry: Registry, nodes: dict[str, Any], state: Path, actor: str, run_id: str,
                    action: str = ACTION) -> ExperimentPlan:  # fmt: skip
    """The one way an experiment is planned (`loki plan`, `loki simulate`, the loki_chaos DAG): the playbook as
    `actor` may run it (loki.access: a team member's with the platform's blast radius; Refused, recorded, otherwise),
    resolved against the environment's resources (read only) and the registry's streams, with what it refuses."""
    book = authorise(registry, actor, book, action=action)
    found = inventory(book.target.environment, nodes, registry, state)
    return plan(book, found, registry.streams(), template_values(book, nodes, run_id))


def plan_only(book: Playbook, state_dir: Path | None, actor_of: Actor, run_id: str = "plan") -> ExperimentPlan:
    """`loki plan`: exactly what a run would touch and what it refuses; nothing is touched (PlanRefused when the
    environment was never brought up, Refused when the actor may not run it)."""
    nodes, state = _environment(book.target.environment, state_dir)
    registry = connect_registry(nodes)
    try:
        return experiment_plan(book, registry, nodes, state, actor_of(registry), run_id, action="loki_plan")
    finally:
        registry.close()


def authorised_plan(book: Playbook, registry: Registry, nodes: dict[str, Any], state: Path, actor: str, run_id: str
                    ) -> ExperimentPlan:  # fmt: skip
    """The plan of what `actor` may run (loki.access), or PlanRefused / Refused, recorded in the history."""
    planned = experiment_plan(book, registry, nodes, state, actor, run_id)
    if not planned.ok:
        reason, book = "\n".join(planned.refusals), planned.playbook
        registry.record(actor, ACTION, f"loki:{book.target.environment}/{book.name}", "refused", reason)
        raise PlanRefused(reason)
    return planned


def run_playbook(
    book: Playbook, state_dir: Path | None, actor_of: Actor | str, reports: Path | None, say: Callable[[str], None]
) -> tuple[dict[str, Any], Path]:
    """The whole run: its report and where the HTML page is. Refused or PlanRefused before anything is touched.
    `actor_of`: how the entry point establishes who acts (a name only from code that did so itself: the bench)."""
    nodes, state = _environment(book.target.environment, state_dir)
    registry = connect_registry(nodes)
    try:
        run_id = new_run_id()
        actor = actor_of if isinstance(actor_of, str) else actor_of(registry)
        planned = authorised_plan(book, registry, nodes, state, actor, run_id)
        book = planned.playbook
        run_dir = reports_dir(state, reports) / run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        say(f"loki run {run_id}: {book.name} on {book.target.environment}; journal in the registry")
        result = Simulation(planned, run_id, registry, nodes, state, run_dir, actor, say=say).run()
        comparisons, broker = {}, None
        try:
            say("regenerating the feeders' events: the ground truth per window and key")
            digests = [f.digest(TRUTH_WINDOW_S) for f in result.feeds]
            write_truth(digests, run_dir / "ground_truth.csv")
            say("reading the acknowledged events back from the broker")
            topics = {t: registry_stream_bootstrap(registry, f.feeder.stream) for f in result.feeds for t in f.topics}
            try:
                broker = check_broker(topics, digests)
            except Exception as e:  # the sink's comparison stands without it
                result.errors.append(f"broker check: {type(e).__name__}: {e}")
            say("computing the ground truth and comparing every consumer's sink")
            comparisons = against_truth(book, result, digests, broker)
        except Exception as e:
            result.errors.append(f"ground truth: {type(e).__name__}: {e}")
        report = build(book, result, comparisons, registry, broker)
        json_path, html_path = write(report, run_dir)
        summary = {"events": report["events"], "cases": report["cases"], "json": str(json_path)}
        SimulationStore(registry).finish(
            run_id,
            result.state,  # type: ignore[arg-type]
            verdict=report["verdict"],
            score=report["score"],
            report=str(html_path),
            summary=summary,
        )
        return report, html_path
    finally:
        registry.close()


def feed_only(book: Playbook, state_dir: Path | None, actor_of: Actor, console: Console) -> list[dict[str, int]]:
    nodes, _ = _environment(book.target.environment, state_dir)
    registry = connect_registry(nodes)
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        book = authorise(registry, actor_of(registry), book, action="loki_feed")
        counts = []
        for f in book.load.feeders:
            record = registry.stream(f.stream)
            if record is None or not record.perf_twin_of:
                raise ValueError(f"load.feeders: {f.stream!r} is not a perf stream of the catalog")
            bootstrap = record.serving_bootstrap_servers
            ensure_topics({"bootstrap.servers": bootstrap}, dict.fromkeys(record.topics, f.partitions))
            with console.status(f"feeding {f.stream}") as status:
                done = run_feed(
                    f, record.proto, record.topics, bootstrap, stop,
                    on_tick=lambda fd, name=f.stream: status.update(f"feeding {name}: {fd.sent:,} sent"),
                )  # fmt: skip
            counts.append(done.counts())
        return counts
    finally:
        signal.signal(signal.SIGINT, previous)
        registry.close()


def _process(run: Any) -> ProcessId | None:
    """The run's process, if it runs on this host and is still the one recorded (pid and start time)."""
    started = run.summary.get("pid_started")
    if not run.pid or started is None or run.summary.get("host") != socket.gethostname():
        return None
    proc = ProcessId(int(run.pid), int(started))
    return proc if proc.alive else None


def halt_all(environment: str, state_dir: Path | None, actor_of: Actor) -> list[str]:
    """Every running run the actor may halt stops and reverts its faults: asked through the store (the run polls
    it, wherever it runs: a DAG's task too) and by SIGTERM when its process is here and still the one recorded. A
    run whose process is gone has its faults reverted from its journal (those its watchdog has not) and is marked
    halted."""
    nodes, _ = environment_nodes(environment, state_dir)
    if not nodes:
        return [f"environment {environment!r} was never brought up: nothing runs"]
    registry = connect_registry(nodes)
    lines = []
    try:
        actor = actor_of(registry)
        store = SimulationStore(registry)
        running = []
        for run in store.runs(state="running"):
            if run.environment != environment:
                continue
            if not may_halt(registry, actor, run.team):
                registry.record(actor, "loki_halt", f"loki:{run.id}", "refused", f"{actor} may not halt {run.id}")
                lines.append(f"{run.id} ({run.playbook}): not yours to halt (team {run.team or '-'})")
                continue
            running.append(run)
            store.request_halt(run.id, actor)
            registry.record(actor, "loki_halt", f"loki:{run.id}", "ok", f"halt of {run.playbook}")
            proc = _process(run)
            if proc is not None:
                proc.signal(signal.SIGTERM)  # the run reverts its faults, drains and reports
            lines.append(f"{run.id} ({run.playbook}): halting (pid {run.pid})")
        deadline = time.monotonic() + HALT_WAIT_S
        for run in running:
            while time.monotonic() < deadline:
                current = store.get(run.id)
                if current is None or current.state != "running" or _gone(store, run):
                    break
                time.sleep(1)
            current = store.get(run.id)
            if current is not None and current.state == "running":
                reverted = _revert_from_journal(store, run.id)
                store.finish(run.id, "halted", summary={"halted_by": "loki halt", "reverted": reverted})
                lines.append(f"{run.id}: its process is gone; {len(reverted)} fault(s) reverted from its journal")
            else:
                lines.append(f"{run.id}: {current.state if current else 'gone'}")
        if not running:
            lines.append("no experiment is running")
        return lines
    finally:
        registry.close()


def _gone(store: SimulationStore, run: Any, quiet_s: float = 30.0) -> bool:
    """Its process here is gone; or it runs elsewhere (another host, an Airflow worker) and its journal has been
    silent for `quiet_s` (a run journals every step and sample)."""
    if run.summary.get("host") == socket.gethostname():
        return _process(run) is None
    entries = [e for e in store.entries(run.id) if e.step != HALT_REQUESTED]
    if not entries:
        return True
    last = entries[-1].at
    return (datetime.now(UTC) - (last if last.tzinfo else last.replace(tzinfo=UTC))).total_seconds() > quiet_s


def _revert_from_journal(store: SimulationStore, run_id: str) -> list[str]:
    entries = store.entries(run_id)
    reverted = {(e.detail.get("case"), e.detail.get("resource")) for e in entries if e.step == "fault.reverted"}
    done = []
    for e in entries:
        key = (e.detail.get("case"), e.detail.get("resource"))
        if e.step == "fault.started" and key not in reverted:
            revert(dict(e.detail.get("undo") or {}))
            store.journal(run_id, "fault.reverted", case=key[0], resource=key[1], by="loki halt")
            done.append(f"{key[0]} on {key[1]}")
    return done


def playbook_from_params(params: dict[str, Any], standard_dir: Path) -> Playbook:
    """The loki_chaos DAG's params: a standard playbook by name, or one inline (`playbook_spec`), aimed at the
    params' target, given the params' settle time and scaled. PlaybookError names every bad field."""
    from loki.playbook import load, parse

    inline = params.get("playbook_spec") or None
    book = parse(inline, "playbook_spec") if inline else load(standard_dir / f"{params['playbook']}.yaml")
    target = {k: params.get(k) or None for k in ("environment", "team", "cluster")}
    settle = str(params["settle"]) if params.get("settle") else None
    rate, time_ = float(params.get("rate_scale") or 1.0), float(params.get("time_scale") or 1.0)
    return book.prepared(settle=settle, rate=rate, time=time_, **target)
