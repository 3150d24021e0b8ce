"""`loki plan`: a playbook resolved against the environment's resources: exactly what a run would touch, or why it
may not run. Nothing is touched here; `loki simulate` runs only a plan without refusals.

Refused: a fault target that matches nothing or anything outside `blast_radius`; load on a topic that is not a
perf topic; a consumer reading a non-perf stream or writing anywhere but its team's places (loki/faults/confine.py); a
broker fault on a broker that also holds non-perf topics (a broker cannot be paused for one topic: everything it
holds would suffer), that serves a catalog data stream, or that does not answer (what it holds is unknown); with a
target cluster, a driver or node of another cluster. Every check fails closed.
"""

from __future__ import annotations

import contextlib
import string
from dataclasses import dataclass, field
from typing import Any

from jobs.spec import DaggerSpec, SpecError, parse_spec
from loki.faults.confine import consumer_refusals
from loki.playbook import NETWORK_FAULTS, PERF_SUFFIX, Consumer, Playbook
from loki.resources import WORKER_OF, Resource, covered, matching
from odin.endpoints import Endpoints, Node
from odin.models import read_mapping
from odin.registry.records import StreamRecord

BROKER_FAULTS = ("pause", "kill", "broker_loss")


def is_perf_topic(topic: str) -> bool:
    return topic.endswith(PERF_SUFFIX) or topic.endswith(f"{PERF_SUFFIX}.dlq")


def _addresses(servers: str) -> set[str]:
    return {s.strip() for s in servers.split(",") if s.strip()}


def _broker_refusal(r: Resource, fault: str, data_brokers: set[str]) -> str | None:
    """Why a broker fault may not hit `r`, failing closed: a broker that did not answer may hold anything."""
    if r.topics is None:
        return f"{r.name} did not answer: what it holds is unknown, so a {fault} is refused (is it up?)"
    if r.address is None or r.address in data_brokers:
        return f"{r.name} serves catalog data streams; a {fault} would harm them: aim broker faults at the perf broker"
    others = sorted(t for t in r.topics if not is_perf_topic(t))
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        return (f"{r.name} also holds non-perf topics ({shown}); a {fault} would harm them: aim broker faults at the "
                "perf cluster's broker")  # fmt: skip
    return None


@dataclass(frozen=True)
class Touch:
    resource: str
    action: str
    by: str  # the case, feeder or consumer that touches it


@dataclass
class ExperimentPlan:
    playbook: Playbook
    touches: list[Touch] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    targets: dict[str, list[Resource]] = field(default_factory=dict)  # per case name
    specs: dict[str, DaggerSpec] = field(default_factory=dict)  # per consumer name
    feeder_topics: dict[int, list[str]] = field(default_factory=dict)  # per feeder index

    @property
    def ok(self) -> bool:
        return not self.refusals


def template_values(playbook: Playbook, nodes: dict[str, Node], run_id: str) -> dict[str, str]:
    """What a consumer's spec may name as `${...}`: the environment's addresses, the target, the run's id (so each
    run writes a sink table of its own: `surge_${run}`)."""
    where = Endpoints(nodes)
    values = {"run": run_id, **{k: str(v) for k, v in playbook.target.model_dump().items() if v is not None}}
    for name in ("kafka_bootstrap", "perf_kafka_bootstrap", "postgres_dsn", "victoria_metrics_url", "influxdb_url"):
        with contextlib.suppress(LookupError):
            values[name] = getattr(where, name)
    return values


def _filled(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):
        return string.Template(value).safe_substitute(values)
    if isinstance(value, dict):
        return {k: _filled(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, values) for v in value]
    return value


def consumer_spec(c: Consumer, values: dict[str, str]) -> DaggerSpec:
    """The consumer's dagger spec with `${...}` filled in; relative `schemas` resolve against its spec file."""
    if c.spec_file is not None:
        data = read_mapping(c.spec_file, SpecError)
        data["schemas"] = [str(c.spec_file.resolve().parent / p) for p in data.get("schemas") or []]
    else:
        data = dict(c.spec or {})
    if c.kafka:
        data["streams"] = [{**st, "kafka": {**(st.get("kafka") or {}), **c.kafka}} for st in data.get("streams") or []]
    return parse_spec(_filled(data, values))


def _planned(playbook: Playbook, specs: dict[str, DaggerSpec]) -> list[Resource]:
    """The resources the run itself creates: its consumers, the network paths of the local ones and the drivers
    of those deployed on the target cluster."""
    out = []
    for c in playbook.load.consumers:
        where = "run by Loki on this machine" if c.placement == "local" else f"deployed on {playbook.target.cluster}"
        out.append(Resource(f"dagger/{c.name}", f"consumer, {where}"))
        if c.placement == "local":
            out.append(Resource(f"link/{c.name}", "its Kafka traffic, through the run's network namespace and proxy"))
        elif c.name in specs:
            spec, cluster = specs[c.name], playbook.target.cluster
            out.append(Resource(f"driver/{spec.team}/{spec.name}", f"driver of consumer {c.name}"))
            worker = f"spark/{spec.team}/{cluster}/{WORKER_OF}/{spec.name}"
            out.append(Resource(worker, f"the worker running consumer {c.name}'s driver"))
    return out


