"""The suite's order and units of work (tests/support/scheduling.py): what keeps the two xdist workers busy to the end
and keeps Loki's live load away from the perf stream's readers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.support import scheduling


@dataclass
class Item:  # what order() reads of a pytest item
    nodeid: str


def _files(items: list[Any]) -> list[str]:
    files: list[str] = []
    for item in items:
        if not files or files[-1] != scheduling.file_of(item.nodeid):
            files.append(scheduling.file_of(item.nodeid))
    return files


def test_long_units_first_then_the_live_load_then_the_short_ones() -> None:
    seconds = {
        "tests/test_short.py": 5.0,
        "tests/test_long.py": 300.0,
        "tests/test_loki_faults.py": 400.0,
        "tests/test_clusters.py": 320.0,
        "tests/test_medium.py": 120.0,
        "tests/airflow/test_loki_dag.py": 100.0,
        "tests/airflow/test_self_serve.py": 200.0,
        "tests/airflow/test_dags.py": 150.0,
    }
    items: list[Any] = [Item(f"{path}::test_{n}") for path in sorted(seconds) for n in range(2)]
    items.append(Item("tests/test_new.py::test_0"))  # not in the record: UNKNOWN_S
    scheduling.order(items, seconds)
    assert _files(items) == [
        "tests/airflow/test_dags.py",  # one unit (450 s), the perf stream's readers before Loki's DAG
        "tests/airflow/test_self_serve.py",
        "tests/airflow/test_loki_dag.py",
        "tests/test_long.py",
        "tests/test_medium.py",
        "tests/test_loki_faults.py",  # the live load, after every long unit
        "tests/test_clusters.py",
        "tests/test_new.py",  # short units fill the end
        "tests/test_short.py",
    ]
    assert [i.nodeid for i in items[:2]] == ["tests/airflow/test_dags.py::test_0", "tests/airflow/test_dags.py::test_1"]
    assert {scheduling.unit_of(i.nodeid) for i in items[:6]} == {"tests/airflow/"}
