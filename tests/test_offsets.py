"""The Kafka source's batch planner (jobs/engine/offsets.py), property-tested without a broker: for any backlogs,
starts and
limits, every planned end is within what exists, the limit is kept, and a backlog always makes progress."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.engine.kafka_source import ASK_AFTER_BOUNDARY_S, next_ask
from jobs.engine.offsets import (
    DataLossError,
    Extent,
    Gap,
    Partition,
    SourceOffset,
    batch_ranges,
    plan_batch,
    task_groups,
)


@st.composite
def brokers(draw: st.DrawFn) -> tuple[SourceOffset, dict[Partition, Extent]]:
    """A start offset within what the broker holds, over 1-6 partitions of 1-2 topics with any backlogs."""
    n = draw(st.integers(1, 6))
    parts = [Partition(f"t{i % 2}", i // 2) for i in range(n)]
    extents, positions = {}, {}
    for p in parts:
        low = draw(st.integers(0, 1_000))
        end = low + draw(st.one_of(st.integers(0, 3), st.integers(0, 10**7)))
        extents[p] = Extent(low, end)
        if draw(st.booleans()) or p == parts[0]:  # others are new to the checkpoint
            positions[p] = draw(st.integers(low, end))
    return SourceOffset(positions), extents


@settings(max_examples=1500, deadline=None)
@given(brokers(), st.one_of(st.none(), st.integers(1, 12), st.integers(1, 10**6)))
def test_planned_ends_stay_within_what_exists_and_the_limit(
    broker: tuple[SourceOffset, dict[Partition, Extent]], limit: int | None
) -> None:
    start, extents = broker
    end = plan_batch(start, extents, limit=limit)
    ranges = batch_ranges(start, end)
    assert not end.gaps
    for p, ext in extents.items():
        begin = end.begins.get(p, start.positions.get(p))
        assert begin is not None and ext.low <= begin <= end.positions[p] <= ext.end
    backlog = sum(ext.end - end.begins.get(p, start.positions.get(p, ext.low)) for p, ext in extents.items())
    planned = sum(stop - begin for begin, stop in ranges.values())
    assert planned <= (backlog if limit is None else min(limit, backlog))
    if backlog:
        assert planned == (backlog if limit is None else min(limit, backlog))  # progress, as much as allowed


def test_uneven_backlogs_on_three_partitions_never_plan_past_an_end() -> None:
    """The rounding remainder once went to the largest partition without a cap: [1, 1, 1] with a limit of 2 planned
    2 events on a partition holding 1, and the reader waited for an offset that did not exist."""
    parts = [Partition("t", i) for i in range(3)]
    start = SourceOffset(dict.fromkeys(parts, 0))
    end = plan_batch(start, dict.fromkeys(parts, Extent(0, 1)), limit=2)
    assert sorted(end.positions.values()) == [0, 1, 1]
    end = plan_batch(start, {parts[0]: Extent(0, 100), parts[1]: Extent(0, 1), parts[2]: Extent(0, 1)}, limit=3)
    assert all(end.positions[p] <= e for p, e in zip(parts, (100, 1, 1), strict=True))
    assert sum(end.positions.values()) == 3


def test_a_checkpoint_beyond_the_end_or_before_the_earliest_is_data_loss() -> None:
    a, b, gone = Partition("t", 0), Partition("t", 1), Partition("old", 0)
    start = SourceOffset({a: 500, b: 10, gone: 7})
    extents = {a: Extent(0, 300), b: Extent(40, 90)}  # a: topic recreated; b: retention deleted [10, 40)
    with pytest.raises(DataLossError) as e:
        plan_batch(start, extents)
    message = str(e.value)
    assert "t[0]: the checkpoint resumes at offset 500, the broker holds [0, 300)" in message
    assert "t[1]: the checkpoint resumes at offset 10, the broker holds [40, 90)" in message
    assert "old[0]" in message and "--reset-checkpoint" in message and "fail_on_data_loss: false" in message

    end = plan_batch(start, extents, fail_on_data_loss=False)
    assert end.gaps == (Gap(gone, 7, -1, -1), Gap(a, 500, 0, 300), Gap(b, 10, 40, 90))
    assert end.lost == 30  # only what retention deleted is known to be lost
    assert batch_ranges(start, end) == {a: (0, 300), b: (40, 90)}
    assert gone not in end.positions


def test_unavailable_topics_keep_their_positions() -> None:
    a = Partition("flaky", 0)
    end = plan_batch(SourceOffset({a: 42}), {}, unavailable=frozenset({"flaky"}))
    assert end.positions == {a: 42} and not end.gaps and batch_ranges(SourceOffset({a: 42}), end) == {}


def test_offsets_round_trip_as_canonical_json_and_read_the_earlier_format() -> None:
    a, b = Partition("t", 1), Partition("t", 0)
    offset = SourceOffset({a: 5, b: 3}, flush=9, initial={a: 0, b: 0}, begins={a: 2}, gaps=(Gap(a, 1, 2, 9),))
    assert SourceOffset.from_json(json.dumps(offset.to_json())) == offset
    assert list(offset.to_json()["offsets"]["t"]) == ["0", "1"]  # sorted: Spark compares offsets as text
    legacy = {"t": {"0": 3, "1": 5}, "__flush": 9, "__initial": {"t": {"0": 0, "1": 0}}}
    assert SourceOffset.from_json(legacy) == SourceOffset({a: 5, b: 3}, flush=9, initial={a: 0, b: 0})


@given(
    st.dictionaries(
        st.builds(Partition, st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 7)),
        st.integers(1, 10**6),
        max_size=24,
    ),
    st.integers(1, 8),
)
def test_a_batch_s_ranges_are_read_in_at_most_as_many_tasks_as_the_dagger_has(
    sizes: dict[Partition, int], tasks: int
) -> None:
    """Spark's task per Kafka partition costs ~0.1-0.2 s each (a Python worker's round trip and a Kafka client), so
    a stream of 8 partitions read by a dagger of parallelism 1 spent 1.7 s of its first batch in task overhead."""
    ranges = {p: (10, 10 + n) for p, n in sizes.items()}
    groups = task_groups(ranges, tasks)
    assert len(groups) == min(len(ranges), tasks)
    assert sorted(p for g in groups for p in g) == sorted(ranges)  # each range read once
    assert all(g == sorted(g) for g in groups)
    loads = [sum(sizes[p] for p in g) for g in groups]
    if loads:  # no task reads more than the fair share plus one range (the greedy longest-first bound)
        assert max(loads) <= sum(loads) / len(groups) + max(sizes.values())
    assert task_groups(dict(reversed(list(ranges.items()))), tasks) == groups  # the same batch, the same tasks


@given(st.floats(1.7e9, 2.0e9), st.integers(1, 3600))
def test_a_window_closed_at_a_boundary_is_read_after_it_not_an_interval_later(asked: float, interval: int) -> None:
    """The brokers are asked once per trigger interval, just after each boundary (a multiple of the interval, where
    whole-second windows and delays close): an event that closes a window a moment after a boundary is read in that
    interval's batch. Asked at the boundary itself, it waited for the next, a whole interval later."""
    then = next_ask(asked, interval)
    assert asked < then <= asked + interval  # once per interval, never longer
    boundary = then - ASK_AFTER_BOUNDARY_S
    assert boundary / interval == pytest.approx(round(boundary / interval), abs=1e-6)
    closing = boundary + 0.05  # the first event past a window's end + delay, on the brokers
    assert closing < then < closing + 1  # read at the next ask, within the second
