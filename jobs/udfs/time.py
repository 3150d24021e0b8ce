"""Time UDFs after raystack/dagger: TimestampFromUnix, FormatTimeInZone, StartOfWeek, EndOfWeek, StartOfMonth,
EndOfMonth. Units follow raystack's Java code (not its docs, which disagree): the week functions take and return
epoch *milliseconds*, the month functions epoch *seconds*.

Semantics are the documented contracts, also where raystack's Java code (java.util.Calendar, Locale en) does
something else; docs/udfs.md lists the differences. Weeks are ISO weeks, Monday 00:00 to Sunday 23:59:59.999
local time, which is what raystack's tests assert (Monday 2019-07-01 for Thursday 2019-07-04).

NULL in, NULL out; an unknown time zone id gives NULL (Java silently uses GMT); instants outside years 1..9999
give NULL.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyspark.sql.types import LongType, StringType, TimestampType

from jobs.udfs._arrow import combined, int64_result, int_column, str_values, valid_mask
from jobs.udfs.java import (
    MS_PER_DAY,
    JavaZone,
    civil_from_days,
    compile_pattern,
    days_from_civil,
    format_instants,
    in_range,
    local_wall_ms,
    resolve_zone,
    wall_to_utc_many,
)
from jobs.udfs.registry import UdfDef

# Spark TIMESTAMP holds microseconds in an int64: the |seconds| TimestampFromUnix can return.
_MAX_TIMESTAMP_SECONDS = (2**63 - 1) // 1_000_000


def timestamp_from_unix(seconds: pa.Array) -> pa.Array:
    """TimestampFromUnix kernel: the instant ``abs(seconds)`` after the epoch (raystack: ``Math.abs(seconds)``)."""
    secs, ok = int_column(seconds)
    ok &= np.abs(secs) <= _MAX_TIMESTAMP_SECONDS
    micros = np.abs(np.where(ok, secs, 0)) * 1_000_000
    return pa.array(micros, type=pa.int64(), mask=~ok).cast(pa.timestamp("us", tz="UTC"))


def _epoch_ms(ts: pa.Array) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Epoch milliseconds (floored, as java.sql.Timestamp.getTime) of a TIMESTAMP, DATE or integer-seconds column."""
    arr = combined(ts)
    if pa.types.is_timestamp(arr.type):
        unit = {"s": 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[arr.type.unit]
        raw = arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        ms = raw * unit if arr.type.unit == "s" else np.floor_divide(raw, unit)
        return ms, valid_mask(arr)
    if pa.types.is_date(arr.type):
        days = arr.cast(pa.date32()).cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False)
        return days.astype(np.int64) * MS_PER_DAY, valid_mask(arr)
    # Integers are epoch seconds, as Spark's CAST(bigint AS TIMESTAMP) reads them.
    secs, ok = int_column(arr)
    ok &= np.abs(secs) < 2**62 // 1000
    return np.where(ok, secs, 0) * 1000, ok


