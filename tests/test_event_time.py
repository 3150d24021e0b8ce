"""The stream's watermark from per-partition clocks (jobs/engine/event_time.py), and late events told like Spark's
windows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from jobs.engine.event_time import Bound, EventTimeLog, Record, WindowRule, advance, bounds
from jobs.engine.offsets import Clock, Partition, SourceOffset

S = 1_000_000  # µs
DELAY = 60 * S
IDLE = 60.0
NOW = 10_000.0
P = [Partition("t", i) for i in range(4)]


def records(ranges: dict[Partition, list[tuple[int, int, int | None]]], marker: int = 0):  # (start, end, latest)
    table = {(p, start): Record(end, latest, marker) for p, rs in ranges.items() for start, end, latest in rs}
    return lambda p, start: table.get((p, start))


def test_one_partition_far_ahead_does_not_move_the_watermark_past_the_others() -> None:
    clocks = {p: Clock(0, None, NOW) for p in P[:2]}
    recorded = records({P[0]: [(0, 100, 86_400 * S)], P[1]: [(0, 100, 120 * S)]})
    out, wm, _ = advance(clocks, {P[0]: 100, P[1]: 100}, {P[0]: 100, P[1]: 150}, recorded, (0, 0), NOW, DELAY, IDLE)
    assert wm == 60 * S
    assert out[P[0]] == Clock(100, 86_400 * S, NOW - 0) and out[P[1]].latest == 120 * S
    # What the read tasks give Spark at once is never beyond that minimum either.
    limits = bounds(out, wm, NOW, DELAY, IDLE)
    assert limits[P[1]].marker(130 * S) == 70 * S and limits[P[0]].marker(86_500 * S) == 120 * S - DELAY


def test_a_partition_that_has_shown_no_event_holds_the_watermark_until_it_is_idle() -> None:
    clocks = {P[0]: Clock(0, None, NOW), P[1]: Clock(0, None, NOW)}
    recorded = records({P[0]: [(0, 10, 500 * S)]})
    out, wm, _ = advance(clocks, {P[0]: 10, P[1]: 0}, {P[0]: 10, P[1]: 0}, recorded, (0, 0), NOW + 1, DELAY, IDLE)
    assert wm == 0 and bounds(out, wm, NOW + 1, DELAY, IDLE)[P[0]].marker(600 * S) == 0
    clocks = {P[0]: Clock(0, None, NOW + 100), P[1]: Clock(0, None, NOW)}  # partition 1: nothing for 100 s
    _, wm, _ = advance(clocks, {P[0]: 10, P[1]: 0}, {P[0]: 10, P[1]: 0}, recorded, (0, 0), NOW + 100, DELAY, IDLE)
    assert wm == 440 * S


def test_when_every_partition_is_idle_the_watermark_follows_the_latest() -> None:
    clocks = {P[0]: Clock(10, 500 * S, NOW), P[1]: Clock(10, 200 * S, NOW)}
    same = {P[0]: 10, P[1]: 10}
    _, wm, _ = advance(clocks, same, same, records({}), (0, 0), NOW + 10, DELAY, IDLE)
    assert wm == 140 * S
    _, wm, _ = advance(clocks, same, same, records({}), (0, 0), NOW + IDLE + 1, DELAY, IDLE)
    assert wm == 440 * S


def test_a_quiet_stream_that_resumes_waits_for_every_partition_again() -> None:
    """Every partition idle, then events written to both at once: the planner sees partition 0's a moment before
    partition 1's. Partition 0 alone must not move the watermark (partition 1's events would be late: a window kept 1
    of its 2 events after a cluster failover); a partition that still shows nothing stops holding it idle_timeout
    later."""
    clocks = {p: Clock(10, 300 * S, NOW) for p in P[:2]}
    woke = NOW + IDLE + 100
    resumed = {P[0]: 20, P[1]: 10}
    out, wm, _ = advance(clocks, {P[0]: 10, P[1]: 10}, resumed, records({}), (240 * S, 240 * S), woke, DELAY, IDLE)
    assert wm == 240 * S
    assert bounds(out, wm, woke, DELAY, IDLE, {P[0]: 900 * S})[P[0]].marker(900 * S) == 240 * S  # was 840 s
    recorded = records({P[0]: [(10, 20, 900 * S)]}, marker=240 * S)
    _, wm, _ = advance(out, resumed, resumed, recorded, (wm, wm), woke + IDLE + 1, DELAY, IDLE)
    assert wm == 840 * S


def test_a_missing_record_continues_where_the_batch_reads() -> None:
    """A checkpoint from before clocks, or a range whose record was lost: the clock jumps to the batch's start."""
    clocks = {P[0]: Clock(0, 300 * S, NOW)}
    out, wm, applied = advance(clocks, {P[0]: 50}, {P[0]: 80}, records({}), (7, 0), NOW, DELAY, IDLE)
    assert out[P[0]] == Clock(50, 300 * S, NOW) and wm == 240 * S and applied == 7