def _action(case_type: str, r: Resource, duration: str, restart: bool, magnitude: float | None) -> str:
    pids = ",".join(str(p) for p in r.pids()) or "-"
    return {
        "kill": f"SIGKILL pids {pids}" + (f"; brought back after {duration}" if restart else "; left to self-healing"),
        "pause": f"SIGSTOP pids {pids} for {duration}, then SIGCONT",
        "broker_loss": f"SIGKILL pids {pids}, restarted empty after {duration} (its in-memory topics are lost)",
        "cpu_pressure": f"stress-ng --cpu {int(magnitude or 0)} for {duration}",
        "memory_pressure": f"stress-ng --vm 1 --vm-bytes {int(magnitude or 0)}M for {duration}",
        "disk_full": f"fill its checkpoint filesystem for {duration}, then free it",
        "network_partition": f"iptables DROP of its Kafka traffic for {duration}",
        "network_loss": f"iptables drops {magnitude:.0%} of its Kafka packets for {duration}" if magnitude else "",
        "latency": f"proxy delays its Kafka traffic {magnitude:g} ms each way for {duration}" if magnitude else "",
        "bandwidth": f"proxy limits its Kafka traffic to {magnitude:g} B/s for {duration}" if magnitude else "",
    }[case_type]


def plan(
    playbook: Playbook, resources: list[Resource], streams: list[StreamRecord], values: dict[str, str]
) -> ExperimentPlan:
    out = ExperimentPlan(playbook)
    radius = playbook.blast_radius
    catalog = {s.name: s for s in streams}

    for i, f in enumerate(playbook.load.feeders):
        record = catalog.get(f.stream)
        if record is None or not record.perf_twin_of:
            out.refusals.append(f"load.feeders.{i}.stream: {f.stream!r} is not a perf stream of the catalog")
            continue
        out.feeder_topics[i] = list(record.topics)
        for t in record.topics:
            if not is_perf_topic(t):
                out.refusals.append(f"load.feeders.{i}.stream: topic {t} is not a perf topic")
            elif not covered(f"topic/{t}", radius):
                out.refusals.append(f"load.feeders.{i}: topic/{t} is outside blast_radius")
            else:
                out.touches.append(Touch(f"topic/{t}", f"produce {f.rate.shape} load for {f.duration}", f"feeder {i}"))

    for i, c in enumerate(playbook.load.consumers):
        try:
            spec = consumer_spec(c, values)
        except SpecError as e:
            out.refusals.extend(f"load.consumers.{i}.spec: {line}" for line in str(e).splitlines())
            continue
        out.specs[c.name] = spec
        out.refusals.extend(consumer_refusals(f"load.consumers.{i}.spec", spec, streams, values, playbook.target.team))
        if not covered(f"dagger/{c.name}", radius):
            out.refusals.append(f"load.consumers.{i}: dagger/{c.name} is outside blast_radius")
        else:
            out.touches.append(Touch(f"dagger/{c.name}", f"start ({c.placement}), stop at the end", c.name))
        if c.placement == "cluster":
            team, cluster = playbook.target.team, playbook.target.cluster
            if spec.team != team:
                out.refusals.append(f"load.consumers.{i}.spec.team: {spec.team!r}: it runs on {team}/{cluster}")
            if not matching(f"spark/{team}/{cluster}/*", resources):
                out.refusals.append(f"target.cluster: no running cluster {team}/{cluster} (odin cluster list)")

    data_brokers = {
        a
        for s in streams
        if not s.perf_twin_of
        for a in _addresses(f"{s.bootstrap_servers},{s.failover_bootstrap_servers or ''}")
    }
    aimed = f"{playbook.target.team}/{playbook.target.cluster}" if playbook.target.cluster else None
    known = {r.name for r in resources}
    everything = resources + [r for r in _planned(playbook, out.specs) if r.name not in known]
    for i, case in enumerate(playbook.cases):
        hits = matching(case.target, everything)
        if not hits:
            out.refusals.append(f"cases.{i}.target: {case.target} matches no resource (loki plan --resources)")
            continue
        out.targets[case.name] = hits
        for r in hits:
            if not covered(r.name, radius):
                out.refusals.append(f"cases.{i}.target: {r.name} is outside blast_radius")
                continue
            if case.type in BROKER_FAULTS and r.kind == "broker":
                why = _broker_refusal(r, case.type, data_brokers)
                if why:
                    out.refusals.append(f"cases.{i}.target: {why}")
                    continue
            if aimed is not None and r.cluster is not None and r.cluster != aimed:
                out.refusals.append(f"cases.{i}.target: {r.name} runs on {r.cluster}, not the target cluster {aimed}")
                continue
            if case.type in NETWORK_FAULTS and r.kind == "link":
                consumer = r.name.removeprefix("link/")
                if not covered(f"dagger/{consumer}", radius):
                    out.refusals.append(f"cases.{i}.target: {r.name}: dagger/{consumer} is outside blast_radius")
                    continue
            duration = f"{case.duration.total_seconds():g}s"
            action = _action(case.type, r, duration, case.restart, case.magnitude)
            out.touches.append(Touch(r.name, f"at {case.start.total_seconds():g}s: {action}", case.name))
    return out
