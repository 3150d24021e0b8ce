"""The tests that run Airflow. Its server is started once for this package and stopped after its last test; the
package is one unit of work for xdist (tests/support/scheduling.py), so one worker runs it, start to end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odin.endpoints import Endpoints
from odin.spec import Service
from tests.support.airflow import USERS, Airflow
from tests.support.services import Services, TeamCluster


@pytest.fixture(scope="package")
def airflow(services: Services, team_cluster: TeamCluster) -> Iterator[Airflow]:
    """Airflow added to the session's stack (after the team cluster exists: the form's dropdowns are read when the
    DAG file is parsed). Its scheduled DAGs stay paused: a health check every minute would heal the daggers other
    tests break on purpose. Booting it costs ~40 s and a stop ~10 s: the package's modules share it."""
    stack = services.stack
    assert stack is not None
    report = stack.up(stack.resolve(None, {Service.airflow}, None, USERS, airflow_dags_paused=True))
    try:
        assert report.ok, [(f.task, f.message) for f in report.playbook.failures]
        endpoints = Endpoints(stack.nodes())
        yield Airflow(endpoints.airflow_url, endpoints)
    finally:
        stack.down(only={Service.airflow})
