"""The Daggers page's routes, mounted in Airflow's api-server under /daggers. The actor is Airflow's authenticated
user (the bearer token, or the UI's JWT cookie, as Airflow's own API reads them), never a parameter: an anonymous
request is refused (401; a browser is sent to Airflow's login), another team's dagger is refused (403, recorded in the
registry's history), an unknown team or dagger is a 404 naming it, and whatever cannot be reached is a message on the
page."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from dags.provider.plugin import data, render

PREFIX = "/daggers"
log = logging.getLogger(__name__)

ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#017cee" stroke-width="2">'
    '<path d="M4 20 L20 4"/><path d="M14 4 h6 v6"/><path d="M3 14 l7 7"/></svg>'
)


class NotLoggedIn(Exception):
    pass


async def _actor(request: Request) -> str:
    """Airflow's user for this request, as Airflow's own API establishes it."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user
    from fastapi import HTTPException

    credentials = await bearer_scheme(request)
    try:
        user = await get_user(request, None, credentials)
    except HTTPException as e:  # no token, an expired or invalid one
        raise NotLoggedIn(str(e.detail)) from None
    name = user.get_name()
    if not name:
        raise NotLoggedIn("no user name in the token")
    return name


def _roots(request: Request) -> tuple[str, str]:
    """The page's own root (where it is mounted) and Airflow's."""
    base = str(request.scope.get("root_path", "")).rstrip("/") or PREFIX
    airflow = base[: -len(PREFIX)] if base.endswith(PREFIX) else ""
    return base, airflow


def _wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


def _error(request: Request, status: int, title: str, message: str) -> HTMLResponse:
    base, airflow = _roots(request)
    return HTMLResponse(render.error_page(status, title, message, base, airflow), status_code=status)


def _login(request: Request, reason: str) -> Response:
    if _wants_html(request):
        from airflow.api_fastapi.app import get_auth_manager

        try:
            return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)), status_code=303)
        except Exception:
            log.exception("the auth manager has no login URL")
    return _error(request, 401, "Not logged in", f"log in to Airflow to see the Daggers page ({reason})")


async def _page(request: Request, build: Any, *args: str) -> Response:
    """Run `build(user, *args)` off the event loop and render it; every failure is a page, never a crash."""
    try:
        user = await _actor(request)
    except NotLoggedIn as e:
        return _login(request, str(e))
    base, airflow = _roots(request)
    try:
        return HTMLResponse(await run_in_threadpool(build, user, base, airflow, *args))
    except data.NotFound as e:
        return _error(request, 404, "Not found", str(e))
    except data.Forbidden as e:
        return _error(request, 403, "Not yours", str(e))
    except Exception as e:
        log.exception("the Daggers page failed")
        return _error(request, 503, "Unavailable", f"the platform could not be read: {type(e).__name__}: {e}")


def _overview(user: str, base: str, airflow: str, team: str | None = None) -> str:
    return render.overview_page(data.overview(user, team), base, airflow, team)


def _detail(user: str, base: str, airflow: str, team: str, name: str) -> str:
    return render.detail_page(data.detail(user, team, name), base, airflow)


def create_app() -> FastAPI:
    app = FastAPI(title="Daggers", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    async def overview(request: Request) -> Response:
        return await _page(request, _overview)

    @app.get("/team/{team}", response_class=HTMLResponse)
    async def team_page(request: Request, team: str) -> Response:
        return await _page(request, _overview, team)

    @app.get("/dagger/{team}/{name}", response_class=HTMLResponse)
    async def dagger(request: Request, team: str, name: str) -> Response:
        return await _page(request, _detail, team, name)

    @app.get("/icon.svg")
    async def icon() -> Response:
        return Response(ICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    return app
