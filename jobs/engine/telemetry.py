"""Per-dagger telemetry from Spark's streaming progress → the TSDB (`dagger_metrics`) and the driver log.

Malformed events are derived, not counted twice: every offset of a batch's range is either a decoded row or a
dead letter, so malformed = offsets consumed - rows read (control records of transactional producers excepted).
Spark reports no start offsets for a query's first batch: the source puts them in that batch's end offsets.
Lost events are those a gap skipped (jobs/engine/offsets.py); late events those the reader sent to the dead-letter
topic as behind the stream's watermark (jobs/engine/event_time.py), and dropped_by_watermark what Spark's stateful
operators dropped.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import httpx

from jobs.engine.offsets import SourceOffset, batch_ranges
from odin.apis import http_client

log = logging.getLogger("dagger.telemetry")
MEASUREMENT = "dagger_metrics"
OBSERVED = "dagger_events_"  # + stream index: the observe() metric counting a stream's events (jobs/engine/runner.py)


def _offset(raw: Any) -> SourceOffset | None:
    parsed = json.loads(raw) if isinstance(raw, str) else raw  # a query's first batch has start "null"
    return None if not parsed else SourceOffset.from_json(parsed)


def _batches(progress: dict[str, Any]) -> list[tuple[SourceOffset | None, SourceOffset]]:
    """(start, end) of each of our sources in the batch; start None in a query's first batch."""
    out = []
    for source in progress.get("sources", []):
        end = _offset(source.get("endOffset"))
        if end is not None:
            out.append((_offset(source.get("startOffset")), end))
    return out


def sentinel_rows(progress: dict[str, Any]) -> int:
    """End-of-input sentinel rows in a batch (one per source that flushed, see jobs/engine/kafka_source.py): not
    events."""
    return sum(end.flush > (start.flush if start else 0) for start, end in _batches(progress))


def dropped_by_watermark(progress: dict[str, Any]) -> int:
    """What Spark's stateful operators dropped as behind the watermark: the reader sends late events to the
    dead-letter topic first when it can tell them (jobs/engine/event_time.py), so these are the others. Spark drops
    late rows after a partial aggregation: this counts groups of late events (one per window and key), not events."""
    return sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in progress.get("stateOperators", []))


def _observed(progress: dict[str, Any], field: str) -> int:
    metrics = progress.get("observedMetrics") or {}
    rows = [row.asDict() if hasattr(row, "asDict") else row for n, row in metrics.items() if n.startswith(OBSERVED)]
    return sum(int(row.get(field) or 0) for row in rows)  # Spark's rows, or dicts parsed from progress JSON


def late_events(progress: dict[str, Any]) -> int:
    """Events behind the stream's watermark, sent to the dead-letter topic with reason `late`."""
    return _observed(progress, "late")


def event_rows(progress: dict[str, Any]) -> int:
    """Events read: not Spark's input rows, which leave out what the reader's WHERE dropped and count sentinels."""
    return _observed(progress, "events")


def partition_lags(progress: dict[str, Any]) -> dict[tuple[str, int], int]:
    """Events each partition had beyond the batch's end when it was planned: (topic, partition) -> lag."""
    lags = {}
    for source in progress.get("sources", []):
        end, latest = _offset(source.get("endOffset")), _offset(source.get("latestOffset"))
        if end is not None:
            for p, off in end.positions.items():
                lags[(p.topic, p.partition)] = max(0, (latest.positions.get(p, off) if latest else off) - off)
    return lags


def rates(progress: dict[str, Any]) -> tuple[float, float]:
    """(input, processed) events per second: Spark's rates are of its rows, which include sentinel rows."""
    rows, spark_rows = event_rows(progress), int(progress.get("numInputRows") or 0)
    per_event = rows / spark_rows if spark_rows else 0.0
    return (
        float(progress.get("inputRowsPerSecond") or 0.0) * per_event,
        float(progress.get("processedRowsPerSecond") or 0.0) * per_event,
    )


def malformed_and_lost(progress: dict[str, Any]) -> tuple[int, int]:
    """(malformed, lost) events of a batch: offsets consumed that gave no row, and events a gap skipped."""
    consumed = lost = 0
    for start, end in _batches(progress):
        consumed += sum(stop - begin for begin, stop in batch_ranges(start, end).values())
        lost += end.lost
    return max(0, consumed - event_rows(progress)), lost


def watermark(progress: dict[str, Any]) -> datetime | None:
    """The query's event-time watermark as the batch left it (None before the first event): Spark's, or its
    streams' own (the least of them) when later. A windowed query's source gives Spark the watermark in whole windows
    (jobs/engine/event_time.py WindowRule.settled); how far events are behind is measured against the stream's."""
    mark = (progress.get("eventTime") or {}).get("watermark")
    at = datetime.fromisoformat(mark.replace("Z", "+00:00")) if mark else None
    streams = [end.watermark for _, end in _batches(progress)]
    if streams and min(streams) > 0:
        own = datetime.fromtimestamp(min(streams) / 1e6, UTC)
        at = own if at is None else max(at, own)
    return at


def progress_points(dagger: str, progress: dict[str, Any], sink_errors: int = 0, team: str | None = None) -> list[str]:
    """Influx line-protocol points for one progress event: one for the query, one per Kafka partition. `team`
    tags them for alert routing (odin/alerting)."""
    ts_ns = int(datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp() * 1e9)
    from jobs.sinks.influx import escape_key  # the sinks' package: Arrow, sqlglot; readers of a status need none

    tag = f"dagger={escape_key(dagger)}" + (f",team={escape_key(team)}" if team else "")
    malformed, lost = malformed_and_lost(progress)
    lines = [
        f"{MEASUREMENT},{tag},topic={escape_key(topic)},partition={partition} lag={lag}i {ts_ns}"
        for (topic, partition), lag in sorted(partition_lags(progress).items())
    ]
    rows = event_rows(progress)
    input_rate, processed_rate = rates(progress)
    fields = {
        "input_rows": f"{rows}i",
        "input_rate": f"{input_rate}",
        "processed_rate": f"{processed_rate}",
        "batch_duration_ms": f"{int(progress.get('durationMs', {}).get('triggerExecution', 0))}i",
        "malformed": f"{malformed}i",
        "late_events": f"{late_events(progress)}i",
        "dropped_by_watermark": f"{dropped_by_watermark(progress)}i",
        "lost_events": f"{lost}i",
        "sink_errors": f"{sink_errors}i",
    }
    if (mark := watermark(progress)) is not None:
        fields["watermark_ms"] = f"{int(mark.timestamp() * 1000)}i"
    body = ",".join(f"{k}={v}" for k, v in fields.items())
    lines.append(f"{MEASUREMENT},{tag} {body} {ts_ns}")
    return lines


class Telemetry:
    """Writes progress points to an InfluxDB-compatible `/write` endpoint; never fails the dagger."""

    def __init__(self, dagger: str, url: str | None, database: str = "daggers", team: str | None = None) -> None:
        self.dagger, self.url, self.database, self.team = dagger, url, database, team
        self.failures = 0

    def record(self, progress: dict[str, Any], sink_errors: int = 0) -> None:
        lines = progress_points(self.dagger, progress, sink_errors, self.team)
        log.info("%s", lines[-1])
        if not self.url:
            return
        try:
            r = http_client.post(f"{self.url}/write", params={"db": self.database}, content="\n".join(lines), timeout=5)
            r.raise_for_status()
        except httpx.HTTPError as e:  # telemetry is best effort: count and log, keep processing
            self.failures += 1
            log.warning("telemetry write to %s failed (%d so far): %s", self.url, self.failures, e)
