"""One HTTP client per process for the platform's requests (VictoriaMetrics, Spark's REST and UIs, Airflow's API,
Alertmanager). httpx's module functions (`httpx.get`, `httpx.post`...) build a client per call, and each client loads
the CA bundle: ~45 ms of CPU per request, even over plain http. A dagger's telemetry paid that at every progress.

No connection is kept between requests (no keep-alive pool): each request opens its own, as with the module
functions, so a connection a server closed while idle is never reused. No cookie is kept either: a process may act
for several users (a test, a CLI logging in), and one's cookie must never ride along with another's request."""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpx


@functools.cache
def client() -> httpx.Client:
    no_cookies = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
    return httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), cookies=no_cookies)


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    return client().request(method, url, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return client().get(url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return client().post(url, **kwargs)


def stream(method: str, url: str, **kwargs: Any) -> AbstractContextManager[httpx.Response]:
    """A response read as it arrives: `with stream(...) as r:`."""
    return client().stream(method, url, **kwargs)
