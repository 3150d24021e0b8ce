"""A Loki playbook: one chaos or load experiment as data (Chaos Toolkit's model), validated apart from its execution.

The seed's example (004) names the cases, their `blast_radius`, type and downtime, and the load (topic, proto
schema). A playbook here says where it runs (`target`), what it may touch (`blast_radius`: globs over the resource
names `loki plan` lists), the load (feeders on perf streams, daggers consuming them), the steady state (probes
with tolerances, checked before, during and after), the faults (`cases`), extra `rollbacks` and halt conditions
(`safeguards`). Every fault reverts on its own when its duration ends or the run is halted.
"""

from __future__ import annotations

import json
import re
import string
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from odin.models import SLUG, Duration, Model, parse_duration, read_mapping

PERF_SUFFIX = "-perf"
STANDARD_DIR = Path(__file__).resolve().parent / "playbooks"  # the standard playbooks
STANDARD_CONSUMERS = STANDARD_DIR / "consumers"


# What a run may do at most, whoever runs it: a fault ends, and the host keeps what it needs to stay up (a
# memory_pressure of unbounded MiB took the whole machine). Errors name the field and these bounds.
MAX_LOAD = timedelta(hours=1)  # a feeder's duration
MAX_FAULT = timedelta(minutes=10)  # a case's duration
MAX_SETTLE = timedelta(minutes=30)
MAX_RUN = timedelta(hours=2)  # safeguards.max_duration (the loki_chaos task's execution timeout)
MAGNITUDES: dict[str, tuple[float, float, str]] = {  # per fault type: lowest, highest, unit
    "cpu_pressure": (1, 8, "CPU workers"),
    "memory_pressure": (1, 2048, "MiB"),
    "network_loss": (0.0001, 1, "drop probability"),
    "latency": (1, 10_000, "milliseconds"),
    "bandwidth": (1024, 10_000_000_000, "bytes per second"),
}
MAX_JITTER_MS = 10_000


def _at_most(field: str, value: timedelta, limit: timedelta) -> None:
    if value > limit:
        raise ValueError(f"{field}: at most {limit.total_seconds():g}s, got {value.total_seconds():g}s")


def standard_names() -> list[str]:
    return sorted(p.stem for p in STANDARD_DIR.glob("*.yaml"))


class PlaybookError(ValueError):
    """A playbook that does not validate: one line per error, each with its path (e.g. `cases.0.target`)."""


# -- where and what it may touch -------------------------------------------------------------------------------


class Target(Model):
    environment: str = Field("local", pattern=SLUG, description="The Odin environment the experiment runs in.")
    team: str | None = Field(
        None, pattern=SLUG, description="The team whose cluster runs the experiment's cluster daggers."
    )
    cluster: str | None = Field(None, pattern=SLUG, description="That team's Spark cluster (odin cluster list).")

    @model_validator(mode="after")
    def _cluster_needs_team(self) -> Target:
        if self.cluster and not self.team:
            raise ValueError("team: required with cluster (a cluster belongs to a team)")
        return self


ResourceGlob = Annotated[
    str,
    Field(
        min_length=1,
        pattern=r"^(broker|spark|driver|dagger|topic|host|link)/[^\s]*$",
        description="A resource name or a glob over names, as `loki plan` lists them: broker/<node>, "
        "spark/<team>/<cluster>/<node>, driver/<team>/<dagger>, dagger/<consumer>, topic/<topic>, host/<env>, "
        "link/<consumer> (the network path between a Loki-run dagger and Kafka).",
    ),
]


# -- the load -------------------------------------------------------------------------------------------------------


class Steady(Model):
    shape: Literal["steady"] = "steady"
    events_per_s: int = Field(ge=1, le=1_000_000, description="Events per second, the whole run.")


class Ramp(Model):
    shape: Literal["ramp"] = "ramp"
    from_events_per_s: int = Field(ge=1, le=1_000_000, description="Rate at the start.")
    to_events_per_s: int = Field(ge=1, le=1_000_000, description="Rate at the end, reached linearly.")


class Spike(Model):
    shape: Literal["spike"] = "spike"
    events_per_s: int = Field(ge=1, le=1_000_000, description="The base rate.")
    peak_events_per_s: int = Field(ge=1, le=1_000_000, description="The rate during the spike.")
    at: Duration = Field(description="When the spike starts, from the feeder's start.")
    length: Duration = Field(description="How long the spike lasts.")


