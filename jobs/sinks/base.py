"""What every sink shares: the engine-facing contract, retries with backoff, secrets from env vars, and the
bookkeeping that makes a replayed micro-batch a no-op.

Spark's foreachBatch hands a batch to the sink on the driver, and after a crash hands the SAME batch id with the
same data again. Each sink therefore remembers (durably where it can) the last batch id it fully committed:
the same id again is a replay and is skipped; a smaller id means the checkpoint was reset, which would silently
skip data, so it is refused.
"""

from __future__ import annotations

import base64
import logging
import math
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from decimal import Decimal
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import pyarrow as pa
from sqlglot import exp

from jobs.spec import DaggerSpec, InfluxSink, KafkaSink, LogSink, PostgresSink, Sink

log = logging.getLogger("jobs.sinks")


@dataclass(frozen=True)
class OutputShape:
    """What the query's output rows are, as the planner knows them."""

    key_columns: tuple[str, ...]  # identify a row: group keys incl. window start/end (upsert key)
    value_columns: tuple[str, ...]  # aggregates / other columns
    time_column: str | None  # a timestamp column giving the row's time (window end), or None


@runtime_checkable
class SinkWriter(Protocol):
    attempts_failed: int  # failed write attempts so far (retried or not), for telemetry

    def write(self, batch: pa.Table, batch_id: int) -> int: ...  # returns rows written

    def close(self) -> None: ...


class SinkError(RuntimeError):
    """A sink that cannot work or gave up: the message names the sink and, for configuration, the field."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5  # in all, the first one included
    initial_delay: float = 0.5  # seconds before the 2nd attempt, doubled each time up to max_delay
    max_delay: float = 10.0

    def delays(self) -> list[float]:
        return [min(self.initial_delay * 2**i, self.max_delay) for i in range(self.attempts - 1)]


def secret(env_var: str | None, sink: str, field: str) -> str | None:
    """The value of the env var a spec names for a secret; None if the spec names none. Never logged."""
    if env_var is None:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise SinkError(f"{sink} sink: sink.{field} names environment variable {env_var}, which is not set")
    return value


def utc(value: datetime) -> datetime:
    """Naive datetimes (Spark TIMESTAMP_NTZ) are taken as UTC, as the session time zone is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso(value: datetime) -> str:
    return utc(value).isoformat().replace("+00:00", "Z")


def json_value(value: Any) -> Any:
    """A Python value from Arrow as JSON-able data: ISO-8601 UTC timestamps, floats for decimals, base64 bytes,
    null for NaN/inf (JSON has no such numbers)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date | dtime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    return str(value)


def rows(batch: pa.Table) -> list[dict[str, Any]]:
    """The batch as Python dicts; maps become dicts (not lists of pairs)."""
    return batch.to_pylist(maps_as_pydicts="lossy")


def check_columns(sink: str, batch: pa.Table, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in batch.column_names]
    if missing:
        raise SinkError(f"{sink} sink: {what} {missing} not in the batch's columns {batch.column_names}")


SinkSpec = TypeVar("SinkSpec", LogSink, InfluxSink, KafkaSink, PostgresSink)


class BaseSink(ABC, Generic[SinkSpec]):
    """Template for a sink: replay detection, the retry loop, counters for telemetry. `sink` is the dagger's sink
    settings, of the type the writer takes (`spec_type`)."""

    kind: ClassVar[str]
    spec_type: ClassVar[type[LogSink | InfluxSink | KafkaSink | PostgresSink]]

    @classmethod
    def plan_problem(
        cls, sink: Sink, shape: OutputShape, output_mode: str, types: Callable[[], Mapping[str, exp.DataType]]
    ) -> str | None:
        """What this sink cannot do with a query's output (None: it can), with the fix; asked when a dagger is
        planned, before anything runs. `types`: the output columns' SQL types where known."""
        return None

    def __init__(self, dagger: DaggerSpec, shape: OutputShape, retry: RetryPolicy | None = None) -> None:
        if not isinstance(dagger.sink, self.spec_type):
            raise SinkError(f"sink.type: {dagger.sink.type!r} given to the {self.kind} sink's writer")
        self.sink: SinkSpec = dagger.sink  # type: ignore[assignment]
        self.dagger = dagger
        self.shape = shape
        self.retry = retry or RetryPolicy()
        self.last_batch_id: int | None = None  # last batch id known committed (durable where the sink allows)
        self.rows_written = 0
        self.rows_skipped = 0  # rows that could not be written as such (no fields, null key), counted not raised
        self.batches_written = 0
        self.batches_replayed = 0  # batch ids seen again and skipped
        self.attempts_failed = 0
        self._closed = False

    @property
    def label(self) -> str:
        return f"{self.kind} sink of {self.dagger.qualified_name}"

    def stats(self) -> dict[str, int | None]:
        return {
            "rows_written": self.rows_written,
            "rows_skipped": self.rows_skipped,
            "batches_written": self.batches_written,
            "batches_replayed": self.batches_replayed,
            "attempts_failed": self.attempts_failed,
            "last_batch_id": self.last_batch_id,
        }

    def _is_replay(self, batch_id: int) -> bool:
        if self.last_batch_id is None or batch_id > self.last_batch_id:
            return False
        if batch_id < self.last_batch_id:
            # Spark only ever replays its last uncommitted batch: an older id means a new checkpoint.
            raise SinkError(
                f"{self.label}: batch {batch_id} is older than batch {self.last_batch_id} already committed to this "
                "sink; the checkpoint was probably reset. Write to a new target (or clear the sink's batch record)."
            )
        return True

    def write(self, batch: pa.Table, batch_id: int) -> int:
        if self._closed:
            raise SinkError(f"{self.label}: write after close")
        if self._is_replay(batch_id):
            self.batches_replayed += 1
            log.info("%s: batch %d already written, skipping the replay", self.label, batch_id)
            return 0
        if batch.num_rows == 0:
            return 0  # nothing to make idempotent; later ids are larger anyway
        delays = self.retry.delays()
        for attempt in range(1, self.retry.attempts + 1):
            try:
                result = self._write_batch(batch, batch_id)
            except SinkError:
                raise
            except Exception as e:
                self.attempts_failed += 1
                if attempt == self.retry.attempts or not self._retriable(e):
                    raise SinkError(
                        f"{self.label}: batch {batch_id} failed after {attempt} attempt(s): {type(e).__name__}: {e}"
                    ) from e
                delay = delays[attempt - 1]
                log.warning(
                    "%s: batch %d attempt %d failed (%s); retrying in %.1fs", self.label, batch_id, attempt, e, delay
                )
                time.sleep(delay)
                self._recover(e)
                if self._is_replay(batch_id):  # the failed attempt may have committed after all
                    self.batches_replayed += 1
                    return 0
                continue
            if result is None:  # found committed by the sink's own durable record
                self.batches_replayed += 1
                self.last_batch_id = batch_id
                return 0
            written, skipped = result
            self.rows_written += written
            self.rows_skipped += skipped
            self.batches_written += 1
            self.last_batch_id = batch_id
            return written
        raise AssertionError("unreachable")

    @abstractmethod
    def _write_batch(self, batch: pa.Table, batch_id: int) -> tuple[int, int] | None:
        """Write the batch atomically-or-idempotently: (rows written, rows skipped), or None if the sink's own
        record shows this batch id already committed."""

    def _retriable(self, error: Exception) -> bool:
        return True

    def _recover(self, error: Exception) -> None:
        """Between attempts: reconnect, and refresh `last_batch_id` from durable state if the sink has any."""
        return None

    def close(self) -> None:
        self._closed = True
