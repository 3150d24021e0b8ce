"""A local HTTP server for unit tests of HTTP clients (a stand-in for one answer of a real service, on 127.0.0.1):
`serving(Handler)` runs it in a thread and yields its base URL; `Handler` answers with `reply`."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Handler(BaseHTTPRequestHandler):
    """Quiet (no line per request on stderr); subclasses define do_GET/do_POST and answer with `reply`."""

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def reply(self, status: int, body: bytes | dict[str, Any], headers: dict[str, str] | None = None) -> None:
        """`body` a dict: sent as JSON."""
        if isinstance(body, dict):
            body, headers = json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})}
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        return None


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """The server's base URL (`http://127.0.0.1:<free port>`) while the block runs; stopped after it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