Rate = Annotated[Steady | Ramp | Spike, Field(discriminator="shape")]


class Feeder(Model):
    """Produces a catalog stream's protobuf events to its perf topics, recording each event's fate (ground truth)."""

    stream: str = Field(
        pattern=SLUG, description="A perf stream of the catalog, e.g. booking-log-perf (load only on perf streams)."
    )
    rate: Rate = Field(description="steady, ramp or spike.")
    duration: Duration = Field(description="How long it produces.")
    partitions: int = Field(
        2, ge=1, le=64, description="Partitions of each perf topic Loki creates; an existing topic's are all fed."
    )
    keys: int = Field(5000, ge=1, le=10_000_000, description="Key cardinality (customers, drivers).")
    city: str = Field("jakarta", description="Events' lat/long are around this city (odin/traffic/generator.py).")
    malformed_ratio: float = Field(0.0, ge=0, le=0.5, description="Share of events sent as undecodable bytes.")
    seed: int = Field(0, description="Seed of the generator: the same playbook feeds the same events.")
    linger: Duration = Field(
        timedelta(milliseconds=50),
        description="How long the producer gathers events into one batch per partition (librdkafka linger.ms), as "
        "a service's producer does. Tansu reads a partition by walking its every batch, so batches of a few events "
        "(5ms at 20,000 events/s) slow every read of a long run; a Kafka broker's offset index would not care.",
    )

    @model_validator(mode="after")
    def _perf_only(self) -> Feeder:
        _at_most("duration", self.duration, MAX_LOAD)
        if not self.stream.endswith(PERF_SUFFIX):
            raise ValueError(f"stream: {self.stream!r} is not a perf stream; Loki loads only `*{PERF_SUFFIX}` twins")
        if isinstance(self.rate, Spike) and self.rate.at + self.rate.length > self.duration:
            raise ValueError("rate: the spike (at + length) must end within the feeder's duration")
        return self


class Consumer(Model):
    """A dagger reading the load. `local`: Loki runs it on this machine (network faults need that: its traffic
    to Kafka goes through a network namespace and proxy of the run's own); `cluster`: deployed on the target's
    team cluster through the dagger lifecycle, and stopped after."""

    name: str = Field(pattern=SLUG, description="The consumer's name in this playbook (dagger/<name>).")
    spec: dict[str, Any] | None = Field(None, description="An inline dagger spec (its stream must be a perf stream).")
    spec_file: Path | None = Field(None, description="A dagger spec file, relative to the playbook.")
    placement: Literal["local", "cluster"] = Field(
        "local",
        description="local: a process of the run's own; cluster: deployed on the target cluster like any dagger.",
    )
    kafka: dict[str, Any] = Field(
        default_factory=dict,
        description="Kafka settings of every stream of the spec to override for the experiment, e.g. "
        "{fail_on_data_loss: false} when the broker is to lose data.",
    )
    count_column: str | None = Field(
        None,
        description="The output column counting events (e.g. num_of_bookings): the report turns differences from "
        "the ground truth into events lost and counted twice. Without it, rows are compared only.",
    )

    @model_validator(mode="after")
    def _one_spec(self) -> Consumer:
        if (self.spec is None) == (self.spec_file is None):
            raise ValueError("spec or spec_file: give exactly one")
        return self


class Load(Model):
    feeders: list[Feeder] = Field(min_length=1, description="What feeds the perf streams during the run.")
    consumers: list[Consumer] = Field(default_factory=list, description="The daggers under test.")

    @model_validator(mode="after")
    def _unique(self) -> Load:
        names = [c.name for c in self.consumers]
        if len(set(names)) != len(names):
            raise ValueError(f"consumers: names must be unique, got {names}")
        return self

    @property
    def duration(self) -> timedelta:
        return max(f.duration for f in self.feeders)


# -- steady state, faults, rollbacks, safeguards ----------------------------------------------------------------------


class Probe(Model):
    """One steady-state check of a consumer, every `steady_state.interval`."""

    type: Literal["lag", "processed_ratio", "freshness", "running"] = Field(
        description="lag: events behind the end of its topics at most `max`; processed_ratio: events it processed / "
        "events fed over the last 30 s at least `min`; freshness: its watermark at most `max` seconds behind the "
        "newest event fed; running: its driver alive."
    )
    consumer: str = Field(pattern=SLUG, description="Which consumer (load.consumers[].name).")
    max: float | None = Field(None, ge=0, description="Upper tolerance (lag).")
    min: float | None = Field(None, ge=0, description="Lower tolerance (processed_ratio).")

    @model_validator(mode="after")
    def _tolerance(self) -> Probe:
        needs = {"lag": "max", "processed_ratio": "min", "freshness": "max"}.get(self.type)
        if needs and getattr(self, needs) is None:
            raise ValueError(f"{needs}: required for a {self.type} probe")
        return self


