"""A running Airflow of the tests (the `airflow` fixture of tests/conftest.py yields one), its users, and the deploy
form's fields as a person fills them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from odin.apis.airflow_api import AirflowApi
from odin.endpoints import Endpoints
from tests.support.catalog import PERF_STREAM
from tests.support.seeds import SURGE_SQL
from tests.support.services import Services

USERS = {"admin": "admin", "alice": "user", "bob": "user"}  # alice is in the team; bob is not


@dataclass(frozen=True)
class Airflow:
    url: str
    endpoints: Endpoints

    def api(self, user: str) -> AirflowApi:
        return AirflowApi(self.url, user, self.endpoints.airflow_password(user))


def deploy_form(team: str, measurement: str, services: Services, **changes: Any) -> dict[str, Any]:
    """The deploy form's fields as a person fills them: the seed's surge query on a catalog stream, to the TSDB."""
    return {
        "team": team,
        "name": "surge-form",
        "cluster": "main",
        "stream": PERF_STREAM,
        "sql": SURGE_SQL,
        "sink_type": "influx",
        "sink": {"url": services.victoria_metrics_url, "measurement": measurement},
        "watermark_delay": "10s",
        "trigger_interval": "2s",
        "parallelism": 1,
    } | changes


def as_user(airflow: Airflow, user: str | None) -> Any:
    """An HTTP client (httpx) of Airflow's api-server acting as `user` (its bearer token), or anonymous (None)."""
    import httpx

    from odin.apis.airflow_api import access_token

    headers = {}
    if user is not None:
        headers["Authorization"] = f"Bearer {access_token(airflow.url, user, airflow.endpoints.airflow_password(user))}"
    return httpx.Client(base_url=airflow.url, headers=headers, timeout=60, follow_redirects=False)
