"""The traffic node of an environment: live events on every data stream of the catalog, at a modest steady rate, so a
preview, a deploy and a dashboard show data as soon as the stack is up. Perf twins are left to Loki, whose
experiments count exactly what they send.

`python -m odin.traffic.node --environment local --kafka HOST:PORT --rate N --host H --port P`, as the traffic role
runs it. GET /health answers 200 while every stream's events are delivered (503 with the reason otherwise), with
what was sent, delivered, failed and skipped per stream. SIGTERM stops it after flushing what is queued.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from confluent_kafka import KafkaException, Producer

from odin import catalog
from odin.traffic.feed import Feed, NoGenerator, producer

log = logging.getLogger("odin.traffic")
TICK_S = 0.1
TOPICS_RETRY_S = 5.0
STALE_S = 30.0  # a stream with no delivery for this long makes the node unhealthy


def data_feeds(environment: str, kafka: str, rate: float) -> tuple[list[Feed], dict[str, str]]:
    """A feed per data stream of the catalog (no perf twins), one producer per Kafka cluster; and the streams that
    cannot be fed, with why."""
    cat = catalog.load()
    producers: dict[str, Producer] = {}
    feeds, unfed = [], {}
    for stream in cat.streams:
        servers = cat.bootstrap_servers(stream, environment, kafka)
        try:
            feeds.append(Feed(stream, rate, servers, producers.setdefault(servers, producer(servers))))
        except NoGenerator as e:
            unfed[stream.name] = str(e)
    return feeds, unfed


class Node:
    def __init__(self, feeds: list[Feed], unfed: dict[str, str]) -> None:
        self.feeds, self.unfed = feeds, unfed
        self.started = time.time()
        self.stopping = threading.Event()
        self._waiting = list(feeds)  # topics not created yet (the broker may come up after this node)

    def status(self) -> tuple[bool, dict[str, Any]]:
        now, problems, streams = time.time(), [], {}
        for f in self.feeds:
            last = f.counts.last_delivery
            if f in self._waiting:
                problems.append(f"{f.stream.name}: topics not created yet")
            elif now - (last or self.started) > STALE_S:
                problems.append(f"{f.stream.name}: nothing delivered for {now - (last or self.started):.0f}s")
            streams[f.stream.name] = {"topics": f.stream.topics, "rate": f.rate, "sent": f.sent, **asdict(f.counts)}
        problems += self.unfed.values()
        return not problems, {"ok": not problems, "problems": problems, "streams": streams}

    def run(self) -> None:
        next_topics_try = 0.0
        producers = {id(f.producer): f.producer for f in self.feeds}.values()
        while not self.stopping.is_set():
            if self._waiting and time.monotonic() >= next_topics_try:
                self._create_topics()
                next_topics_try = time.monotonic() + TOPICS_RETRY_S
            for f in self.feeds:
                if f not in self._waiting:
                    f.send_due()
            for p in producers:
                p.poll(0)
            self.stopping.wait(TICK_S)
        for p in producers:
            p.flush(10)

    def _create_topics(self) -> None:
        for f in list(self._waiting):
            try:
                f.create_topics()
                f.restart_clock()
                self._waiting.remove(f)
            except KafkaException as e:
                log.warning("%s: topics not created yet: %s", f.stream.name, e)


def _handler(node: Node) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/health":
                self.send_error(404, "GET /health")
                return
            ok, body = node.status()
            data = json.dumps(body).encode()
            self.send_response(200 if ok else 503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # health is polled every few seconds: not worth a log line each

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--environment", default="local")
    parser.add_argument("--kafka", required=True, help="the environment's own broker (host:port)")
    parser.add_argument("--rate", type=float, required=True, help="events per second on each stream")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    node = Node(*data_feeds(args.environment, args.kafka, args.rate))
    server = ThreadingHTTPServer((args.host, args.port), _handler(node))
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: node.stopping.set())
    log.info("feeding %s at %s events/s each", ", ".join(f.stream.name for f in node.feeds), args.rate)
    try:
        node.run()
    finally:
        server.shutdown()
    log.info("stopped: %s", json.dumps(node.status()[1]["streams"]))


if __name__ == "__main__":
    main()