class SteadyState(Model):
    probes: list[Probe] = Field(default_factory=list, description="What must hold before, during and after.")
    interval: Duration = Field(timedelta(seconds=5), description="How often the probes run during the experiment.")
    settle: Duration = Field(
        timedelta(seconds=120), description="After the last fault, how long the steady state has to come back."
    )

    @model_validator(mode="after")
    def _bounded(self) -> SteadyState:
        if not timedelta(seconds=1) <= self.interval <= timedelta(minutes=1):
            raise ValueError(f"interval: from 1s to 60s, got {self.interval.total_seconds():g}s")
        _at_most("settle", self.settle, MAX_SETTLE)
        return self


FaultType = Literal[
    "kill",
    "pause",
    "broker_loss",
    "cpu_pressure",
    "memory_pressure",
    "disk_full",
    "network_partition",
    "network_loss",
    "latency",
    "bandwidth",
]
PROCESS_FAULTS = ("kill", "pause", "broker_loss")
NETWORK_FAULTS = ("network_partition", "network_loss", "latency", "bandwidth")
# What each fault may target (the first segment of a resource name).
TARGET_KINDS: dict[str, tuple[str, ...]] = {
    "kill": ("spark", "driver", "broker"),
    "pause": ("spark", "driver", "broker"),
    "broker_loss": ("broker",),
    "cpu_pressure": ("host",),
    "memory_pressure": ("host",),
    "disk_full": ("dagger",),
    "network_partition": ("link",),
    "network_loss": ("link",),
    "latency": ("link",),
    "bandwidth": ("link",),
}


class Case(Model):
    """One fault. It starts `start` after the load does, lasts `duration`, and is reverted then (or at a halt):
    a killed process is brought back (Odin converges it; a broker restarts empty: Tansu keeps topics in memory,
    so broker_loss is a real data-disk loss), a paused one continued, pressure stopped, rules removed."""

    name: str = Field(min_length=1, description="Shown in the report.")
    type: FaultType = Field(description="The fault (loki schema lists them with their magnitudes).")
    target: ResourceGlob = Field(description="What the fault hits: a resource name or glob (loki plan lists them).")
    start: Duration = Field(description="From the start of the load.")
    duration: Duration = Field(description="The fault's downtime; it reverts itself after it.")
    restart: bool = Field(
        True, description="kill: bring the process back after `duration` (Odin converges it); false: leave it to "
        "the platform's self-healing."
    )  # fmt: skip
    magnitude: float | None = Field(
        None,
        gt=0,
        description="cpu_pressure: workers (stress-ng --cpu); memory_pressure: MiB; network_loss: drop probability "
        "(0-1); latency: milliseconds each way; bandwidth: bytes per second.",
    )
    jitter_ms: float = Field(0, ge=0, description="latency: uniform extra delay up to this many milliseconds.")

    @model_validator(mode="after")
    def _fits(self) -> Case:
        kind = self.target.split("/", 1)[0]
        allowed = TARGET_KINDS[self.type]
        if kind not in allowed:
            kinds = ", ".join(f"{k}/..." for k in allowed)
            raise ValueError(f"target: a {self.type} fault targets {kinds}, not {kind}/...")
        _at_most("duration", self.duration, MAX_FAULT)
        if self.type in MAGNITUDES:
            low, high, unit = MAGNITUDES[self.type]
            if self.magnitude is None:
                raise ValueError(f"magnitude: required for {self.type} ({unit}, from {low:g} to {high:g})")
            if not low <= self.magnitude <= high:
                allowed = f"{unit} from {low:g} to {high:g}"
                raise ValueError(f"magnitude: {self.type} takes {allowed}, got {self.magnitude:g}")
        elif self.magnitude is not None:
            raise ValueError(f"magnitude: a {self.type} fault takes none")
        if self.jitter_ms > MAX_JITTER_MS or (self.jitter_ms and self.type != "latency"):
            raise ValueError(f"jitter_ms: latency faults only, at most {MAX_JITTER_MS} ms")
        return self