def test_spark_applies_the_latest_watermark_any_row_gave_it() -> None:
    """The previous batch's markers, and the watermark planned for it, reach Spark's watermark for the next batch."""
    clocks = {P[0]: Clock(0, None, NOW)}
    ranges = {P[0]: [(0, 10, 500 * S)]}
    _, wm, applied = advance(clocks, {P[0]: 10}, {P[0]: 10}, records(ranges, 440 * S), (30, 20), NOW, DELAY, IDLE)
    assert (wm, applied) == (440 * S, 440 * S)
    _, _, applied = advance(clocks, {P[0]: 10}, {P[0]: 10}, records(ranges, 5), (30, 20), NOW, DELAY, IDLE)
    assert applied == 30


def test_a_range_alone_moves_spark_like_its_own_watermark() -> None:
    alone = Bound(watermark=0, known=100 * S, others=None, held=False, delay=DELAY)
    assert (alone.marker(None), alone.marker(50 * S), alone.marker(600 * S)) == (40 * S, 40 * S, 540 * S)
    assert Bound(7, None, None, False, DELAY).marker(None) == 7
    assert Bound(7, 100 * S, 300 * S, True, DELAY).marker(600 * S) == 7  # another partition has shown nothing


backlogs = st.lists(
    st.lists(st.tuples(st.integers(1, 50), st.one_of(st.none(), st.integers(0, 10**12))), max_size=4),
    min_size=1,
    max_size=4,
)


@settings(max_examples=500, deadline=None)
@given(backlogs, st.integers(0, 10**12), st.lists(st.floats(0, 200), min_size=4, max_size=4))
def test_the_watermark_is_the_minimum_over_active_partitions_and_never_goes_back(
    reads: list[list[tuple[int, int | None]]], previous: int, ages: list[float]
) -> None:
    """Each partition read some ranges since the last planning (length, latest event time); the watermark is the
    minimum of the active partitions' latest minus the delay, or the previous one if that is later."""
    table: dict[Partition, list[tuple[int, int, int | None]]] = {}
    ends: dict[Partition, int] = {}
    for p, ranges in zip(P, reads, strict=False):
        at = 0
        for n, latest in ranges:
            table.setdefault(p, []).append((at, at + n, latest))
            at += n
        ends[p] = at
    clocks = {p: Clock(0, None, NOW - age) for p, age in zip(ends, ages, strict=False)}
    out, wm, _ = advance(clocks, ends, ends, records(table), (previous, 0), NOW, DELAY, IDLE)
    assert wm >= previous
    for p, clock in out.items():
        seen = [latest for _, _, latest in table.get(p, []) if latest is not None]
        assert clock == Clock(ends[p], max(seen) if seen else None, clocks[p].active_at)
    active = [c.latest for c in out.values() if NOW - c.active_at < IDLE]
    if active and None not in active:
        assert wm == max(previous, min(t for t in active if t is not None) - DELAY)
    elif active:
        assert wm == previous


def test_clocks_and_the_watermark_round_trip_through_the_offsets_json() -> None:
    clocks = {P[0]: Clock(5, 123, 9.5), P[1]: Clock(0, None, 1.0)}
    offset = SourceOffset({P[0]: 5}, clocks=clocks, watermark=77, applied=70, planned_at=9.5)
    assert SourceOffset.from_json(offset.to_json()) == offset
    assert SourceOffset.from_json({"offsets": {"t": {"0": 5}}}).watermark == 0  # a checkpoint older than clocks


