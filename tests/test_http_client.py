"""The platform's shared HTTP client (odin/apis/http_client.py): one per process, shared by whoever the process acts
for, so it keeps nothing of one request for the next."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from odin.apis import http_client


@pytest.fixture
def server() -> Iterator[tuple[str, list[str | None]]]:
    """A local server that sets a session cookie on every answer and records the Cookie header it was sent."""
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Cookie"))
            self.send_response(200)
            self.send_header("Set-Cookie", "session=alice-token; Path=/")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_cookie_one_request_got_is_never_sent_with_the_next(server: tuple[str, list[str | None]]) -> None:
    url, seen = server
    assert http_client.get(f"{url}/login").text == "ok"
    assert http_client.get(f"{url}/daggers").status_code == 200
    assert seen == [None, None]
    assert http_client.client() is http_client.client()  # one client per process: the CA bundle loaded once