class Rollback(Model):
    """Run at the end of every run (also after a halt or failure), after the faults reverted themselves."""

    action: Literal["converge_cluster", "converge_stack", "restart_consumer"] = Field(
        description="converge_cluster: Odin converges the target cluster; converge_stack: `odin up` of the "
        "environment's services; restart_consumer: start a stopped consumer again."
    )
    consumer: str | None = Field(None, pattern=SLUG, description="restart_consumer: which consumer.")


class Safeguards(Model):
    """Halt conditions: when one holds, the run stops at once and reverts every fault (the report says why)."""

    max_duration: Duration = Field(timedelta(minutes=15), description="Halt a run still going after this.")
    max_lag: int | None = Field(None, ge=1, description="Halt when a consumer falls this many events behind.")
    max_failed_probe_time: Duration | None = Field(
        None, description="Halt when the steady state stays broken this long (after settle, if longer)."
    )

    @model_validator(mode="after")
    def _bounded(self) -> Safeguards:
        _at_most("max_duration", self.max_duration, MAX_RUN)
        return self


class Playbook(Model):
    name: str = Field(pattern=SLUG, description="Unique among playbooks; runs are stored under it.")
    description: str = Field("", description="What the experiment asks, in a sentence.")
    target: Target = Field(default_factory=Target, description="Where it runs.")  # type: ignore[arg-type]
    blast_radius: list[ResourceGlob] = Field(
        min_length=1, description="Every resource the run may touch; anything else is refused before it starts."
    )
    load: Load = Field(description="The load during the run: feeders and consumers.")
    steady_state: SteadyState = Field(default_factory=SteadyState, description="The hypothesis: probes that must hold.")  # type: ignore[arg-type]
    cases: list[Case] = Field(default_factory=list, description="The faults, each with its start and duration.")
    rollbacks: list[Rollback] = Field(default_factory=list, description="What to undo at the end, beyond the faults.")
    safeguards: Safeguards = Field(default_factory=Safeguards, description="When to abort the run.")  # type: ignore[arg-type]
    max_rate: bool = Field(
        False,
        description="Find the highest rate the consumers sustain without growing lag: the feeders ramp (a ramp "
        "rate) and the report gives the last rate at which every lag probe held.",
    )

    def bound(self, **target: str | None) -> Playbook:
        """This playbook aimed at `target` (environment, team, cluster given win over its own), with `${team}`,
        `${cluster}` and `${environment}` replaced in blast_radius and the cases' targets."""
        aimed = self.target.model_copy(update={k: v for k, v in target.items() if v is not None})
        values = {k: str(v) for k, v in aimed.model_dump().items() if v is not None}

        def fill(text: str) -> str:
            return string.Template(text).safe_substitute(values)

        cases = [c.model_copy(update={"target": fill(c.target)}) for c in self.cases]
        data = {**self.model_dump(mode="json"), "target": aimed.model_dump(mode="json")}
        data.update(blast_radius=[fill(g) for g in self.blast_radius], cases=[c.model_dump(mode="json") for c in cases])
        return parse(data)

    def prepared(
        self, *, settle: str | None = None, rate: float = 1.0, time: float = 1.0, **target: str | None
    ) -> Playbook:
        """What a run uses (`loki simulate`'s options, the loki_chaos DAG's params): this playbook aimed at `target`
        (bound), with another `steady_state.settle` if given (a duration, e.g. `300s`: a relaunch takes longer on a
        small or busy machine), then scaled."""
        book = self.bound(**target)
        if settle is not None:
            data = book.model_dump(mode="json")
            data["steady_state"]["settle"] = settle
            book = parse(data)
        return book.scaled(rate, time) if (rate, time) != (1.0, 1.0) else book

    def scaled(self, rate: float = 1.0, time: float = 1.0) -> Playbook:
        """The same experiment smaller or larger: every rate times `rate`, every duration and start times `time`
        (tests run the standard playbooks small; a real cluster runs them larger). Not `steady_state.settle`: how
        long the platform takes to recover (a driver's JVM, a relaunch) does not shrink with the experiment."""
        data = self.model_dump(mode="json")

        def seconds(value: str) -> float:
            return parse_duration(value).total_seconds() * time

        for f in data["load"]["feeders"]:
            f["duration"] = seconds(f["duration"])
            for key in ("events_per_s", "from_events_per_s", "to_events_per_s", "peak_events_per_s"):
                if key in f["rate"]:
                    f["rate"][key] = max(1, round(f["rate"][key] * rate))
            for key in ("at", "length"):
                if key in f["rate"]:
                    f["rate"][key] = seconds(f["rate"][key])
        for c in data["cases"]:
            c["start"], c["duration"] = seconds(c["start"]), seconds(c["duration"])
        for p in data["steady_state"]["probes"]:
            if p["type"] == "lag" and p["max"] is not None:
                p["max"] = p["max"] * rate
        guards = data["safeguards"]
        load = max(f["duration"] for f in data["load"]["feeders"])
        settle = parse_duration(data["steady_state"]["settle"]).total_seconds()
        guards["max_duration"] = max(seconds(guards["max_duration"]), load + settle)
        if guards["max_lag"] is not None:
            guards["max_lag"] = max(1, round(guards["max_lag"] * rate))
        return parse(data)

    @model_validator(mode="after")
    def _coherent(self) -> Playbook:
        consumers = {c.name: c for c in self.load.consumers}
        errors = []
        for i, p in enumerate(self.steady_state.probes):
            if p.consumer not in consumers:
                errors.append(f"steady_state.probes.{i}.consumer: no consumer {p.consumer!r} in load.consumers")
        names = [c.name for c in self.cases]
        if len(set(names)) != len(names):
            errors.append(f"cases: names must be unique, got {names}")
        for i, c in enumerate(self.cases):
            if c.start + c.duration > self.load.duration:
                errors.append(f"cases.{i}: start + duration ({c.start + c.duration}) ends after the load does")
            if c.type in NETWORK_FAULTS:
                link = c.target.removeprefix("link/")
                local = [n for n, k in consumers.items() if k.placement == "local"]
                if "*" not in link and link not in local:
                    errors.append(f"cases.{i}.target: {c.target} is not a local consumer's link (local: {local})")
        if any(c.placement == "cluster" for c in consumers.values()) and not self.target.cluster:
            errors.append("target.cluster: required for consumers placed on a cluster")
        if self.cases and self.steady_state.settle + self.load.duration > self.safeguards.max_duration:
            errors.append("safeguards.max_duration: shorter than the load plus steady_state.settle")
        for i, r in enumerate(self.rollbacks):
            if r.action == "restart_consumer" and r.consumer not in consumers:
                errors.append(f"rollbacks.{i}.consumer: no consumer {r.consumer!r} in load.consumers")
        if self.max_rate and not any(isinstance(f.rate, Ramp) for f in self.load.feeders):
            errors.append("load.feeders: a max_rate experiment needs a ramp feeder")
        if errors:
            raise ValueError("\n".join(errors))
        return self


