"""Event time per Kafka partition, and the stream's watermark: the minimum over its partitions, as Flink's Kafka
source does, so that one partition running ahead makes no other partition's event late.

Spark keeps one watermark per source: the latest event time it saw, minus the delay. A producer with a skewed clock,
a backlog read unevenly or markers at one partition's tail then make the other partitions' on-time events late. So
the source keeps a clock per partition instead:

- each read task records the latest event time of the offset range it read (`EventTimeLog`, a file per range);
- planning the next batch folds those records into each partition's clock (`advance`) and sets the watermark to
  the minimum over partitions that are not idle, minus the delay; it never goes back;
- the clocks and the watermark are part of the batch's end offset (jobs/offsets.py), so a replay sees the same;
- the reader sends events whose every window the watermark has closed to the dead-letter topic as `late`
  (`closed`), and Spark is given the watermark as one marker row (jobs/engine.py).

A partition with no new events for the stream's `idle_timeout` no longer holds the watermark back; when every
partition is idle, the watermark follows the latest of them, so the last windows of a quiet stream are emitted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from jobs.offsets import Clock, Partition

Record = tuple[int, int | None]  # a read range's end offset, and its latest event time (µs; None: no event time)


def advance(
    clocks: Mapping[Partition, Clock],
    starts: Mapping[Partition, int],
    ends: Mapping[Partition, int],
    recorded: Callable[[Partition, int], Record | None],
    previous: int,
    now: float,
    delay_us: int,
    idle_s: float,
) -> tuple[dict[Partition, Clock], int]:
    """The clocks and watermark (µs) for the batch that reads [starts, ends) of each partition.

    `clocks` as of the previous batch's planning; `recorded(p, offset)` the record of the range read from `offset`
    (None if there is none); `previous` the watermark so far, which is never lowered."""
    out: dict[Partition, Clock] = {}
    for p, end in ends.items():
        start = starts.get(p, end)
        clock = clocks.get(p) or Clock(start, None, now)
        through, latest = clock.through, clock.latest
        for _ in range(10_000):  # ranges read since the last planning: one per batch, usually one
            record = recorded(p, through)
            if record is None or record[0] <= through:
                break
            through = record[0]
            if record[1] is not None:
                latest = record[1] if latest is None else max(latest, record[1])
        # The batch reads from `start`: a partition new to the checkpoint, a gap, or a record that is missing (a
        # checkpoint older than clocks) continue there, with what is known so far.
        out[p] = Clock(start, latest, now if end > start else clock.active_at)
    active = [c.latest for c in out.values() if now - c.active_at < idle_s]
    if active:
        held = any(latest is None for latest in active)  # a partition that is due events but has shown none
        candidate = None if held else min(t for t in active if t is not None) - delay_us
    else:  # every partition idle: follow the latest, so a quiet stream's last windows close
        known = [c.latest for c in out.values() if c.latest is not None]
        candidate = max(known) - delay_us if known else None
    return out, previous if candidate is None else max(previous, candidate)


class EventTimeLog:
    """Each read range's latest event time, one small file per range under the checkpoint, written by the read task
    and folded in when the next batch is planned. A retried task writes the same file (same range, same events).

    On a Spark cluster the checkpoint is on storage every executor shares (Spark's state needs that too)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _dir(self, p: Partition) -> Path:
        return self.root / p.topic / str(p.partition)

    def record(self, p: Partition, start: int, end: int, latest: int | None) -> None:
        folder = self._dir(p)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{start}.{os.getpid()}"
        tmp.write_text(json.dumps({"end": end, "latest": latest}))
        os.replace(tmp, folder / str(start))  # atomic: the planner never reads half a record

    def recorded(self, p: Partition, start: int) -> Record | None:
        try:
            d = json.loads((self._dir(p) / str(start)).read_text())
        except FileNotFoundError:
            return None
        return int(d["end"]), d["latest"]

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
