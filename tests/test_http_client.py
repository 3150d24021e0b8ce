"""The platform's shared HTTP client (odin/apis/http_client.py): one per process, shared by whoever the process acts
for, so it keeps nothing of one request for the next."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odin.apis import http_client
from tests.support.http_stub import Handler, serving


@pytest.fixture
def server() -> Iterator[tuple[str, list[str | None]]]:
    """A local server that sets a session cookie on every answer and records the Cookie header it was sent."""
    seen: list[str | None] = []

    class SetsCookies(Handler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Cookie"))
            self.reply(200, b"ok", {"Set-Cookie": "session=alice-token; Path=/"})

    with serving(SetsCookies) as url:
        yield url, seen


def test_a_cookie_one_request_got_is_never_sent_with_the_next(server: tuple[str, list[str | None]]) -> None:
    url, seen = server
    assert http_client.get(f"{url}/login").text == "ok"
    assert http_client.get(f"{url}/daggers").status_code == 200
    assert seen == [None, None]
    assert http_client.client() is http_client.client()  # one client per process: the CA bundle loaded once
