"""A local consumer's network path to Kafka, made controllable: the consumer runs inside a network namespace of the
run's own, where 127.0.0.1 is the namespace's loopback. A proxy of the run listens there on the ports the consumer
uses (the broker's advertised port, the sink's, telemetry's) and forwards to the host's services. Clients cannot
bypass it: the address the broker advertises is the proxy inside the namespace.

Faults then act on that path only: iptables rules inside the namespace drop the Kafka traffic (partition) or a
share of its packets (loss); the proxy adds latency, jitter and a bandwidth limit (this kernel has no netem).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import random
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

CLONE_NEWNET = 0x40000000
CHUNK = 64 * 1024
Rule = list[str]


class NetworkError(RuntimeError):
    """The namespace, its rules or the proxy could not be set up: says what is missing."""


def _run(args: list[str]) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise NetworkError(f"{' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")


def _listen_in(netns: str, port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:`port` inside `netns`: made by a thread that entered the namespace (a
    socket belongs to the namespace it was created in; the thread, and only it, is moved)."""
    made: dict[str, socket.socket | BaseException] = {}

    def enter_and_listen() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            with open(f"/var/run/netns/{netns}") as ns:
                if libc.setns(ns.fileno(), CLONE_NEWNET) != 0:
                    raise NetworkError(f"setns({netns}): errno {ctypes.get_errno()}")
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen(128)
            s.setblocking(False)
            made["socket"] = s
        except BaseException as e:
            made["error"] = e

    t = threading.Thread(target=enter_and_listen, name=f"netns-{netns}")
    t.start()
    t.join(10)
    if "error" in made:
        raise NetworkError(f"listen on 127.0.0.1:{port} in {netns}: {made['error']}")
    sock = made.get("socket")
    assert isinstance(sock, socket.socket)
    return sock


@dataclass
class Shape:
    delay_s: float = 0.0
    jitter_s: float = 0.0
    bytes_per_s: float | None = None


@dataclass
class Proxy:
    """Forwards each listening socket (inside the namespace) to the same port on the host's 127.0.0.1; the
    `shaped` ports (Kafka's) get the current Shape, delivered in order."""

    listeners: dict[int, socket.socket]
    shaped: set[int]
    shape_now: Shape = field(default_factory=Shape)
    bytes_forwarded: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _servers: list[Any] = field(default_factory=list)

    def shape(self, delay_ms: float = 0.0, jitter_ms: float = 0.0, bytes_per_s: float | None = None) -> None:
        """From now on (new and open connections); no argument: unshaped."""
        self.shape_now = Shape(delay_ms / 1000, jitter_ms / 1000, bytes_per_s)

    def start(self) -> None:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)  # this thread's: asyncio.gather below finds it
            self._loop = loop
            for port, sock in self.listeners.items():
                handler = self._handler(port)
                self._servers.append(loop.run_until_complete(asyncio.start_server(handler, sock=sock)))
            ready.set()
            loop.run_forever()
            for server in self._servers:
                server.close()
            # The connections still open end here, each closing its sockets: a pending one would be finalised by
            # the garbage collector, against a closed loop.
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=serve, name="loki-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise NetworkError("the proxy did not start")

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def _handler(self, port: int) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                writer.close()
                return
            shaped = port in self.shaped
            await asyncio.gather(
                self._pump(reader, up_writer, shaped), self._pump(up_reader, writer, shaped), return_exceptions=True
            )

        return handle

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, shaped: bool) -> None:
        """Copy one direction. Shaped: each chunk is delivered `delay + jitter` after it arrived, never before the
        previous one (order kept, throughput not cut by the delay), and no faster than the bandwidth."""
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def deliver() -> None:
            last = 0.0
            while (item := await queue.get()) is not None:
                at, data = item
                shape = self.shape_now
                if shape.bytes_per_s:
                    last = max(last, time.monotonic()) + len(data) / shape.bytes_per_s
                    at = max(at, last)
                wait = at - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
                self.bytes_forwarded += len(data)

        sender = asyncio.create_task(deliver())
        previous = 0.0
        try:
            while data := await reader.read(CHUNK):
                shape = self.shape_now if shaped else Shape()
                at = time.monotonic() + shape.delay_s + random.uniform(0, shape.jitter_s)
                previous = max(previous, at)
                await queue.put((previous, data))
        finally:
            queue.put_nowait(None)
            try:
                with contextlib.suppress(Exception):  # a peer gone is the normal end of a connection
                    await sender
            finally:
                writer.close()


@dataclass
class Link:
    netns: str
    kafka_ports: list[int]
    proxy: Proxy

    @classmethod
    def create(cls, netns: str, kafka_ports: list[int], other_ports: list[int]) -> Link:
        if shutil.which("ip") is None:
            raise NetworkError("`ip` (Debian iproute2) is not installed")
        _run(["ip", "netns", "add", netns])
        try:
            _run(["ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up"])
            ports = sorted(set(kafka_ports) | set(other_ports))
            proxy = Proxy({p: _listen_in(netns, p) for p in ports}, set(kafka_ports))
            proxy.start()
        except BaseException:
            subprocess.run(["ip", "netns", "del", netns], capture_output=True, timeout=30)
            raise
        return cls(netns, kafka_ports, proxy)

    def wrap(self, command: list[str]) -> list[str]:
        """`command` run inside the namespace."""
        return ["ip", "netns", "exec", self.netns, *command]

    def rules(self, probability: float | None = None) -> list[Rule]:
        """The rules that drop the Kafka traffic (every packet, or a random share) in both directions."""
        share = ["-m", "statistic", "--mode", "random", "--probability", f"{probability:.4f}"] if probability else []
        return [
            ["INPUT", "-p", "tcp", direction, str(port), *share, "-j", "DROP"]
            for port in self.kafka_ports
            for direction in ("--dport", "--sport")
        ]

    def add(self, rules: list[Rule]) -> None:
        """Insert `rules` in the namespace: all of them, or none (those added are removed on a failure)."""
        if shutil.which("iptables") is None:
            raise NetworkError("iptables is not installed (Debian package iptables; `make setup` installs it)")
        added: list[Rule] = []
        try:
            for rule in rules:
                _run(["ip", "netns", "exec", self.netns, "iptables", "-I", *rule])
                added.append(rule)
        except NetworkError:
            remove_rules(self.netns, added)
            raise

    def close(self) -> None:
        self.proxy.stop()
        for sock in self.proxy.listeners.values():
            sock.close()
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, timeout=30)


def remove_rules(netns: str, rules: list[Rule]) -> None:
    for rule in rules:
        subprocess.run(["ip", "netns", "exec", netns, "iptables", "-D", *rule], capture_output=True, timeout=30)
