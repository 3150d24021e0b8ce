"""How the suite's tests are grouped into units of work, ordered, and handed to the two xdist workers.

- A unit is a test file, or a folder of UNIT_FOLDERS (tests/airflow: its modules share one Airflow server, so one
  worker runs them all, one after the other).
- Units run heaviest first, by the seconds each took in a recorded run (tests/file_seconds.json): the last units
  handed out are short ones, so both workers end at about the same time (xdist's own order, by number of tests, left
  a worker idle for minutes at the end).
- The units that feed live load into the perf stream (LIVE_PERF_LOAD) come after the other long ones: the
  self-serve and DAG tests' daggers read the perf stream from its start, and Loki's events, newer than theirs, read
  first would make theirs late. Inside tests/airflow the same holds: the perf stream's readers first, Loki's DAG last.
- Units shorter than SHORT_S come last, filling the end of whichever worker is free first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xdist.scheduler import LoadFileScheduling

TESTS = Path(__file__).resolve().parent.parent
RECORDED = TESTS / "file_seconds.json"  # refreshed from a whole run's .local/test-file-seconds.json
UNKNOWN_S = 30.0  # a file not in the record yet
SHORT_S = 60.0  # a unit shorter than this fills the end
UNIT_FOLDERS = {
    "tests/airflow/": ("test_dags.py", "test_self_serve.py", "test_daggers_page.py", "test_loki_dag.py"),
}
LIVE_PERF_LOAD = ("tests/test_loki", "tests/test_clusters.py")


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    path = file_of(nodeid)
    return next((folder for folder in UNIT_FOLDERS if path.startswith(folder)), path)


def recorded_seconds(path: Path = RECORDED) -> dict[str, float]:
    return json.loads(path.read_text()) if path.exists() else {}


def order(items: list[pytest.Item], seconds: dict[str, float]) -> None:
    """Sort the collected items in place: by unit (the long ones heaviest first, then the live-load ones, then the
    short ones), each unit's items together, in its folder's file order, else as collected."""
    weights: dict[str, float] = {}
    for path in {file_of(item.nodeid) for item in items}:
        unit = unit_of(path)
        weights[unit] = weights.get(unit, 0.0) + seconds.get(path, UNKNOWN_S)

    def key(item: pytest.Item) -> tuple[int, float, str, int]:
        path, unit = file_of(item.nodeid), unit_of(item.nodeid)
        phase = 1 if unit.startswith(LIVE_PERF_LOAD) else 2 if weights[unit] < SHORT_S else 0
        files = UNIT_FOLDERS.get(unit, ())
        rank = files.index(path[len(unit) :]) if path[len(unit) :] in files else len(files)
        return phase, -weights[unit], unit, rank

    items.sort(key=key)  # stable: a file's tests stay in their order


class UnitScheduling(LoadFileScheduling):
    """xdist's per-file scheduling over this module's units, handed out in the collection's order (order() above)
    rather than xdist's default reorder by number of tests."""

    def __init__(self, config: pytest.Config, log: object | None = None) -> None:
        super().__init__(config, log)  # type: ignore[arg-type]
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
