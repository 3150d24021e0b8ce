"""Java behaviour the raystack UDFs inherit and analysts' queries rely on, reproduced over Arrow/numpy columns.

- time zones as ``java.util.TimeZone.getTimeZone`` resolves them (IANA ids, the old 3-letter ids such as ``IST``,
  custom ``GMT+07:00`` ids), and Java's display names for them;
- wall-clock <-> instant conversion as a lenient ``java.util.Calendar`` does it;
- ``java.text.SimpleDateFormat`` patterns (Locale.US, proleptic Gregorian calendar);
- ``String.valueOf`` of numbers (``Double.toString``: ``3.0``, ``1.0E7``).
"""

from __future__ import annotations

import datetime as dt
import math
import re
import zoneinfo
from dataclasses import dataclass
from decimal import Decimal
from functools import cache

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from jobs.udfs._java_zone_names import java_zone_names

MS_PER_DAY = 86_400_000
# Instants Python's datetime (and so every reference) can represent: 0001-01-01 .. 9999-12-31 UTC.
MIN_EPOCH_MS = -62_135_596_800_000
MAX_EPOCH_MS = 253_402_300_799_999
# Arrow's tz library ignores the TZif footer rule, so it has no DST after the last stored transition
# (2037 in Debian's tzdata); instants from here on are converted with zoneinfo instead.
_ARROW_TZ_LIMIT_MS = 2_114_380_800_000  # 2037-01-01T00:00:00Z
_EPOCH = dt.datetime(1970, 1, 1)

# java.time.ZoneId.SHORT_IDS, which TimeZone.getTimeZone also accepts (EST/MST/HST are fixed offsets there).
JAVA_SHORT_IDS: dict[str, str] = {
    "ACT": "Australia/Darwin",
    "AET": "Australia/Sydney",
    "AGT": "America/Argentina/Buenos_Aires",
    "ART": "Africa/Cairo",
    "AST": "America/Anchorage",
    "BET": "America/Sao_Paulo",
    "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare",
    "CNT": "America/St_Johns",
    "CST": "America/Chicago",
    "CTT": "Asia/Shanghai",
    "EAT": "Africa/Addis_Ababa",
    "ECT": "Europe/Paris",
    "EST": "-05:00",
    "HST": "-10:00",
    "IET": "America/Indiana/Indianapolis",
    "IST": "Asia/Kolkata",
    "JST": "Asia/Tokyo",
    "MIT": "Pacific/Apia",
    "MST": "-07:00",
    "NET": "Asia/Yerevan",
    "NST": "Pacific/Auckland",
    "PLT": "Asia/Karachi",
    "PNT": "America/Phoenix",
    "PRT": "America/Puerto_Rico",
    "PST": "America/Los_Angeles",
    "SST": "Pacific/Guadalcanal",
    "VST": "Asia/Ho_Chi_Minh",
}
_CUSTOM_ID = re.compile(r"GMT([+-])(\d{1,2})(?::?(\d{2}))?")
# Zones whose tzdata (vanguard format) uses a negative DST: Java's rearguard data calls their summer "daylight".
_NEGATIVE_DST = frozenset({"Europe/Dublin", "Eire"})


@dataclass(frozen=True)
class JavaZone:
    """A time zone as Java resolves an id: rules (zoneinfo / fixed offset), Arrow's name for it, display names."""

    id: str
    tzinfo: dt.tzinfo
    arrow_tz: str
    fixed_offset_ms: int | None
    names: tuple[str, str, str, str] | None  # short std, short daylight, long std, long daylight


def _offset_id(offset_ms: int) -> str:
    sign = "-" if offset_ms < 0 else "+"
    minutes = abs(offset_ms) // 60_000
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _fixed(zone_id: str, offset_ms: int) -> JavaZone:
    tz = dt.timezone(dt.timedelta(milliseconds=offset_ms))
    return JavaZone(zone_id, tz, _offset_id(offset_ms), offset_ms, java_zone_names().get(zone_id))


@cache
def resolve_zone(zone_id: str) -> JavaZone | None:
    """``TimeZone.getTimeZone(id)``, except that an unknown id gives None (Java silently falls back to GMT)."""
    names = java_zone_names().get(zone_id)
    target = JAVA_SHORT_IDS.get(zone_id, zone_id)
    if target[:1] in "+-":
        sign = -1 if target[0] == "-" else 1
        return _fixed(zone_id, sign * (int(target[1:3]) * 3_600_000 + int(target[4:6]) * 60_000))
    custom = _CUSTOM_ID.fullmatch(zone_id)
    if custom:
        hours, minutes = int(custom.group(2)), int(custom.group(3) or 0)
        if hours > 23 or minutes > 59:
            return None
        offset = (hours * 60 + minutes) * 60_000 * (-1 if custom.group(1) == "-" else 1)
        return _fixed("GMT" + _offset_id(offset) if offset else "GMT", offset)
    try:
        tz = zoneinfo.ZoneInfo(target)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return None
    return JavaZone(zone_id, tz, target, None, names)