def _by_zone(
    utc_ms: npt.NDArray[np.int64],
    ok: npt.NDArray[np.bool_],
    zones: pa.Array,
    compute: Callable[[npt.NDArray[np.int64], JavaZone], tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Run ``compute(instants, zone)`` once per distinct zone of the batch (usually one: a literal)."""
    out = np.zeros(len(utc_ms), dtype=np.int64)
    out_ok = np.zeros(len(utc_ms), dtype=bool)
    zone_names = np.array(str_values(zones), dtype=object)
    ok = ok & in_range(utc_ms) & (zone_names != None)  # noqa: E711 (element-wise comparison)
    for name in set(zone_names[ok].tolist()):
        zone = resolve_zone(name)
        rows = np.flatnonzero(ok & (zone_names == name))
        if zone is None or rows.size == 0:
            continue
        values, good = compute(utc_ms[rows], zone)
        out[rows], out_ok[rows] = values, good
    return out, out_ok


def _local_days(utc_ms: npt.NDArray[np.int64], zone: JavaZone) -> npt.NDArray[np.int64]:
    return np.floor_divide(local_wall_ms(utc_ms, zone), MS_PER_DAY)


def _week_start(utc_ms: npt.NDArray[np.int64], zone: JavaZone) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    days = _local_days(utc_ms, zone)
    monday = days - (days + 3) % 7  # 1970-01-01 was a Thursday
    return wall_to_utc_many(monday * MS_PER_DAY, zone)


def _week_end(utc_ms: npt.NDArray[np.int64], zone: JavaZone) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    days = _local_days(utc_ms, zone)
    sunday = days - (days + 3) % 7 + 6
    return wall_to_utc_many(sunday * MS_PER_DAY + MS_PER_DAY - 1, zone)


def _month_start(utc_ms: npt.NDArray[np.int64], zone: JavaZone) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    days = _local_days(utc_ms, zone)
    first = days - (civil_from_days(days)[2] - 1)
    return wall_to_utc_many(first * MS_PER_DAY, zone)


def _month_end(utc_ms: npt.NDArray[np.int64], zone: JavaZone) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    year, month, _ = civil_from_days(_local_days(utc_ms, zone))
    next_first = days_from_civil(year + (month == 12), month % 12 + 1, np.ones_like(month))
    return wall_to_utc_many((next_first - 1) * MS_PER_DAY + MS_PER_DAY - 1, zone)


def start_of_week(millis: pa.Array, zone: pa.Array) -> pa.Array:
    """StartOfWeek kernel: epoch ms of Monday 00:00:00.000 (local) of the ISO week holding ``millis``."""
    ms, ok = int_column(millis)
    return int64_result(*_by_zone(ms, ok, zone, _week_start))


def end_of_week(millis: pa.Array, zone: pa.Array) -> pa.Array:
    """EndOfWeek kernel: epoch ms of Sunday 23:59:59.999 (local) of the ISO week holding ``millis``."""
    ms, ok = int_column(millis)
    return int64_result(*_by_zone(ms, ok, zone, _week_end))


def _seconds_kernel(
    seconds: pa.Array,
    zone: pa.Array,
    compute: Callable[[npt.NDArray[np.int64], JavaZone], tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]],
) -> pa.Array:
    secs, ok = int_column(seconds)
    ok &= np.abs(secs) < 2**62 // 1000
    ms, good = _by_zone(np.where(ok, secs, 0) * 1000, ok, zone, compute)
    return int64_result(np.floor_divide(ms, 1000), good)


def start_of_month(seconds: pa.Array, zone: pa.Array) -> pa.Array:
    """StartOfMonth kernel: epoch seconds of the 1st of the month, 00:00:00 local, of ``seconds``."""
    return _seconds_kernel(seconds, zone, _month_start)


def end_of_month(seconds: pa.Array, zone: pa.Array) -> pa.Array:
    """EndOfMonth kernel: epoch seconds of the month's last day at 23:59:59 local (Java: 23:59:59.999 / 1000)."""
    return _seconds_kernel(seconds, zone, _month_end)


def format_time_in_zone(ts: pa.Array, zone: pa.Array, pattern: pa.Array) -> pa.Array:
    """FormatTimeInZone kernel: SimpleDateFormat(pattern) in ``zone`` of each instant; NULL for NULL/unknown zone."""
    ms, ok = _epoch_ms(ts)
    zones = np.array(str_values(zone), dtype=object)
    patterns = np.array(str_values(pattern), dtype=object)
    ok &= in_range(ms) & (zones != None) & (patterns != None)  # noqa: E711 (element-wise comparison)
    keys = set(zip(zones[ok].tolist(), patterns[ok].tolist(), strict=True))
    for _, pat in keys:
        compile_pattern(pat)  # an invalid pattern is a query error, even next to an unknown zone
    if len(keys) == 1 and ok.all():  # the common case: literal zone and pattern, no NULLs: no Python loop
        zone_id, pat = keys.pop()
        java_zone = resolve_zone(zone_id)
        return format_instants(ms, java_zone, pat) if java_zone else pa.nulls(len(ms), type=pa.string())
    out: list[str | None] = [None] * len(ms)
    for zone_id, pat in keys:
        java_zone = resolve_zone(zone_id)
        if java_zone is None:
            continue
        rows = np.flatnonzero(ok & (zones == zone_id) & (patterns == pat))
        for row, text in zip(rows.tolist(), format_instants(ms[rows], java_zone, pat).to_pylist(), strict=True):
            out[row] = text
    return pa.array(out, type=pa.string())


TIME_UDFS: tuple[UdfDef, ...] = (
    UdfDef(
        "TimestampFromUnix",
        timestamp_from_unix,
        TimestampType(),
        "TimestampFromUnix(seconds BIGINT) -> TIMESTAMP",
        "The instant |seconds| after 1970-01-01T00:00:00Z (raystack takes the absolute value: -5 and 5 give the "
        "same instant). NULL for NULL.",
        "SELECT TimestampFromUnix(event_timestamp.seconds) AS event_time FROM booking",
    ),
    UdfDef(
        "FormatTimeInZone",
        format_time_in_zone,
        StringType(),
        "FormatTimeInZone(ts TIMESTAMP, timeZone STRING, dateFormat STRING) -> STRING",
        "`ts` formatted with java.text.SimpleDateFormat pattern `dateFormat` (Locale.US) in `timeZone` (any "
        "java.util.TimeZone id). NULL for NULL or an unknown zone; an invalid pattern fails the query.",
        "SELECT FormatTimeInZone(event_time, 'Asia/Jakarta', 'yyyy-MM-dd HH:mm') AS local_minute FROM booking",
    ),
    UdfDef(
        "StartOfWeek",
        start_of_week,
        LongType(),
        "StartOfWeek(millis BIGINT, timeZone STRING) -> BIGINT",
        "Epoch ms of Monday 00:00:00.000 in `timeZone` of the ISO week holding the instant `millis` (epoch ms). "
        "NULL for NULL or an unknown zone.",
        "SELECT StartOfWeek(unix_millis(event_time), 'Asia/Jakarta') AS week_start_ms FROM booking",
    ),
    UdfDef(
        "EndOfWeek",
        end_of_week,
        LongType(),
        "EndOfWeek(millis BIGINT, timeZone STRING) -> BIGINT",
        "Epoch ms of Sunday 23:59:59.999 in `timeZone` of the ISO week holding the instant `millis` (epoch ms). "
        "NULL for NULL or an unknown zone.",
        "SELECT EndOfWeek(unix_millis(event_time), 'Asia/Jakarta') AS week_end_ms FROM booking",
    ),
    UdfDef(
        "StartOfMonth",
        start_of_month,
        LongType(),
        "StartOfMonth(seconds BIGINT, timeZone STRING) -> BIGINT",
        "Epoch seconds of the 1st of the month, 00:00:00 in `timeZone`, of the instant `seconds` (epoch s). "
        "NULL for NULL or an unknown zone.",
        "SELECT StartOfMonth(event_timestamp.seconds, 'America/New_York') AS month_start FROM booking",
    ),
    UdfDef(
        "EndOfMonth",
        end_of_month,
        LongType(),
        "EndOfMonth(seconds BIGINT, timeZone STRING) -> BIGINT",
        "Epoch seconds of the last day of the month, 23:59:59 in `timeZone`, of the instant `seconds` (epoch s). "
        "NULL for NULL or an unknown zone.",
        "SELECT EndOfMonth(event_timestamp.seconds, 'America/New_York') AS month_end FROM booking",
    ),
)