_FIELD_PATH = re.compile(r"^[A-Za-z_][\w.]*: ")


def format_errors(e: ValidationError) -> str:
    """One line per error, each starting with its full path (a validator's message names fields below it)."""
    lines = []
    for err in e.errors():
        prefix = ".".join(str(p) for p in err["loc"])
        for line in err["msg"].removeprefix("Value error, ").splitlines():
            if _FIELD_PATH.match(line):
                lines.append(f"{prefix}.{line}" if prefix else line)
            else:
                lines.append(f"{prefix or '(playbook)'}: {line}")
    return "\n".join(lines)


def parse(data: Any, where: str = "playbook") -> Playbook:
    if not isinstance(data, dict):
        raise PlaybookError(f"{where}: expected a mapping of playbook fields, got {type(data).__name__}")
    try:
        return Playbook.model_validate(data)
    except ValidationError as e:
        raise PlaybookError(format_errors(e)) from None


def load(path: Path) -> Playbook:
    """A playbook from a YAML or JSON file; a consumer's spec_file resolves against the playbook's folder."""
    playbook = parse(read_mapping(path, PlaybookError, "playbook"), str(path))
    base = path.resolve().parent
    consumers = [
        c.model_copy(update={"spec_file": _spec_path(base, c.spec_file)}) if c.spec_file else c
        for c in playbook.load.consumers
    ]
    return playbook.model_copy(update={"load": playbook.load.model_copy(update={"consumers": consumers})})


def _spec_path(base: Path, spec_file: Path) -> Path:
    """Relative to the playbook's folder, else one of the standard consumers (loki/playbooks/consumers)."""
    own = base / spec_file
    return own if own.exists() or spec_file.is_absolute() else STANDARD_CONSUMERS / spec_file


def json_schema() -> str:
    return json.dumps(Playbook.model_json_schema(), indent=2)
