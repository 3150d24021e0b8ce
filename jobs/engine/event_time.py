"""Event time per Kafka partition, and the stream's watermark: the minimum over its partitions, as Flink's Kafka
source does, so that one partition running ahead makes no other partition's event late.

Spark keeps one watermark per source: the latest event time it saw, minus the delay. A producer with a skewed clock,
a backlog read unevenly or markers at one partition's tail then make the other partitions' on-time events late. So
the source keeps a clock per partition instead:

- each read task gives Spark, in one marker row, the watermark its range makes: the minimum of its partition's latest
  event time and the other active partitions' as planned (`Bound`), minus the delay; and records its range's latest
  event time and that marker (`EventTimeLog`, a file per range);
- planning the next batch folds the records into each partition's clock (`advance`) and sets the stream's watermark
  to the minimum over partitions that are not idle, minus the delay, and the watermark Spark applies in the batch
  (the latest any row gave it); neither ever goes back;
- clocks and watermarks are part of the batch's end offset (jobs/engine/offsets.py), so a replay plans and reads the
  same;
- the reader sends events whose every window the applied watermark has closed to the dead-letter topic as `late`
  (`WindowRule.closed`): Spark would drop them.

A partition with no new events for the stream's `idle_timeout` no longer holds the watermark back; when every
partition is idle, the watermark follows the latest of them, so the last windows of a quiet stream are emitted. When
such a quiet stream resumes, every partition holds the watermark again for up to `idle_timeout`, as at the start:
events written to all partitions at once do not reach the planner at once, and the first partition seen must not
make the others' events late.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from jobs.engine.offsets import Clock, Partition
from odin.paths import write_atomic


@dataclass(frozen=True)
class Record:
    """What a read task records of its range: where it ended, its latest event time (µs; None: no event had one),
    and the watermark its marker row gave Spark."""

    end: int
    latest: int | None
    marker: int


@dataclass(frozen=True)
class Bound:
    """What a read task needs to give Spark the watermark its own range makes, at once (the planner learns of the
    range only when planning the next batch): the stream's watermark so far, the partition's latest event time before
    the range, and the least latest event time of the other active partitions."""

    watermark: int
    known: int | None
    others: int | None  # None: no other partition is active
    held: bool  # another active partition has shown no event yet: the minimum is not known
    delay: int

    def marker(self, latest: int | None) -> int:
        own = latest if self.known is None else self.known if latest is None else max(self.known, latest)
        if own is None or self.held:
            return self.watermark
        return max(self.watermark, (own if self.others is None else min(own, self.others)) - self.delay)


def _active(clocks: Mapping[Partition, Clock], now: float, idle_s: float) -> list[Partition]:
    return [p for p, c in clocks.items() if now - c.active_at < idle_s]


def bounds(
    clocks: Mapping[Partition, Clock],
    watermark: int,
    planned_at: float,
    delay_us: int,
    idle_s: float,
    tails: Mapping[Partition, int] | None = None,
) -> dict[Partition, Bound]:
    """Each partition's Bound in the batch planned at `planned_at` with `clocks` and `watermark`. `tails`: the event
    time of the last event of each range the batch reads, as the planner fetched it; the others' bound takes it into
    account (their latest after the batch is at least that), so the marker is current, not a batch behind."""
    tails = tails or {}
    active = _active(clocks, planned_at, idle_s)

    def latest(q: Partition) -> int | None:
        known, tail = clocks[q].latest, tails.get(q)
        return tail if known is None else known if tail is None else max(known, tail)

    out = {}
    for p, clock in clocks.items():
        others = [latest(q) for q in active if q != p]
        held = any(t is None for t in others)
        least = None if held or not others else min(t for t in others if t is not None)
        out[p] = Bound(watermark, clock.latest, least, held, delay_us)
    return out


def advance(
    clocks: Mapping[Partition, Clock],
    starts: Mapping[Partition, int],
    ends: Mapping[Partition, int],
    recorded: Callable[[Partition, int], Record | None],
    previous: tuple[int, int],
    now: float,
    delay_us: int,
    idle_s: float,
) -> tuple[dict[Partition, Clock], int, int]:
    """The clocks, the stream's watermark and the watermark Spark applies (µs) for the batch that reads
    [starts, ends) of each partition.

    `clocks` as of the previous batch's planning; `recorded(p, offset)` the record of the range read from `offset`
    (None if there is none); `previous` the watermark and the applied one so far, neither of which is lowered. Spark
    applies in a batch the latest watermark the rows of the batches before it carried: the previous batch's markers
    and the watermark planned for it."""
    watermark, applied = previous
    applied = max(applied, watermark)
    # A stream whose every partition was idle wakes up when any of them has new events: each partition gets
    # idle_timeout again to show its own, as at the start. Otherwise the first partition the planner sees resume
    # alone moves the watermark, and the others' events, written at the same moment, are late.
    resumed = any(end > starts.get(p, end) for p, end in ends.items())
    woke = resumed and bool(clocks) and not _active(clocks, now, idle_s)
    out: dict[Partition, Clock] = {}
    for p, end in ends.items():
        start = starts.get(p, end)
        clock = clocks.get(p) or Clock(start, None, now)
        through, latest = clock.through, clock.latest
        for _ in range(10_000):  # ranges read since the last planning: one per batch, usually one
            record = recorded(p, through)
            if record is None or record.end <= through:
                break
            through, applied = record.end, max(applied, record.marker)
            if record.latest is not None:
                latest = record.latest if latest is None else max(latest, record.latest)
        # The batch reads from `start`: a partition new to the checkpoint, a gap, or a record that is missing (a
        # checkpoint older than clocks) continue there, with what is known so far.
        out[p] = Clock(start, latest, now if end > start or woke else clock.active_at)
    active = [out[p].latest for p in _active(out, now, idle_s)]
    if active:
        held = any(latest is None for latest in active)  # a partition that is due events but has shown none
        candidate = None if held else min(t for t in active if t is not None) - delay_us
    else:  # every partition idle: follow the latest, so a quiet stream's last windows close
        known = [c.latest for c in out.values() if c.latest is not None]
        candidate = max(known) - delay_us if known else None
    return out, watermark if candidate is None else max(watermark, candidate), applied


class EventTimeLog:
    """Each read range's latest event time, one small file per range under the checkpoint, written by the read task
    and folded in when the next batch is planned. A retried task writes the same file (same range, same events).

    On a Spark cluster the checkpoint is on storage every executor shares (Spark's state needs that too)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _dir(self, p: Partition) -> Path:
        return self.root / p.topic / str(p.partition)

    def record(self, p: Partition, start: int, record: Record) -> None:
        folder = self._dir(p)
        folder.mkdir(parents=True, exist_ok=True)
        # the planner never reads half a record
        write_atomic(
            folder / str(start), json.dumps({"end": record.end, "latest": record.latest, "marker": record.marker})
        )

    def recorded(self, p: Partition, start: int) -> Record | None:
        try:
            d = json.loads((self._dir(p) / str(start)).read_text())
        except FileNotFoundError:
            return None
        return Record(int(d["end"]), d["latest"], int(d["marker"]))

    def prune(self, p: Partition, before: int) -> None:
        """Forget ranges starting before `before`: they are folded into a clock the offset log has."""
        folder = self._dir(p)
        if not folder.is_dir():
            return
        for f in folder.iterdir():
            if f.name.isdigit() and int(f.name) < before:
                f.unlink(missing_ok=True)


@dataclass(frozen=True)
class WindowRule:
    """The query's event-time window, for telling late events from the watermark: an event is late when every
    window it belongs to has ended at or before the watermark (Spark closed them, and would drop the event)."""

    kind: str  # tumble | hop | session
    size: int  # µs (session: the gap)
    slide: int | None = None  # hop only

    def last_end(self, rowtimes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The end of the last window each event belongs to (Spark's windows are aligned to the epoch)."""
        if self.kind == "session":
            return rowtimes + self.size
        step = self.slide or self.size
        return rowtimes - rowtimes % step + self.size

    def closed(self, rowtimes: npt.NDArray[np.int64], watermark: int) -> npt.NDArray[np.bool_]:
        return self.last_end(rowtimes) <= watermark

    def settled(self, watermark: int) -> int:
        """The latest window end at or before `watermark`, the watermark Spark is given: it closes the same windows
        (those Spark evicts, and whose events it drops), and it moves only when one closes. Spark runs a batch without
        events for every move of its watermark, to evict: one after nearly every batch of a query that ticks fast
        (jobs/engine/runner.py TICK_S), where a window closes once in many batches. A session ends where its last
        event says: any move may close one."""
        if self.kind == "session":
            return watermark
        step = self.slide or self.size
        return watermark - (watermark - self.size) % step
