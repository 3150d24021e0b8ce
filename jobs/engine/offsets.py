"""The Kafka source's offsets, typed, and the pure function that plans each micro-batch's offset ranges.

Spark checkpoints a source offset as JSON and hands it back as the start of the next batch. Ours is:

    {"offsets": {"<topic>": {"<partition>": next_offset}},  where each partition resumes
     "flush": µs,              event time of the last end-of-input sentinel (`--once` closes every window with one)
     "new": true,              only in the initial offset: no batch has run yet
     "initial": {...},         only in a query's first batch's end: where that batch started (Spark reports none)
     "begins": {...},          partitions this batch reads from elsewhere than the previous end: new ones, gaps
     "gaps": [{...}],          partitions whose checkpointed offset the broker no longer has (data loss accepted)
     "clocks": {...},          each partition's event time: [folded through offset, latest µs, active at s]
     "watermark": µs,          the stream's watermark, the minimum over partitions (jobs/engine/event_time.py)
     "applied": µs,            the watermark Spark applies in this batch (the latest earlier rows gave it)
     "planned_at": s,          when this batch was planned (which partitions are idle)
     "tails": {...}}           the event time of each range's last event, as planned

Planning is a pure function of the start offset, what the broker holds and the read limit, so that its guarantees
(every end within what exists, the limit kept, progress while a backlog exists) are tested without a broker.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Positions = dict["Partition", int]


@dataclass(frozen=True, order=True)
class Partition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


@dataclass(frozen=True)
class Extent:
    """What the broker holds of a partition: offsets [low, end)."""

    low: int
    end: int


@dataclass(frozen=True)
class Clock:
    """What the planner knows of one partition's event time."""

    through: int  # read ranges are folded in up to this offset
    latest: int | None  # latest event time (µs) read before `through`; None: no event yet
    active_at: float  # wall-clock seconds when new events were last planned for the partition

    def to_json(self) -> list[float | int | None]:
        return [self.through, self.latest, self.active_at]

    @classmethod
    def from_json(cls, raw: list[float | int | None]) -> Clock:
        through, latest, active_at = raw
        return cls(int(through or 0), None if latest is None else int(latest), float(active_at or 0.0))


