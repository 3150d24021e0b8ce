"""InfluxDB line-protocol sink over HTTP: API v2's `/api/v2/write` (VictoriaMetrics, InfluxDB 1.8+/2.x), or InfluxDB
1.x's `/write?db=`.

Columns become tags or fields the way raystack/dagger's InfluxDB sink names them, plus string columns:
- `tag_*` columns are tags under their full name (`tag_city_id` stays `tag_city_id`), as dagger does;
- `label_*` columns are tags with the prefix stripped (`label_s2id` becomes `s2id`), as dagger does;
- other string columns are tags too (dagger would write them as string fields, which VictoriaMetrics stores as 0);
- numeric and boolean columns are fields (null, NaN and infinite values are left out);
- the time column (sink.time_column, else the shape's, e.g. the window end) is the point's time, in ms. Other
  timestamp/date columns (window start) and nested columns are not written: a time series has one time.

Idempotence: a point is identified by measurement + tags + time, so rewriting a replayed batch rewrites the same
points with the same values (InfluxDB overwrites; VictoriaMetrics, run with -dedup.minScrapeInterval=1ms, keeps one
sample per millisecond). A later batch updating a window rewrites the point with the new values: InfluxDB keeps the
new ones; VictoriaMetrics keeps one of the samples of that millisecond (the last one written, as observed with
1.79, but its docs do not promise which).

A point timed at its write would break this (a replay lands at a new time; in update mode every update adds a point),
so a dagger whose output has no time column is refused when planned (`dagger validate`, exit 2) and when the sink
opens, unless sink.time_column names a timestamp output column (``InfluxWriter.plan_problem`). See
docs/sinks.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from jobs.sinks.base import BaseSink, OutputShape, RetryPolicy, SinkError, log, secret
from jobs.spec import DaggerSpec, InfluxSink, Sink

if TYPE_CHECKING:  # the client is imported when first used: planning imports this module for plan_problem
    import httpx

CHUNK = 10_000  # lines per HTTP request
_MEASUREMENT = str.maketrans({",": r"\,", " ": r"\ ", "\n": " "})
_KEY = str.maketrans({",": r"\,", "=": r"\=", " ": r"\ ", "\n": " "})


def escape_key(text: str) -> str:
    """A measurement-independent line-protocol key or tag value: commas, equals signs and spaces escaped."""
    return text.translate(_KEY)


def tag_name(column: str) -> str:
    return column.removeprefix("label_") if column.startswith("label_") and len(column) > 6 else column


def _is_tag(column: str, dtype: pa.DataType) -> bool:
    return column.startswith(("tag_", "label_")) or pa.types.is_string(dtype) or pa.types.is_large_string(dtype)


def _is_field(dtype: pa.DataType) -> bool:
    return (
        pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype) or dtype == pa.bool_()
    )


def _tag_value(value: Any) -> str | None:
    if value is None:
        return None
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return escape_key(text) or None  # influx refuses empty tag values: leave the tag out


def _field_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i" if -(2**63) <= value < 2**63 else repr(float(value))
    number = float(value) if isinstance(value, Decimal) else value
    return repr(float(number)) if math.isfinite(number) else None


# -- the time column ---------------------------------------------------------------------------------------------

_TIME_TYPES = (
    exp.DataType.Type.DATE,
    exp.DataType.Type.DATE32,
    exp.DataType.Type.DATETIME,
    exp.DataType.Type.DATETIME64,
    exp.DataType.Type.TIMESTAMP,
    exp.DataType.Type.TIMESTAMPTZ,
    exp.DataType.Type.TIMESTAMPLTZ,
    exp.DataType.Type.TIMESTAMPNTZ,
    exp.DataType.Type.TIMESTAMP_S,
    exp.DataType.Type.TIMESTAMP_MS,
    exp.DataType.Type.TIMESTAMP_NS,
)


def time_column_problem(
    sink: InfluxSink,
    shape: OutputShape,
    output_mode: str | None = None,
    types: Mapping[str, exp.DataType] | None = None,
) -> str | None:
    """Why the sink cannot take each point's time from its row (None: it can), with the fix. A point is identified by
    measurement + tags + time: only a time from the row makes a rewrite (a replay, an update) land on the same point.
    `types`: output column (lower-cased) -> SQL type, where known (output_types)."""
    columns = [*shape.key_columns, *shape.value_columns]
    types = types or {}
    timestamps = [c for c in columns if (t := types.get(c.lower())) is not None and t.is_type(*_TIME_TYPES)]
    if timestamps:
        candidates = f"one of its timestamp output columns: {', '.join(timestamps)}"
    elif types:
        candidates = (
            "a timestamp output column (it has none: select one, e.g. rowtime AS event_time, or "
            "max(rowtime) AS last_event_time in an aggregate)"
        )
    else:
        candidates = f"a timestamp output column (its output columns: {', '.join(columns) or '-'})"
    name = sink.time_column
    if name is not None:
        if name not in columns:
            return f"sink.time_column: {name!r} is not an output column of the query; set it to {candidates}"
        known = types.get(name.lower())
        if known is not None and not known.is_type(*_TIME_TYPES):
            return (
                f"sink.time_column: output column {name!r} is {known.sql('spark')}, not a timestamp; set it to "
                f"{candidates}, or convert it in the SQL (e.g. timestamp_millis({name}) AS {name}_time)"
            )
        return None
    if shape.time_column is not None:
        return None
    if output_mode == "update":
        why = (
            "the query aggregates without a window (update mode), so each point would be timed at its write: every "
            "update of a group and every replay of a batch after a crash would add a point instead of overwriting one"
        )
    else:
        why = (
            "the query's output has no window end, so each point would be timed at its write: a replay of a batch "
            "after a crash would add its rows again at a new time, and rows of one batch with the same tags would "
            "overwrite each other"
        )
    return (
        f"sink.time_column: required here: {why}. Select a window end (TUMBLE_END(rowtime, INTERVAL '60' SECOND) "
        f"AS window_end, grouped by that window), or set sink.time_column to {candidates}"
    )


def _epoch_ms(column: pa.ChunkedArray) -> list[int | None]:
    """A timestamp column as epoch milliseconds (sub-ms truncated), without a Python datetime per row."""
    if pa.types.is_date(column.type):
        column = column.cast(pa.timestamp("ms"))
    return pc.cast(pc.cast(column, pa.timestamp("ms", tz="UTC"), safe=False), pa.int64()).to_pylist()


class InfluxWriter(BaseSink[InfluxSink]):
    kind = "influx"
    spec_type = InfluxSink

    @classmethod
    def plan_problem(
        cls, sink: Sink, shape: OutputShape, output_mode: str, types: Callable[[], Mapping[str, exp.DataType]]
    ) -> str | None:
        """An influx sink needs each point's time from its row, not the write time."""
        assert isinstance(sink, InfluxSink)
        return time_column_problem(sink, shape, output_mode, types())

    def __init__(self, dagger: DaggerSpec, shape: OutputShape, retry: RetryPolicy | None = None) -> None:
        super().__init__(dagger, shape, retry)
        sink = self.sink
        self.measurement = sink.measurement or dagger.name
        # The planner refuses these already (plan_problem); a writer opened another way must not time points at write.
        problem = time_column_problem(sink, shape)
        time_column = sink.time_column or shape.time_column
        if problem is not None or time_column is None:
            raise SinkError(f"influx sink: {problem}")
        self.time_column = time_column
        self.url = sink.url.rstrip("/")
        # Secrets are read once, kept out of messages and logs.
        token = secret(sink.token_env, "influx", "token_env")
        username = secret(sink.username_env, "influx", "username_env")
        password = secret(sink.password_env, "influx", "password_env")
        if (username is None) != (password is None):
            raise SinkError("influx sink: sink.username_env and sink.password_env must be given together")
        self._auth = (username, password) if username is not None and password is not None else None
        self._http: httpx.Client | None = None
        if sink.version == 2 and token is None and self._auth:
            token = f"{self._auth[0]}:{self._auth[1]}"  # InfluxDB 1.8's v2 compatibility API takes user:password
        self._token = token
        self.skipped_columns: tuple[str, ...] = ()

    # -- lines ---------------------------------------------------------------------------------------------------

    def lines(self, batch: pa.Table) -> tuple[list[str], int]:
        """The batch as line protocol (ms precision), and the number of rows left out for having no field."""
        names = batch.column_names
        if self.time_column not in names:
            raise SinkError(
                f"influx sink: time column {self.time_column!r} (sink.time_column or the window end) "
                f"is not among the columns {names}"
            )
        time_type = batch.schema.field(self.time_column).type
        if not (pa.types.is_timestamp(time_type) or pa.types.is_date(time_type)):
            raise SinkError(
                f"influx sink: sink.time_column: column {self.time_column!r} is {time_type}, not a timestamp; name a "
                f"timestamp column, or convert it in the SQL (e.g. timestamp_millis({self.time_column}))"
            )
        tags: list[tuple[str, list[Any]]] = []
        fields: list[tuple[str, list[Any]]] = []
        skipped: list[str] = []
        for name, column in zip(names, batch.columns, strict=True):
            if name == self.time_column:
                continue
            if _is_tag(name, column.type):
                tags.append((tag_name(name).translate(_KEY), column.to_pylist()))
            elif _is_field(column.type):
                fields.append((name.translate(_KEY), column.to_pylist()))
            else:
                skipped.append(name)
        if tuple(skipped) != self.skipped_columns:
            self.skipped_columns = tuple(skipped)
            if skipped:
                log.info("%s: columns %s are neither tags nor fields: not written", self.label, skipped)
        # the sink's own tags (the platform's `team`) win over a column's: a query cannot write as another team
        fixed = {escape_key(k): v for k, v in self.sink.tags.items()}
        tags = [t for t in tags if t[0] not in fixed] + [(k, [v] * batch.num_rows) for k, v in fixed.items()]
        tags.sort(key=lambda t: t[0])  # influx's preferred order: sorted tag keys
        times = _epoch_ms(batch.column(self.time_column))
        measurement = self.measurement.translate(_MEASUREMENT)
        out: list[str] = []
        no_fields = 0
        for i in range(batch.num_rows):
            field_set = ",".join(f"{k}={v}" for k, values in fields if (v := _field_value(values[i])) is not None)
            if not field_set or times[i] is None:
                no_fields += 1
                continue
            tag_set = "".join(f",{k}={v}" for k, values in tags if (v := _tag_value(values[i])) is not None)
            out.append(f"{measurement}{tag_set} {field_set} {times[i]}")
        return out, no_fields

    # -- writing -------------------------------------------------------------------------------------------------

    def _write_batch(self, batch: pa.Table, batch_id: int) -> tuple[int, int]:
        lines, skipped = self.lines(batch)
        sink = self.sink
        if sink.version == 1:
            path, params = "/write", {"db": sink.database, "precision": "ms"}
        else:
            path, params = "/api/v2/write", {"org": sink.org or "-", "bucket": sink.database, "precision": "ms"}
        for start in range(0, len(lines), CHUNK):
            self._post(path, params, lines[start : start + CHUNK])
        return len(lines), skipped

    def _post(self, path: str, params: dict[str, str], lines: list[str]) -> None:
        if self._http is None:
            import httpx

            # v2's token in its header; v1's Basic auth, not u=/p= query parameters: URLs end up in error messages.
            # Not influxdb-client for v2: a POST of lines was all it did here, for ~15 MB of imports in each driver.
            headers = {"Authorization": f"Token {self._token}"} if self.sink.version == 2 and self._token else {}
            auth = self._auth if self.sink.version == 1 else None
            self._http = httpx.Client(timeout=30, auth=auth, headers=headers)
        r = self._http.post(f"{self.url}{path}", params=params, content="\n".join(lines).encode())
        if r.status_code != 204:
            raise InfluxHTTPError(r.status_code, r.text.strip()[:500])

    def _retriable(self, error: Exception) -> bool:
        # A 4xx (bad line, unknown database, auth) fails the same way again; 429 and 5xx may not.
        status = error.status if isinstance(error, InfluxHTTPError) else None
        return status is None or status == 429 or status >= 500

    def _recover(self, error: Exception) -> None:
        self._close_client()

    def _close_client(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def close(self) -> None:
        self._close_client()
        super().close()


class InfluxHTTPError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
