"""Sinks: where a dagger's aggregated rows go (log, InfluxDB API, Kafka, PostgreSQL), each with an exactly-once
effect across Spark's micro-batch replays. The engine calls `open_sink` once, then `write` from foreachBatch."""

from __future__ import annotations

from jobs.sinks.base import BaseSink, OutputShape, RetryPolicy, SinkError, SinkWriter
from jobs.sinks.log import read_log
from jobs.spec import DaggerSpec

__all__ = ["BaseSink", "OutputShape", "RetryPolicy", "SinkError", "SinkWriter", "open_sink", "read_log"]


def open_sink(dagger: DaggerSpec, shape: OutputShape) -> SinkWriter:
    """The writer for the dagger's sink. Configuration problems (a secret's env var unset, an unknown proto
    message) raise SinkError here; connections are opened on the first write, under the retry policy."""
    kind = dagger.sink.type
    # Imported on demand: a log-only dagger needs no database or Kafka client.
    if kind == "log":
        from jobs.sinks.log import LogWriter

        return LogWriter(dagger, shape)
    if kind == "influx":
        from jobs.sinks.influx import InfluxWriter

        return InfluxWriter(dagger, shape)
    if kind == "kafka":
        from jobs.sinks.kafka import KafkaWriter

        return KafkaWriter(dagger, shape)
    if kind == "postgres":
        from jobs.sinks.postgres import PostgresWriter

        return PostgresWriter(dagger, shape)
    raise SinkError(f"sink.type: unknown sink type {kind!r}")
