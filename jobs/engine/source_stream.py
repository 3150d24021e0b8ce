"""The stream as the Kafka source's own processes see it: plain data, built from the validated spec on the driver.

Spark starts a Python process for each step of a query's start (the source's schema, the streaming runner, the read
function, each read task's worker), one after the other, and each imports the source. Pydantic and the spec kit
were 0.25 s of every one of those imports (docs/decisions.md), so this side of the option carries no model: the spec
was validated at the edge, and what crosses into Spark is trusted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobs.spec import StreamSpec


@dataclass(frozen=True)
class SourceKafka:
    bootstrap_servers: str
    start: str  # earliest | latest
    max_events_per_trigger: int | None
    fail_on_data_loss: bool
    outage_tolerance: timedelta
    consumer_group: str | None
    high_watermark: str  # auto | reported | probe
    password_env: str | None
    config: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceStream:
    topics: tuple[str, ...]
    proto: str
    timestamp_field: str
    idle_timeout: timedelta
    dead_letter_topic: str
    kafka: SourceKafka

    @classmethod
    def of(cls, spec: StreamSpec) -> SourceStream:
        """From a resolved stream spec (its topics and message known)."""
        # by name: several settings share a type, and a swapped pair would pass unnoticed
        kafka = SourceKafka(**{f.name: getattr(spec.kafka, f.name) for f in fields(SourceKafka)})
        return cls(
            tuple(spec.topics), spec.proto, spec.timestamp_field, spec.idle_timeout, spec.dead_letter_topic, kafka
        )

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["idle_timeout"] = self.idle_timeout.total_seconds()
        d["kafka"]["outage_tolerance"] = self.kafka.outage_tolerance.total_seconds()
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SourceStream:
        k = dict(d["kafka"], outage_tolerance=timedelta(seconds=d["kafka"]["outage_tolerance"]))
        rest = dict(d, topics=tuple(d["topics"]), idle_timeout=timedelta(seconds=d["idle_timeout"]))
        return cls(**(rest | {"kafka": SourceKafka(**k)}))
