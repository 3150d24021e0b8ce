"""The Daggers page inside Airflow's UI: an Airflow plugin (entry point `airflow.plugins` in pyproject.toml) with a
FastAPI app mounted at /daggers in the api-server and an external view that puts it in Airflow's navigation, where
the UI shows it in a frame at /plugin/daggers.

`data.py` gathers what a user may see (the registry, health reports, VictoriaMetrics, Loki's store), `render.py`
makes the HTML, `app.py` has the routes and who asks. Airflow loads plugins in every one of its processes: this
module imports nothing but Airflow's plugin class, and the app is built on its first request."""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/daggers"


class LazyApp:
    """An ASGI app that builds the page's FastAPI app (and imports the platform's code) when first called."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from dags.provider.plugin.app import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


class DaggersPlugin(AirflowPlugin):
    name = "daggers"
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "Daggers"}]  # noqa: RUF012
    external_views = [  # noqa: RUF012
        {
            "name": "Daggers",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "url_route": "daggers",
            "icon": f"{URL_PREFIX}/icon.svg",
            "nav_top_level": True,
        }
    ]
