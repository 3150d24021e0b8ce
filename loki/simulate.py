"""`loki simulate`: run a planned experiment. Every step is journaled in the simulation store as it happens.

  consumers started (and running) -> steady state checked -> feeders start -> faults start and revert on their
  schedule, probes sampled every interval, safeguards watched -> feeders end -> the steady state has `settle` to
  come back -> rollbacks -> consumers stopped and drained -> the output compared with the ground truth -> report.

A halt (`loki halt`, SIGTERM, Ctrl-C or a safeguard) stops the load at once and reverts every active fault; the
consumers are still drained, so the report tells what the run did up to there.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobs.lifecycle.daggers import Daggers, followed
from loki.faults.faults import Fault, FaultError
from loki.faults.procs import ProcessId, start_time
from loki.faults.watchdog import LIMIT_MARGIN_S, ConsumerOrder, FaultOrder, Orders, Restore, Watchdog
from loki.load import consumers as consumer_ops
from loki.load.consumers import Consumer
from loki.load.feeder import Feed, run_feed
from loki.plan import NETWORK_FAULTS, ExperimentPlan
from loki.probes import WINDOW_S, Observer, Sample, judge
from loki.resources import WORKER_OF, Resource
from loki.store import SimulationStore
from odin.cluster.lifecycle import Clusters
from odin.endpoints import Endpoints, Node
from odin.kafka.topics import ensure_topics
from odin.registry import Registry
from odin.spec import Service

Say = Callable[[str], None]
START_TIMEOUT_S = 240
DISK_MB = 64
ATTRIBUTION_S = WINDOW_S  # how long after a fault's end a broken steady state is still the fault's
REVERT_TIMEOUT_S = 600.0  # a revert that brings a node back waits for its converge, itself bounded


@dataclass
class FaultRun:
    case: str
    type: str
    resource: str
    start_t: float  # seconds since the load started
    end_t: float | None = None
    error: str | None = None
    detected_t: float | None = None  # first sample after the start with a probe broken
    recovered_t: float | None = None  # first sample from which the steady state held again (see `observe`)
    steady_at_start: bool | None = None  # if not, its detection time may be what was broken before it
    undo: dict[str, Any] = field(default_factory=dict)

    def observe(self, t: float, steady: bool) -> None:
        """A sample at `t`: the fault is detected at the first one after its start with the steady state broken,
        and recovered at the first one from which it holds again. A break more than ATTRIBUTION_S after its end is
        not the fault's: the slowest probe (the processed ratio) looks back that far, so an effect of the fault
        shows by then (in a full-scale cpu-pressure run the dagger kept up through the fault, and a dip at the end
        of the load, 60 s later, was reported as the fault's detection and recovery)."""
        if self.error is not None or t <= self.start_t:  # taken as it started: what was before it
            return
        if not steady:
            if self.end_t is not None and t > self.end_t + ATTRIBUTION_S:
                return
            self.detected_t = t if self.detected_t is None else self.detected_t
            self.recovered_t = None
        elif self.detected_t is not None and self.recovered_t is None:
            self.recovered_t = t

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "undo"}


@dataclass
class RunResult:
    run_id: str
    state: str = "running"  # finished, halted, failed
    reason: str = ""
    samples: list[Sample] = field(default_factory=list)
    faults: list[FaultRun] = field(default_factory=list)
    feeds: list[Feed] = field(default_factory=list)
    consumers: dict[str, Consumer] = field(default_factory=dict)
    started_at: float = 0.0  # epoch seconds of the load's start
    ended_at: float = 0.0
    errors: list[str] = field(default_factory=list)