def test_the_log_keeps_one_record_per_range_and_forgets_folded_ones(tmp_path: Path) -> None:
    log = EventTimeLog(tmp_path)
    log.record(P[0], 0, Record(10, 5, 1))
    log.record(P[0], 10, Record(20, None, 1))
    log.record(P[0], 10, Record(20, None, 1))  # a retried task
    assert [log.recorded(P[0], at) for at in (0, 10, 20)] == [Record(10, 5, 1), Record(20, None, 1), None]
    log.prune(P[0], 10)
    assert log.recorded(P[0], 0) is None and log.recorded(P[0], 10) == Record(20, None, 1)


@pytest.mark.parametrize(
    ("rule", "spark_window"),
    [
        (WindowRule("tumble", 60 * S), "window(t, '60 seconds')"),
        (WindowRule("hop", 60 * S, 20 * S), "window(t, '60 seconds', '20 seconds')"),
        (WindowRule("session", 30 * S), "session_window(t, '30 seconds')"),
    ],
)
def test_an_events_last_window_ends_where_sparks_does(spark: SparkSession, rule: WindowRule, spark_window: str) -> None:
    times = np.array([0, 1, 59_999_999, 60 * S, 61 * S + 5, 1_772_352_000 * S + 123_456], np.int64)
    spark.createDataFrame([(i, int(t)) for i, t in enumerate(times)], "i int, us long").createOrReplaceTempView("ev")
    windows = (  # one row per event and window it belongs to
        f"SELECT i, {spark_window.split('(')[0]}.end AS e FROM (SELECT i, timestamp_micros(us) AS t FROM ev) "
        f"GROUP BY i, {spark_window}"
    )
    rows = spark.sql(f"SELECT i, max(e) AS e FROM ({windows}) GROUP BY i").collect()
    ends = {r["i"]: int(r["e"].timestamp() * S) for r in rows}
    got = rule.last_end(times)
    assert [ends[i] for i in range(len(times))] == got.tolist()
    assert rule.closed(times, int(got[2])).tolist() == (got <= got[2]).tolist()


def test_the_bound_counts_the_other_ranges_last_events_as_planned() -> None:
    """Planned tails make the marker current: in a query's first batch no partition has shown an event yet, but the
    last event of each range is known, and every partition's latest after the batch is at least that."""
    clocks = {P[0]: Clock(0, None, NOW), P[1]: Clock(0, None, NOW)}
    limits = bounds(clocks, 0, NOW, DELAY, IDLE, {P[0]: 300 * S, P[1]: 200 * S})
    assert limits[P[0]].marker(310 * S) == 140 * S and limits[P[1]].marker(205 * S) == 145 * S
    assert bounds(clocks, 0, NOW, DELAY, IDLE, {P[0]: 300 * S})[P[0]].marker(310 * S) == 0  # P[1] unknown: held


@given(
    st.sampled_from(
        [WindowRule("tumble", 60 * S), WindowRule("hop", 60 * S, 20 * S), WindowRule("hop", 10 * S, 4 * S)]
    ),
    st.integers(0, 4_000_000_000 * S),
    st.lists(st.integers(0, 4_000_000_000 * S), min_size=1, max_size=50),
)
def test_spark_is_given_the_watermark_at_the_last_window_end_it_passed(
    rule: WindowRule, watermark: int, rowtimes: list[int]
) -> None:
    """The same windows closed, the same events late, and a watermark that moves only when a window closes: Spark
    runs a batch without events for every move of its watermark."""
    settled = rule.settled(watermark)
    times = np.array(rowtimes, np.int64)
    assert settled <= watermark and rule.closed(times, settled).tolist() == rule.closed(times, watermark).tolist()
    assert (settled - rule.size) % (rule.slide or rule.size) == 0  # a window's end
    assert rule.settled(settled) == settled and rule.settled(settled - 1) < settled  # moves only at window ends
    assert WindowRule("session", 30 * S).settled(watermark) == watermark  # any move may end a session
