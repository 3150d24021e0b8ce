"""The REST client of a cluster with standby masters: a standby answers every request with `success: false`
("Current state is not alive: STANDBY"), so the client asks the next master. The masters here are stand-ins that
answer as Spark's do (a unit test of the client; the HA test runs it against real masters)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jobs.submission import SparkRest

STANDBY = {
    "action": "CreateSubmissionResponse",
    "success": False,
    "message": "Current state is not alive: STANDBY. Can only accept driver submissions in ALIVE state.",
}
ALIVE = {"action": "CreateSubmissionResponse", "success": True, "submissionId": "driver-1"}


def _master(reply: dict) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def masters() -> Iterator[list[str]]:
    servers = [_master(STANDBY), _master(ALIVE)]
    try:
        yield [url for _, url in servers]
    finally:
        for server, _ in servers:
            server.shutdown()
            server.server_close()


def test_a_standby_master_passes_the_request_to_the_next(masters: list[str]) -> None:
    rest = SparkRest(masters, lambda: "token")
    assert rest.submit("/app.py", [], {}) == "driver-1"