@dataclass(frozen=True)
class Gap:
    """A partition whose checkpointed position is outside what the broker holds: the topic was recreated, the
    checkpoint is from another cluster, or retention deleted events not yet read. Reading resumes at `low`."""

    partition: Partition
    checkpoint: int  # where the checkpoint says reading resumes
    low: int  # the broker's range now: [low, end)
    end: int

    @property
    def lost(self) -> int:
        """Events skipped for certain: those retention deleted. Beyond the end (a recreated topic, another
        cluster) nobody can tell how many existed: 0 is counted and the gap is reported."""
        return self.low - self.checkpoint if self.checkpoint < self.low else 0

    def describe(self) -> str:
        if self.end < 0:
            return f"{self.partition}: the checkpoint resumes at offset {self.checkpoint}, the partition is gone"
        why = "retention deleted events not yet read" if self.checkpoint < self.low else "beyond its end"
        return (
            f"{self.partition}: the checkpoint resumes at offset {self.checkpoint}, the broker holds "
            f"[{self.low}, {self.end}) ({why})"
        )

    def to_json(self) -> dict[str, Any]:
        p = self.partition
        return {
            "topic": p.topic,
            "partition": p.partition,
            "checkpoint": self.checkpoint,
            "low": self.low,
            "end": self.end,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Gap:
        return cls(Partition(d["topic"], int(d["partition"])), int(d["checkpoint"]), int(d["low"]), int(d["end"]))


class DataLossError(RuntimeError):
    """The checkpoint resumes where the broker has no data: refused rather than skipped silently."""

    @classmethod
    def of(cls, gaps: Iterable[Gap]) -> DataLossError:
        lines = "\n".join(f"  {g.describe()}" for g in sorted(gaps, key=lambda g: g.partition))
        return cls(
            f"events may have been lost: the checkpoint does not match the broker\n{lines}\n"
            "If this is expected (a new topic or cluster, retention), either start over with `dagger run "
            "--reset-checkpoint`, or set `kafka.fail_on_data_loss: false` on the stream to continue from the earliest "
            "offset the broker has (skipped events are counted as lost_events)."
        )


def _positions_json(positions: Mapping[Partition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for p in sorted(positions):
        out.setdefault(p.topic, {})[str(p.partition)] = positions[p]
    return out


def _positions(d: Mapping[str, Mapping[str, Any]]) -> Positions:
    return {Partition(t, int(p)): int(o) for t, parts in d.items() for p, o in parts.items()}


_LEGACY = {"__flush", "__new", "__initial"}  # the reserved keys of checkpoints written before this format


@dataclass(frozen=True)
class SourceOffset:
    positions: Positions
    flush: int = 0
    new: bool = False
    initial: Positions | None = None
    begins: Positions = field(default_factory=dict)
    gaps: tuple[Gap, ...] = ()
    clocks: dict[Partition, Clock] = field(default_factory=dict)
    watermark: int = 0
    applied: int = 0
    planned_at: float = 0.0
    tails: Positions = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Canonical (sorted) JSON: Spark tells 'no new data' by comparing offsets' JSON text."""
        d: dict[str, Any] = {"offsets": _positions_json(self.positions), "flush": self.flush}
        if self.new:
            d["new"] = True
        if self.initial is not None:
            d["initial"] = _positions_json(self.initial)
        if self.begins:
            d["begins"] = _positions_json(self.begins)
        if self.gaps:
            d["gaps"] = [g.to_json() for g in sorted(self.gaps, key=lambda g: g.partition)]
        if self.clocks:
            clocks: dict[str, dict[str, list[float | int | None]]] = {}
            for p in sorted(self.clocks):
                clocks.setdefault(p.topic, {})[str(p.partition)] = self.clocks[p].to_json()
            d["clocks"] = clocks
        if self.tails:
            d["tails"] = _positions_json(self.tails)
        for key in ("watermark", "applied", "planned_at"):
            if getattr(self, key):
                d[key] = getattr(self, key)
        return d

    @classmethod
    def from_json(cls, raw: Mapping[str, Any] | str | None) -> SourceOffset:
        d: Mapping[str, Any] = (json.loads(raw) if isinstance(raw, str) else raw) or {}
        if "offsets" not in d:  # the earlier format: topics at the top level beside reserved keys
            initial = d.get("__initial")
            return cls(
                _positions({t: v for t, v in d.items() if t not in _LEGACY}),
                int(d.get("__flush", 0)),
                bool(d.get("__new")),
                None if initial is None else _positions(initial),
            )
        initial = d.get("initial")
        return cls(
            _positions(d["offsets"]),
            int(d.get("flush", 0)),
            bool(d.get("new", False)),
            None if initial is None else _positions(initial),
            _positions(d.get("begins", {})),
            tuple(Gap.from_json(g) for g in d.get("gaps", ())),
            {Partition(t, int(p)): Clock.from_json(c) for t, cs in d.get("clocks", {}).items() for p, c in cs.items()},
            int(d.get("watermark", 0)),
            int(d.get("applied", 0)),
            float(d.get("planned_at", 0.0)),
            _positions(d.get("tails", {})),
        )

    @property
    def lost(self) -> int:
        return sum(g.lost for g in self.gaps)


def batch_ranges(start: SourceOffset | None, end: SourceOffset) -> dict[Partition, tuple[int, int]]:
    """The [begin, end) each partition reads in the batch from `start` to `end` (empty ranges left out). Without a
    start (Spark's progress gives none for a query's first batch) the batch begins where its end says."""
    begins = (end.initial or {}) if start is None else start.positions
    out = {}
    for p, stop in end.positions.items():
        begin = end.begins.get(p, begins.get(p, stop))
        if stop > begin:
            out[p] = (begin, stop)
    return out


def task_groups(ranges: Mapping[Partition, tuple[int, int]], tasks: int) -> list[list[Partition]]:
    """The batch's ranges shared among at most `tasks` read tasks, each task's sorted: longest range first to the
    least loaded task, so none reads more than an even share plus one range. A dagger never runs more tasks at once
    than its parallelism, and each task costs a Python worker's round trip and a Kafka client: a task per partition
    only adds that cost. Ties go by partition, so a replayed batch gets the same tasks."""
    groups: list[list[Partition]] = [[] for _ in range(min(tasks, len(ranges)))]
    loads = [(0, i) for i in range(len(groups))]
    for p in sorted(ranges, key=lambda p: (ranges[p][0] - ranges[p][1], p)):
        load, i = heapq.heappop(loads)
        groups[i].append(p)
        heapq.heappush(loads, (load + ranges[p][1] - ranges[p][0], i))
    return [sorted(group) for group in groups]


def _share(backlog: Mapping[Partition, int], limit: int) -> dict[Partition, int]:
    """`limit` events shared in proportion to each partition's backlog, so partitions advance together in event
    time. Largest remainders get one more each: each share stays within its backlog, and they sum to the limit."""
    total = sum(backlog.values())
    share = {p: b * limit // total for p, b in backlog.items()}
    order = sorted(backlog, key=lambda p: (-(backlog[p] * limit % total), p))
    for p in order[: limit - sum(share.values())]:
        share[p] += 1
    return share


def plan_batch(
    start: SourceOffset,
    extents: Mapping[Partition, Extent],
    unavailable: frozenset[str] = frozenset(),
    limit: int | None = None,
    fail_on_data_loss: bool = True,
) -> SourceOffset:
    """The next batch's end offset: each partition's end, where partitions begin that do not resume at `start`,
    and the gaps found (DataLossError for any gap when `fail_on_data_loss`).

    `extents`: every partition the broker has now; `unavailable`: topics whose metadata is not known right now
    (their partitions keep their positions and read nothing). A partition new to the checkpoint starts at its
    earliest offset. With `limit`, at most that many events in all."""
    gaps: list[Gap] = []
    begins: Positions = {}
    for p, ext in extents.items():
        at = start.positions.get(p)
        if at is None:
            begins[p] = ext.low
        elif at < ext.low or at > ext.end:
            gaps.append(Gap(p, at, ext.low, ext.end))
            begins[p] = ext.low
        else:
            begins[p] = at
    kept: Positions = {}
    for p, at in start.positions.items():
        if p in extents:
            continue
        if p.topic in unavailable or at == 0:  # not known right now, or nothing was ever read of it
            kept[p] = at
        else:
            gaps.append(Gap(p, at, -1, -1))
    if gaps and fail_on_data_loss:
        raise DataLossError.of(gaps)
    backlog = {p: extents[p].end - b for p, b in begins.items() if extents[p].end > b}
    ends = {p: extents[p].end for p in begins}
    if limit is not None and sum(backlog.values()) > limit:
        ends |= {p: begins[p] + n for p, n in _share(backlog, limit).items()}
    moved = {p: b for p, b in begins.items() if start.positions.get(p) != b}
    return SourceOffset(kept | ends, begins=moved, gaps=tuple(sorted(gaps, key=lambda g: g.partition)))
