"""Sinks: where a dagger's aggregated rows go (log, InfluxDB API, Kafka, PostgreSQL), each with an exactly-once
effect across Spark's micro-batch replays. The engine calls `open_sink` once, then `write` from foreachBatch."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from jobs.sinks.base import BaseSink, OutputShape, RetryPolicy, SinkError, SinkWriter
from jobs.sinks.log import read_log
from jobs.spec import DaggerSpec, Sink

__all__ = [
    "BaseSink",
    "OutputShape",
    "RetryPolicy",
    "SinkError",
    "SinkWriter",
    "open_sink",
    "plan_problem",
    "read_log",
    "writer_class",
]


def writer_class(kind: str) -> type[BaseSink]:
    """The writer of a sink type, imported on demand: a log-only dagger needs no database or Kafka client."""
    if kind == "log":
        from jobs.sinks.log import LogWriter

        return LogWriter
    if kind == "influx":
        from jobs.sinks.influx import InfluxWriter

        return InfluxWriter
    if kind == "kafka":
        from jobs.sinks.kafka import KafkaWriter

        return KafkaWriter
    if kind == "postgres":
        from jobs.sinks.postgres import PostgresWriter

        return PostgresWriter
    raise SinkError(f"sink.type: unknown sink type {kind!r}")


def open_sink(dagger: DaggerSpec, shape: OutputShape) -> SinkWriter:
    """The writer for the dagger's sink. Configuration problems (a secret's env var unset, an unknown proto
    message) raise SinkError here; connections are opened on the first write, under the retry policy."""
    return writer_class(dagger.sink.type)(dagger, shape)


def plan_problem(
    sink: Sink, shape: OutputShape, output_mode: str, types: Callable[[], Mapping[str, exp.DataType]]
) -> str | None:
    """What the sink cannot do with the query's output (None: nothing), asked when the dagger is planned."""
    return writer_class(sink.type).plan_problem(sink, shape, output_mode, types)
