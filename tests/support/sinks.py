"""What a dagger's sink holds, keyed like `surge_truth` (tests/support/events.py): the log sink's rows, the series in
VictoriaMetrics or InfluxDB, and waiting until the sink holds what is expected."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jobs.engine.status import DaggerStatus, read_status, status_path
from jobs.sinks import read_log
from odin.apis import http_client, victoria
from tests.support.services import Services


def utc_iso(value: str | datetime) -> str:
    when = value if isinstance(value, datetime) else datetime.fromisoformat(value.replace("Z", "+00:00"))
    return when.astimezone(UTC).isoformat()


def log_rows(path: Path) -> list[dict[str, Any]]:
    return list(read_log(path).values())


def surge_counts(rows: Iterable[dict[str, Any]]) -> Counter[tuple[int, str, str, str]]:
    """Rows of the surge query, keyed like `surge_truth`."""
    return Counter(
        {
            (r["tag_city_id"], r["tag_s2id"], r["tag_vehicle_type"], utc_iso(r["window_timestamp"])): r[
                "num_of_bookings"
            ]
            for r in rows
        }
    )


def surge_rows(path: Path) -> Counter[tuple[int, str, str, str]]:
    """The surge query's log sink output, keyed like `surge_truth`."""
    return surge_counts(log_rows(path))


def influx_surge(services: Services, version: int, measurement: str) -> Counter[tuple[int, str, str, str]]:
    """What the surge query wrote to VictoriaMetrics (API v2) or InfluxDB 1.6 (API v1), keyed like surge_truth."""
    got: Counter[tuple[int, str, str, str]] = Counter()
    if version == 2:
        for s in victoria.export(services.victoria_metrics_url, f"{measurement}_num_of_bookings"):
            m = s["metric"]
            for ts, value in zip(s["timestamps"], s["values"], strict=True):
                end = datetime.fromtimestamp(ts / 1000, UTC).isoformat()
                got[(int(m["tag_city_id"]), m["tag_s2id"], m["tag_vehicle_type"], end)] = int(value)
        return got
    q = f'SELECT num_of_bookings, tag_city_id, tag_s2id, tag_vehicle_type FROM "{measurement}"'
    r = http_client.get(f"{services.influxdb_url}/query", params={"db": "daggers", "epoch": "ms", "q": q}, timeout=30)
    r.raise_for_status()
    for ts, n, city, s2, vehicle in (r.json()["results"][0].get("series") or [{"values": []}])[0]["values"]:
        got[(int(city), s2, vehicle, datetime.fromtimestamp(ts / 1000, UTC).isoformat())] = n
    return got


def sink_reaches(
    measurement: str,
    services: Services,
    expected: Counter,
    timeout_s: float = 120,
    until: datetime | None = None,
    checkpoint: Path | None = None,
) -> Counter:
    """What the sink holds once it equals `expected`, or when waiting is pointless (for the assertion's diff). With
    `until`, only its windows ending by then: a perf stream also carries Loki's live load, whose windows close as it
    goes. With the dagger's `checkpoint`, the wait follows the dagger's own progress rather than the clock: it goes on
    while the dagger commits batches (up to 5 x `timeout_s`), gives up once it has stalled for `timeout_s` or counts
    events as late or lost (the sink can then never be exact), and prints why it gave up either way."""

    def read() -> Counter:
        got = influx_surge(services, 2, measurement)
        return (
            got if until is None else Counter({k: n for k, n in got.items() if datetime.fromisoformat(k[3]) <= until})
        )

    def status() -> DaggerStatus | None:
        return read_status(status_path(checkpoint)) if checkpoint is not None else None

    began = time.monotonic()
    moved, last = began, status()
    got = read()
    while got != expected:
        now, seen = time.monotonic(), status()
        if seen is not None and (last is None or (seen.batches, seen.events) != (last.batches, last.events)):
            moved, last = now, seen
        if seen is not None and (seen.late or seen.lost):
            why = f"the dagger counted {seen.late} late and {seen.lost} lost events"
        elif checkpoint is None and now - began > timeout_s:
            why = f"{timeout_s:.0f} s passed"
        elif checkpoint is not None and now - moved > timeout_s:
            why = f"the dagger made no progress for {timeout_s:.0f} s"
        elif now - began > 5 * timeout_s:
            why = f"{5 * timeout_s:.0f} s passed with the dagger still progressing"
        else:
            time.sleep(2)
            got = read()
            continue
        shown = "" if seen is None else f" (status: {seen.phase}, {seen.batches} batches, lag {seen.lag})"
        print(f"sink_reaches {measurement}: gave up: {why}{shown}; {len(got)} of {len(expected)} keys")
        break
    return got