class Simulation:
    def __init__(
        self,
        plan: ExperimentPlan,
        run_id: str,
        registry: Registry,
        nodes: dict[str, Node],
        state_dir: Path,
        run_dir: Path,
        actor: str,
        say: Say | None = None,
    ) -> None:
        self.plan, self.book = plan, plan.playbook
        self.registry, self.nodes, self.state_dir, self.run_dir, self.actor = registry, nodes, state_dir, run_dir, actor
        self.store = SimulationStore(registry)
        self.say = say or (lambda _m: None)
        self.halt = threading.Event()
        self.result = RunResult(run_id)
        self.where = Endpoints(nodes)
        self.daggers = Daggers(registry, state_dir, self.say)
        self.clusters = Clusters(registry, state_dir)
        self._active: list[tuple[Fault, FaultRun]] = []
        self._reverting: list[threading.Thread] = []  # reverts under way (a converge takes tens of seconds)
        self._producers_lost: list[threading.Event] = []  # one per feeder
        self._partitions: dict[int, dict[str, int]] = {}  # per feeder: its topics' partition counts
        self.watch: Watchdog | None = None

    # -- helpers -----------------------------------------------------------------------------------------------

    def journal(self, step: str, **detail: Any) -> None:
        self.store.journal(self.result.run_id, step, **detail)

    def _restore(self, r: Resource) -> None:
        """Odin brings a killed node back: the cluster's converge, or the environment's for a broker."""
        self.journal("restore", resource=r.name)
        if r.kind == "spark" and r.cluster:
            team, name = r.cluster.split("/", 1)
            self.clusters.heal(team, name, self.actor, f"loki run {self.result.run_id}: bring {r.name} back")
        elif r.kind == "broker":
            from odin.stack import Stack

            stack = Stack(self.book.target.environment, self.state_dir)
            report = stack.up(stack.resolve(None, {Service.kafka_broker}, None))
            if not report.ok:
                raise FaultError(f"{r.name}: odin up did not bring it back")
            self._ensure_feeder_topics()  # a broker back from a data-disk loss has none: as its operators would
            for lost in self._producers_lost:  # and its clients' producer state is gone: the feeders renew theirs
                lost.set()

    def _workers(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {}
        for c in self.result.consumers.values():
            if c.cluster and c.cluster not in out:
                team, name = c.cluster.split("/", 1)
                out[c.cluster] = [n for n in self.clusters.nodes(team, name).values() if n["role"] == "spark_worker"]
        return out

    # -- the run -----------------------------------------------------------------------------------------------

    def _start_watchdog(self) -> None:
        """The process that ends this run's faults if this one dies or hangs (loki/faults/watchdog.py)."""
        me = ProcessId.me()
        limit = self.book.safeguards.max_duration.total_seconds() + START_TIMEOUT_S + LIMIT_MARGIN_S
        orders = Orders(run_id=self.result.run_id, owner_pid=me.pid, owner_started=me.started,
                        until=time.time() + limit, registry_url=self.where.registry_url,
                        state_dir=str(self.state_dir), actor=self.actor)  # fmt: skip
        self.watch = Watchdog.start(self.run_dir / "watchdog.json", orders)
        self.journal("watchdog.started", pid=self.watch.pid)

    def run(self) -> RunResult:
        result = self.result
        self.store.start(result.run_id, self.book, self.actor)
        self.journal("plan", touches=[vars(t) for t in self.plan.touches])
        self._start_watchdog()
        previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():  # an Airflow task may run us elsewhere
            previous = {s: signal.signal(s, lambda *_: self.halt.set()) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._start_consumers()
            if not self.halt.is_set():  # halted while the consumers started: nothing more to do
                observer = Observer(self.where.victoria_metrics_url, self.registry, self._workers())
                before = self._sample(observer, 0.0, [])
                self.journal("steady_state.before", probes=before.probes)
                if not before.steady:
                    raise RuntimeError(f"the steady state does not hold before the experiment: {before.probes}")
                self._load_and_faults(observer)
            if result.samples:
                self.journal("steady_state.after", probes=result.samples[-1].probes)
        except Exception as e:  # the run failed: still revert, stop, drain and report what happened
            result.state, result.reason = "failed", f"{type(e).__name__}: {e}"
            self.journal("failed", error=result.reason)
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
            self._revert_all()
            self._rollbacks()
            self._stop_consumers()
            if self.watch is not None:
                self.watch.done()
        if result.state == "running":
            result.state = "halted" if self.halt.is_set() else "finished"
        self.journal("ended", state=result.state, reason=result.reason)
        return result

    def _start_consumers(self) -> None:
        book, result = self.book, self.result
        self._ensure_feeder_topics()
        targeted = {t.resource.removeprefix("link/") for t in self.plan.touches if t.resource.startswith("link/")}
        disks = {
            t.resource.removeprefix("dagger/")
            for t in self.plan.touches
            if t.resource.startswith("dagger/") and "checkpoint filesystem" in t.action
        }
        for c in book.load.consumers:
            spec = self.plan.specs[c.name]
            consumer = consumer_ops.prepare(
                c.name,
                spec,
                c.placement,
                self.run_dir,
                self.registry,
                cluster=f"{book.target.team}/{book.target.cluster}" if c.placement == "cluster" else None,
                network=c.name in targeted,
                disk_mb=DISK_MB if c.name in disks else None,
                nodes=self.nodes,
            )
            result.consumers[c.name] = consumer
            self._watch_consumer(consumer)  # its namespace and mount, before anything can fail
            self.say(f"starting consumer {c.name} ({c.placement})")
            if c.placement == "cluster":
                assert book.target.cluster is not None
                consumer.place(self.daggers, book.target.cluster, self.actor)
                self.daggers.deploy(consumer.spec, book.target.cluster, self.actor)
            else:
                consumer_ops.start(consumer, None, self.actor)
            self._watch_consumer(consumer)
            self.journal("consumer.started", consumer=c.name, dagger=consumer.qualified_name)
        self._wait_first_progress()

    def _watch_consumer(self, c: Consumer) -> None:
        if self.watch is None:
            return
        pid = c.process.pid if c.process is not None else None  # its own session: pgid == pid
        self.watch.consumer(
            ConsumerOrder(
                name=c.name,
                pgid=pid,
                started=start_time(pid) if pid else None,
                dagger=f"{c.spec.team}/{c.spec.name}" if c.placement == "cluster" else None,
                netns=c.link.netns if c.link is not None else None,
                mount=str(c.disk) if c.disk is not None else None,
            )
        )

    def _ensure_feeder_topics(self) -> None:
        """Create the feeders' topics where missing; an existing topic keeps its partitions, and a broker back from a
        data-disk loss gets them as they were (its consumers' checkpoints know them)."""
        for i, f in enumerate(self.book.load.feeders):
            bootstrap = self._feeder_bootstrap(f.stream)
            wanted = self._partitions.get(i) or dict.fromkeys(self.plan.feeder_topics[i], f.partitions)
            self._partitions[i] = ensure_topics({"bootstrap.servers": bootstrap}, dict(wanted))

    def _feeder_bootstrap(self, stream: str) -> str:
        record = self.registry.stream(stream)
        assert record is not None  # the plan checked it
        return record.serving_bootstrap_servers

    def _wait_first_progress(self) -> None:
        """Every consumer has reported a batch (its telemetry reached VictoriaMetrics)."""
        from odin.apis import victoria

        deadline = time.monotonic() + START_TIMEOUT_S
        waiting = set(self.result.consumers)
        while waiting and time.monotonic() < deadline and not self.halt.is_set():
            if self.store.halt_requested(self.result.run_id):
                self._halt("halted: loki halt")
                return
            for name in sorted(waiting):
                c = self.result.consumers[name]
                if c.placement == "local" and not c.alive:
                    raise RuntimeError(f"consumer {name} exited at start; see {c.log_file}")
                tag = f'dagger="{c.qualified_name}"'
                with contextlib.suppress(Exception):
                    expr = f"last_over_time(dagger_metrics_input_rows{{{tag}}}[10m])"
                    if victoria.query(self.where.victoria_metrics_url, expr) is not None:
                        waiting.discard(name)
            time.sleep(1)
        if waiting:
            raise RuntimeError(f"consumers {sorted(waiting)} reported no batch in {START_TIMEOUT_S}s")

    def _load_and_faults(self, observer: Observer) -> None:
        book, result = self.book, self.result
        stop_feeders = threading.Event()
        feeds: list[Feed | None] = [None] * len(book.load.feeders)
        live: list[Feed] = []

        def feed(i: int) -> None:
            f = book.load.feeders[i]
            record = self.registry.stream(f.stream)
            assert record is not None

            def tick(fd: Feed) -> None:
                if feeds[i] is None:  # its history, even if the feeder never returns
                    feeds[i] = fd
                    live.append(fd)

            try:
                run_feed(f, record.proto, self.plan.feeder_topics[i], record.serving_bootstrap_servers, stop_feeders,
                         on_tick=tick, reset=self._producers_lost[i])  # fmt: skip
            except Exception as e:  # the report says so; what it had sent keeps its fates
                result.errors.append(f"feeder {i} ({f.stream}) stopped: {type(e).__name__}: {e}")
                self.journal("feeder.failed", feeder=i, error=str(e))

        self._producers_lost = [threading.Event() for _ in book.load.feeders]
        threads = [threading.Thread(target=feed, args=(i,), daemon=True) for i in range(len(book.load.feeders))]
        result.started_at = time.time()
        t0 = time.monotonic()
        self.journal("load.started")
        for t in threads:
            t.start()
        pending = sorted(book.cases, key=lambda c: c.start)
        interval = book.steady_state.interval.total_seconds()
        load_s = book.load.duration.total_seconds()
        settle_s = book.steady_state.settle.total_seconds()
        deadline = t0 + book.safeguards.max_duration.total_seconds()
        broken_since: float | None = None
        history: list[tuple[float, int]] = []
        next_sample = t0
        while not self.halt.is_set():
            now = time.monotonic()
            t = now - t0
            if now > deadline:
                self._halt(f"safeguard: max_duration {book.safeguards.max_duration} reached")
                break
            while pending and pending[0].start.total_seconds() <= t:
                self._start_case(pending.pop(0), t)
            for fault, fr in list(self._active):
                if self._fault_end(fault) <= t:
                    self._end_fault(fault, fr, t)
            if now < next_sample:  # woken for a fault's start or end: faults keep their own time, not the samples'
                self._sleep_until(t0, next_sample, pending)
                continue
            next_sample = now + interval
            if self.store.halt_requested(result.run_id):  # `loki halt` from anywhere (a signal needs our host)
                self._halt("halted: loki halt")
                break
            sent = sum(f.sent for f in live)
            history.append((t, sent))
            sent_30s = sent - next((n for (ts, n) in history if ts >= t - WINDOW_S), 0)
            sample = self._sample(observer, t, live, sent_30s)
            result.samples.append(sample)
            for fr in result.faults:
                fr.observe(sample.t, sample.steady)
            if sample.steady:
                broken_since = None
            elif broken_since is None:
                broken_since = t
            if self._safeguards_broken(sample, broken_since, t):
                break
            feeding = any(th.is_alive() for th in threads)
            reverting = any(th.is_alive() for th in self._reverting)
            if not feeding and not pending and not self._active and not reverting:
                recovered = all(fr.recovered_t is not None or fr.detected_t is None for fr in result.faults)
                if (sample.steady and recovered) or t > load_s + settle_s:
                    break
            self._sleep_until(t0, next_sample, pending)
        stop_feeders.set()
        self._revert_all()  # before waiting for the feeders: a paused broker would hold their last answers
        for th in threads:
            th.join(120)
        # a feeder that did not return (it failed, or still waits for answers) leaves its history as it stands
        result.feeds = [f for f in feeds if f is not None]
        self.journal("load.ended", feeds=[f.counts() for f in result.feeds])

    @staticmethod
    def _fault_end(fault: Fault) -> float:
        return fault.case.start.total_seconds() + fault.case.duration.total_seconds()

    def _sleep_until(self, t0: float, next_sample: float, pending: list[Any]) -> None:
        """Until the next sample, or sooner, the next fault's start or end."""
        wake = [next_sample, *(t0 + c.start.total_seconds() for c in pending[:1])]
        wake += [t0 + self._fault_end(f) for f, _ in self._active]
        self.halt.wait(max(0.0, min(wake) - time.monotonic()))

    def _sample(self, observer: Observer, t: float, feeds: list[Feed], sent_30s: int = 0) -> Sample:
        sample = Sample(
            t=t,
            sent=sum(f.sent for f in feeds),
            acknowledged=sum(f.counts()["acknowledged"] for f in feeds),
            sent_30s=sent_30s,
        )
        ends: dict[tuple[str, int], int] = {}
        for f in feeds:
            for tp, end in f.acked_ends().items():
                ends[tp] = max(ends.get(tp, 0), end)
        newest = [float(f.times[f.sent - 1]) for f in feeds if f.sent]
        fed_until = max(newest) if newest else None
        for name, c in self.result.consumers.items():
            sample.consumers[name] = observer.consumer(c, ends, fed_until)
        for p in self.book.steady_state.probes:
            sample.probes[f"{p.type}:{p.consumer}"] = judge(p, sample.consumers[p.consumer], sample.sent, sent_30s)
        return sample

    def _safeguards_broken(self, sample: Sample, broken_since: float | None, t: float) -> bool:
        guards = self.book.safeguards
        if guards.max_lag is not None:
            for name, s in sample.consumers.items():
                if s.lag is not None and s.lag > guards.max_lag:
                    self._halt(f"safeguard: {name} is {s.lag:.0f} events behind (max_lag {guards.max_lag})")
                    return True
        limit = guards.max_failed_probe_time
        if limit is not None and broken_since is not None and t - broken_since > limit.total_seconds():
            self._halt(f"safeguard: the steady state stayed broken {t - broken_since:.0f}s")
            return True
        return False

    def _halt(self, reason: str) -> None:
        self.result.state, self.result.reason = "halted", reason
        self.halt.set()
        self.journal("halt", reason=reason)
        self.say(reason)

    def _start_case(self, case: Any, t: float) -> None:
        for r in self.plan.targets.get(case.name, []):
            fr = FaultRun(case.name, case.type, r.name, t)
            fr.steady_at_start = self.result.samples[-1].steady if self.result.samples else None
            self.result.faults.append(fr)
            consumer = self.result.consumers.get(r.name.split("/", 1)[1]) if r.kind in ("link", "dagger") else None
            fault = Fault(
                case,
                self._live(r),
                restore=self._restore,
                link=consumer.link if consumer and case.type in NETWORK_FAULTS else None,
                disk=consumer.disk if consumer else None,
            )
            try:
                # the watchdog's order before the fault is applied: a Loki stopped or killed at any point after has
                # its fault ended by the watchdog
                fr.undo = fault.start(announce=lambda undo, fault=fault, fr=fr: self._watch_fault(fault, fr, undo))
            except Exception as e:
                fr.error = f"{type(e).__name__}: {e}"
                self._revert_failed_start(fault, fr)
                self.journal("fault.refused", case=case.name, resource=r.name, error=fr.error)
                self.say(f"fault {case.name} on {r.name} failed to start: {fr.error}")
                continue
            self._active.append((fault, fr))
            self.journal("fault.started", case=case.name, type=case.type, resource=r.name, undo=fr.undo, t=t)
            self.say(f"{t:6.1f}s fault {case.name}: {case.type} {r.name}")

    def _watch_fault(self, fault: Fault, fr: FaultRun, undo: dict[str, Any]) -> None:
        if self.watch is None:
            return
        case, r = fault.case, fault.resource
        back = case.type == "broker_loss" or (case.type == "kill" and case.restart)
        restore = None
        if back and r.kind in ("broker", "spark"):
            restore = Restore(kind=r.kind, environment=self.book.target.environment, state_dir=str(self.state_dir),
                              cluster=r.cluster)  # fmt: skip
        deadline = self.result.started_at + self._fault_end(fault)
        self.watch.fault(FaultOrder(case=fr.case, resource=fr.resource, deadline=deadline, undo=undo,
                                    restore=restore))  # fmt: skip

    def _revert_failed_start(self, fault: Fault, fr: FaultRun) -> None:
        """Whatever part of a fault that failed to start was applied is undone, and its order withdrawn."""
        try:
            fault.revert()
        except Exception as e:
            self.result.errors.append(f"{fr.case} on {fr.resource}: revert of a failed start: {e}")
        if self.watch is not None:
            self.watch.reverted(fr.case, fr.resource)

    def _live(self, r: Resource) -> Resource:
        """A planned driver resource, or the worker running it (`.../worker-of/<dagger>`), with what finds its
        processes now that the consumer is deployed."""
        if r.node is not None or not (r.kind == "driver" or f"/{WORKER_OF}/" in r.name):
            return r
        team, name = r.name.split("/")[1], r.name.rsplit("/", 1)[1]
        record = self.registry.dagger(team, name)
        if record is None or record.cluster is None:
            return r
        record, cluster = followed(self.registry, record), f"{team}/{record.cluster}"
        for w in self._workers().get(cluster, []):
            driver = Resource(
                f"driver/{team}/{name}", r.detail, node=w, cluster=cluster, submission_id=record.submission_id
            )
            if not driver.pids():
                continue
            if r.kind == "driver":
                return driver
            return Resource(r.name, f"{w['name']}, running {name}'s driver", node=w, cluster=cluster)
        return r

    def _end_fault(self, fault: Fault, fr: FaultRun, t: float) -> None:
        """The fault ends at `t`; its revert runs beside the samples, as bringing a node back (Odin's converge,
        waiting for the cluster's health) takes tens of seconds, and the timeline must not stop meanwhile."""
        self._active.remove((fault, fr))
        fr.end_t = t
        if self.watch is not None:
            self.watch.take(fr.case, fr.resource)
        thread = threading.Thread(target=self._revert, args=(fault, fr), name=f"revert {fr.case}", daemon=True)
        thread.start()
        self._reverting.append(thread)

    def _revert(self, fault: Fault, fr: FaultRun) -> None:
        started = time.monotonic()
        try:
            fault.revert()
        except Exception as e:
            fr.error = f"revert: {type(e).__name__}: {e}"
            self.result.errors.append(f"{fr.case} on {fr.resource}: {fr.error}")
        self.journal("fault.reverted", case=fr.case, resource=fr.resource, t=fr.end_t, error=fr.error)
        if self.watch is not None:
            self.watch.reverted(fr.case, fr.resource)
        self.say(f"{fr.end_t:6.1f}s fault {fr.case} reverted (in {time.monotonic() - started:.1f} s)")

    def _revert_all(self) -> None:
        """End every fault still on, and wait for every revert."""
        t = time.time() - self.result.started_at if self.result.started_at else 0.0
        for fault, fr in list(self._active):
            self._end_fault(fault, fr, t)
        for thread in self._reverting:
            thread.join(REVERT_TIMEOUT_S)
            if thread.is_alive():
                self.result.errors.append(f"{thread.name}: not done after {REVERT_TIMEOUT_S:.0f} s")

    def _rollbacks(self) -> None:
        for rb in self.book.rollbacks:
            try:
                if rb.action == "converge_cluster" and self.book.target.team and self.book.target.cluster:
                    self.clusters.heal(self.book.target.team, self.book.target.cluster, self.actor, "loki rollback")
                elif rb.action == "converge_stack":
                    from odin.stack import Stack

                    stack = Stack(self.book.target.environment, self.state_dir)
                    stack.up(stack.resolve(None, None, None))
                elif rb.action == "restart_consumer" and rb.consumer in self.result.consumers:
                    c = self.result.consumers[rb.consumer]
                    if c.placement == "local" and not c.alive:
                        consumer_ops.start(c, None, self.actor)
                self.journal("rollback", action=rb.action)
            except Exception as e:
                self.result.errors.append(f"rollback {rb.action}: {e}")
                self.journal("rollback.failed", action=rb.action, error=str(e))

    def _stop_consumers(self) -> None:
        for name, c in self.result.consumers.items():
            try:
                self.say(f"draining consumer {name}")
                if not consumer_ops.drained_in_place(c, self.daggers, self.actor):
                    consumer_ops.stop(c, self.daggers, self.actor)
                    consumer_ops.drain(c, self.registry)
                self.journal("consumer.drained", consumer=name)
            except Exception as e:
                self.result.errors.append(f"consumer {name}: {e}")
                self.journal("consumer.failed", consumer=name, error=str(e))
            finally:
                consumer_ops.close(c)
        self.result.ended_at = time.time()