# --- instants <-> wall clock -----------------------------------------------------------------------------------------


def _python_offset_ms(utc_ms: int, tz: dt.tzinfo) -> int:
    aware = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=utc_ms)
    offset = aware.astimezone(tz).utcoffset()
    return 0 if offset is None else offset // dt.timedelta(milliseconds=1)


def in_range(epoch_ms: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    return (epoch_ms >= MIN_EPOCH_MS) & (epoch_ms <= MAX_EPOCH_MS)


def local_wall_ms(utc_ms: npt.NDArray[np.int64], zone: JavaZone) -> npt.NDArray[np.int64]:
    """Wall-clock time in ``zone`` (as epoch ms of the naive local date-time) of each instant; vectorised in Arrow.

    Callers mask instants outside :func:`in_range` first (they are converted as if in UTC here).
    """
    if zone.fixed_offset_ms is not None:
        return utc_ms + zone.fixed_offset_ms
    python_rows = (utc_ms >= _ARROW_TZ_LIMIT_MS) | ~in_range(utc_ms)
    try:
        stamps = pa.array(utc_ms, type=pa.int64()).cast(pa.timestamp("ms", tz=zone.arrow_tz))
        wall = pc.local_timestamp(stamps).cast(pa.int64()).to_numpy(zero_copy_only=False).copy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # id known to zoneinfo (pip tzdata) but not to Arrow
        wall, python_rows = utc_ms.copy(), np.ones(len(utc_ms), dtype=bool)
    for idx in np.flatnonzero(python_rows & in_range(utc_ms)):
        wall[idx] = utc_ms[idx] + _python_offset_ms(int(utc_ms[idx]), zone.tzinfo)
    return wall


def wall_to_utc_ms(wall_ms: int, zone: JavaZone) -> int | None:
    """The instant a lenient java.util.Calendar gives a wall-clock time: the later one when the time occurs twice
    (DST ends), and the time read with the pre-transition offset when it is skipped (DST starts); i.e. the later
    of Python's fold=0 and fold=1 readings. None outside years 1..9999."""
    if zone.fixed_offset_ms is not None:
        return wall_ms - zone.fixed_offset_ms
    try:
        naive = _EPOCH + dt.timedelta(milliseconds=wall_ms)
    except OverflowError:
        return None
    candidates = []
    for fold in (0, 1):
        offset = naive.replace(tzinfo=zone.tzinfo, fold=fold).utcoffset()
        candidates.append(wall_ms - (0 if offset is None else offset // dt.timedelta(milliseconds=1)))
    return max(candidates)


def wall_to_utc_many(
    wall_ms: npt.NDArray[np.int64], zone: JavaZone
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """:func:`wall_to_utc_ms` over a column: computed once per distinct wall time (a batch spans few days)."""
    uniq, inverse = np.unique(wall_ms, return_inverse=True)
    converted = [wall_to_utc_ms(int(w), zone) for w in uniq]
    values = np.array([0 if c is None else c for c in converted], dtype=np.int64)[inverse]
    ok = np.array([c is not None for c in converted], dtype=bool)[inverse]
    return values, ok & in_range(values)


# --- proleptic Gregorian calendar arithmetic (days since 1970-01-01), vectorised ------------------------------------


def civil_from_days(days: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
    """(year, month 1..12, day 1..31) of day numbers; H. Hinnant's days->civil algorithm."""
    z = days + 719_468
    era = np.floor_divide(z, 146_097)
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    return yoe + era * 400 + (month <= 2), month, day


def days_from_civil(
    year: npt.NDArray[np.int64], month: npt.NDArray[np.int64], day: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * np.where(month > 2, month - 3, month + 9) + 2) // 5 + day - 1
    return era * 146_097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719_468


# --- SimpleDateFormat ------------------------------------------------------------------------------------------------

_PATTERN_LETTERS = "GyYMLwWDdFEuaHkKhmsSzZX"
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass(frozen=True)
class PatternField:
    letter: str
    count: int


PatternToken = str | PatternField


@cache
def compile_pattern(pattern: str) -> tuple[PatternToken, ...]:
    """Tokens of a SimpleDateFormat pattern; ValueError where Java throws IllegalArgumentException."""
    tokens: list[PatternToken] = []
    literal: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            if i + 1 < n and pattern[i + 1] == "'":  # '' is a quote, in or out of quoted text
                literal.append("'")
                i += 2
                continue
            i += 1
            while True:
                if i >= n:
                    raise ValueError(f"Unterminated quote in date pattern {pattern!r}")
                if pattern[i] == "'":
                    if i + 1 < n and pattern[i + 1] == "'":
                        literal.append("'")
                        i += 2
                        continue
                    i += 1
                    break
                literal.append(pattern[i])
                i += 1
        elif ("a" <= c <= "z") or ("A" <= c <= "Z"):
            if c not in _PATTERN_LETTERS:
                raise ValueError(f"Illegal pattern character {c!r} in date pattern {pattern!r}")
            j = i
            while j < n and pattern[j] == c:
                j += 1
            if c == "X" and j - i > 3:
                raise ValueError(f"invalid ISO 8601 format: length={j - i} in date pattern {pattern!r}")
            if literal:
                tokens.append("".join(literal))
                literal = []
            tokens.append(PatternField(c, j - i))
            i = j
        else:
            literal.append(c)
            i += 1
    if literal:
        tokens.append("".join(literal))
    return tuple(tokens)


def _padded(values: npt.NDArray[np.int64], width: int) -> pa.Array:
    text = pa.array(values, type=pa.int64()).cast(pa.string())
    return pc.utf8_lpad(text, width=width, padding="0") if width > 1 else text


def _names(table: tuple[str, ...], index: npt.NDArray[np.int64]) -> pa.Array:
    return pa.array(table, type=pa.string()).take(pa.array(index, type=pa.int64()))


def _offset_text(offset_ms: npt.NDArray[np.int64], colon: bool, minutes: bool, zulu: bool) -> pa.Array:
    total = np.abs(offset_ms) // 60_000
    sign = pa.array(np.where(offset_ms < 0, "-", "+"), type=pa.string())
    parts = [sign, _padded(total // 60, 2)]
    if minutes:
        parts += ([pa.array([":"] * len(offset_ms), type=pa.string())] if colon else []) + [_padded(total % 60, 2)]
    text = pc.binary_join_element_wise(*parts, "")
    if zulu:  # ISO 8601 (X): a zero offset is written 'Z'
        text = pc.if_else(pa.array(offset_ms == 0), pa.scalar("Z"), text)
    return text


def _zone_names(
    utc_ms: npt.NDArray[np.int64], offset_ms: npt.NDArray[np.int64], zone: JavaZone, long: bool
) -> pa.Array:
    """Java's ``z``/``zzzz``: the zone's standard or daylight name at each instant, or ``GMT+hh:mm`` without names."""
    if zone.fixed_offset_ms is not None and zone.names is None:
        name = "GMT" if zone.fixed_offset_ms == 0 else "GMT" + _offset_id(zone.fixed_offset_ms)
        return pa.array([name] * len(utc_ms), type=pa.string())
    # Daylight or not, decided once per distinct offset (a zone's offsets map to std/DST except in odd history).
    uniq, first, inverse = np.unique(offset_ms, return_index=True, return_inverse=True)
    labels = []
    for off, row in zip(uniq.tolist(), first.tolist(), strict=True):
        when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=int(utc_ms[row]))
        local = when.astimezone(zone.tzinfo)
        dst = local.dst() or dt.timedelta(0)
        daylight = dst > dt.timedelta(0) or (zone.id in _NEGATIVE_DST and dst == dt.timedelta(0))
        if zone.names is not None:
            labels.append(zone.names[(2 if long else 0) + (1 if daylight else 0)])
        else:
            abbrev = local.tzname() or ""
            labels.append(abbrev if abbrev.isalpha() and not long else "GMT" + _offset_id(off))
    return _names(tuple(labels), inverse.astype(np.int64))


def format_instants(utc_ms: npt.NDArray[np.int64], zone: JavaZone, pattern: str) -> pa.Array:
    """``new SimpleDateFormat(pattern)`` with ``setTimeZone(zone)`` applied to each instant (Locale.US).

    Instants must be within years 1..9999 (callers mask the others).
    """
    tokens = compile_pattern(pattern)
    n = len(utc_ms)
    wall = local_wall_ms(utc_ms, zone)
    offset = wall - utc_ms
    days = np.floor_divide(wall, MS_PER_DAY)
    ms_of_day = wall - days * MS_PER_DAY
    year, month, day = civil_from_days(days)
    hour = ms_of_day // 3_600_000
    monday0 = (days + 3) % 7  # 1970-01-01 was a Thursday
    sunday0 = (days + 4) % 7

    def week_fields() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        # Locale.US weeks: Sunday first, week 1 is the one holding January 1st (minimalDaysInFirstWeek = 1).
        week_start = days - sunday0
        week_year = civil_from_days(week_start + 6)[0]
        jan1 = days_from_civil(week_year, np.ones_like(week_year), np.ones_like(week_year))
        return week_year, (week_start - (jan1 - (jan1 + 4) % 7)) // 7 + 1

    parts: list[pa.Array] = []
    for token in tokens:
        if isinstance(token, str):
            parts.append(pa.array([token] * n, type=pa.string()))
            continue
        letter, count = token.letter, token.count
        era_year = np.where(year > 0, year, 1 - year)
        if letter == "G":
            parts.append(_names(("BC", "AD"), (year > 0).astype(np.int64)))
        elif letter in "yY":
            value = era_year if letter == "y" else week_fields()[0]
            parts.append(_padded(value % 100, 2) if count == 2 else _padded(value, count))
        elif letter in "ML":
            if count >= 4:
                parts.append(_names(_MONTHS, month - 1))
            elif count == 3:
                parts.append(_names(tuple(m[:3] for m in _MONTHS), month - 1))
            else:
                parts.append(_padded(month, count))
        elif letter == "w":
            parts.append(_padded(week_fields()[1], count))
        elif letter == "W":
            parts.append(_padded((day - 1 + (sunday0 - (day - 1)) % 7) // 7 + 1, count))
        elif letter == "D":
            jan1 = days_from_civil(year, np.ones_like(year), np.ones_like(year))
            parts.append(_padded(days - jan1 + 1, count))
        elif letter == "d":
            parts.append(_padded(day, count))
        elif letter == "F":
            parts.append(_padded((day - 1) // 7 + 1, count))
        elif letter == "E":
            parts.append(_names(_WEEKDAYS if count >= 4 else tuple(w[:3] for w in _WEEKDAYS), monday0))
        elif letter == "u":
            parts.append(_padded(monday0 + 1, count))
        elif letter == "a":
            parts.append(_names(("AM", "PM"), (hour >= 12).astype(np.int64)))
        elif letter == "H":
            parts.append(_padded(hour, count))
        elif letter == "k":
            parts.append(_padded(np.where(hour == 0, 24, hour), count))
        elif letter == "K":
            parts.append(_padded(hour % 12, count))
        elif letter == "h":
            parts.append(_padded(np.where(hour % 12 == 0, 12, hour % 12), count))
        elif letter == "m":
            parts.append(_padded(ms_of_day // 60_000 % 60, count))
        elif letter == "s":
            parts.append(_padded(ms_of_day // 1000 % 60, count))
        elif letter == "S":
            parts.append(_padded(ms_of_day % 1000, count))
        elif letter == "z":
            parts.append(_zone_names(utc_ms, offset, zone, long=count >= 4))
        elif letter == "Z":
            parts.append(_offset_text(offset, colon=False, minutes=True, zulu=False))
        else:  # X
            parts.append(_offset_text(offset, colon=count == 3, minutes=count >= 2, zulu=True))
    if not parts:
        return pa.array([""] * n, type=pa.string())
    return pc.binary_join_element_wise(*parts, "") if len(parts) > 1 else parts[0]


# --- String.valueOf ---------------------------------------------------------------------------------------------------


def _java_fp(shortest: str, negative: bool) -> str:
    """Java's Double/Float.toString layout from the shortest round-trip decimal digits."""
    _, digits, exponent = Decimal(shortest).normalize().as_tuple()
    text = "".join(map(str, digits))
    sci = len(text) - 1 + int(exponent)  # value = d.ddd x 10^sci
    prefix = "-" if negative else ""
    if -3 <= sci < 7:
        if sci >= 0:
            whole, frac = text[: sci + 1].ljust(sci + 1, "0"), text[sci + 1 :]
        else:
            whole, frac = "0", "0" * (-sci - 1) + text
        return f"{prefix}{whole}.{frac or '0'}"
    return f"{prefix}{text[0]}.{text[1:] or '0'}E{sci}"


def java_double_to_string(value: float) -> str:
    """``Double.toString``: ``3.0``, ``0.001``, ``1.0E7``, ``1.234E-5``, ``NaN``, ``Infinity``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    return _java_fp(repr(abs(value)), value < 0)


def java_float_to_string(value: float) -> str:
    """``Float.toString`` of a float32 value (shortest digits that identify the float32)."""
    if math.isnan(value) or math.isinf(value) or value == 0:
        return java_double_to_string(value)
    return _java_fp(str(np.float32(abs(value))), value < 0)
