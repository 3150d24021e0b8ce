"""Where Spark shows a deployed dagger's driver, and its log: for `dagger logs`, `dagger list` and `dagger status`.

A standalone worker runs a driver in `<work dir>/<driver id>/`: its `stdout` has the dagger's own lines (Spark's
PythonRunner sends the Python process's stdout and stderr there: its logging, its tracebacks), its `stderr` the
driver JVM's log. The worker's UI serves both (`/log/?driverId=&logType=&offset=&byteLength=`: a line
`==== Bytes a-b of n of <path> ====`, then those bytes), and the active master's JSON says which worker runs a
driver (driver -> worker id -> the worker's UI address). When no UI answers, the files the worker wrote are read
where this host has them (a local cluster: its worker nodes' data directories, from the cluster's Terraform outputs).
Who may read a log is the lifecycle's business (jobs/lifecycle/daggers.py `driver_log`); here is only how.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import httpx

from jobs.engine.status import DRIVER_ID
from odin.apis import http_client

UI_TIMEOUT_S = 3.0  # per master or worker UI: `dagger list` asks each cluster's masters once, and must not hang
CHUNK = 256 * 1024  # bytes per read while following
TAIL_START = 64 * 1024  # the first look back for --lines; doubled until it holds enough lines
TAIL_MAX = 8 * 1024 * 1024  # --lines never reads back further than this
MIN_POLL_S, MAX_POLL_S = 0.2, 30.0
HEADER = re.compile(rb"==== Bytes (\d+)-(\d+) of (\d+) of .*====")


class LogType(StrEnum):
    stdout = "stdout"  # the dagger's own lines: Python's logging and tracebacks
    stderr = "stderr"  # the driver JVM's (Spark's) log


class LogUnavailable(RuntimeError):
    """The driver's log cannot be read from here; the message says why and what to look at."""


# -- where Spark shows it -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MasterView:
    """The active master of a cluster: its UI's address and its JSON (workers, drivers, applications)."""

    ui: str
    state: dict[str, Any]


def active_master(ui_urls: Iterable[str], timeout_s: float = UI_TIMEOUT_S) -> MasterView | None:
    """The master that is ALIVE (a standby answers STANDBY); None when none answers."""
    for url in ui_urls:
        try:
            doc = http_client.get(f"{url.rstrip('/')}/json/", timeout=timeout_s).json()
        except (httpx.HTTPError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("status") == "ALIVE":
            return MasterView(url.rstrip("/"), doc)
    return None


@dataclass(frozen=True)
class SparkLinks:
    """A dagger's driver and where Spark shows it; None where not known (no master answers, no driver)."""

    driver_id: str | None
    master_ui: str | None  # the active master's UI (the first recorded one when none answers)
    app_ui: str | None  # the dagger's application page on that master: its executors and their logs
    worker_ui: str | None  # the UI of the worker that runs the driver, which serves its log

    def log_page(self, log_type: LogType = LogType.stdout) -> str | None:
        if self.worker_ui is None or self.driver_id is None:
            return None
        return f"{self.worker_ui}/logPage/?driverId={self.driver_id}&logType={log_type}"

    def to_dict(self) -> dict[str, str | None]:
        return {**asdict(self), "driver_log_ui": self.log_page()}


def app_name(team: str, name: str) -> str:
    """The Spark application name a dagger's driver runs as (jobs/lifecycle/daggers.py submit)."""
    return f"dagger-{team}-{name}"


def spark_links(view: MasterView | None, ui_urls: list[str], driver_id: str | None, team: str, name: str) -> SparkLinks:
    """From the active master's JSON: the worker running `driver_id`, and the dagger's running application."""
    if view is None:
        return SparkLinks(driver_id, ui_urls[0].rstrip("/") if ui_urls else None, None, None)
    drivers = [*view.state.get("activedrivers", []), *view.state.get("completeddrivers", [])]
    worker_id = next((d.get("worker") for d in drivers if driver_id and d.get("id") == driver_id), None)
    worker_ui = next((w.get("webuiaddress") for w in view.state.get("workers", []) if w.get("id") == worker_id), None)
    # a relaunched driver may leave an older application of the same name behind: the latest one is the dagger's
    apps = [a for a in view.state.get("activeapps", []) if a.get("name") == app_name(team, name)]
    app = max(apps, key=lambda a: a.get("starttime", 0), default=None)
    app_ui = f"{view.ui}/app/?appId={app['id']}" if app and app.get("id") else None
    return SparkLinks(driver_id, view.ui, app_ui, worker_ui.rstrip("/") if worker_ui else None)


# -- reading it ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    start: int
    end: int
    total: int  # the log's size now
    data: bytes


class LogSource(Protocol):
    where: str  # for messages: the worker's UI or the file

    def read(self, offset: int, length: int) -> Chunk: ...


def valid_driver_id(driver_id: str) -> str:
    """A driver id from the registry goes into a URL and a path: only Spark's own shape passes."""
    if not DRIVER_ID.fullmatch(driver_id):
        raise LogUnavailable(f"{driver_id!r} is not a Spark driver id")
    return driver_id


class WorkerLog:
    """The log as the worker's UI serves it."""

    def __init__(self, worker_ui: str, driver_id: str, log_type: LogType, timeout_s: float = UI_TIMEOUT_S) -> None:
        self.url = f"{worker_ui.rstrip('/')}/log/"
        self.driver_id, self.log_type, self.timeout_s = valid_driver_id(driver_id), log_type, timeout_s
        self.where = worker_ui.rstrip("/")

    def read(self, offset: int, length: int) -> Chunk:
        params = {"driverId": self.driver_id, "logType": str(self.log_type), "offset": offset, "byteLength": length}
        try:
            r = http_client.get(self.url, params=params, timeout=self.timeout_s)
        except httpx.HTTPError as e:
            raise LogUnavailable(f"worker UI {self.where}: {type(e).__name__}: {e}") from None
        if r.status_code != 200:
            raise LogUnavailable(f"worker UI {self.where}: HTTP {r.status_code} for the driver's {self.log_type}")
        header, _, data = r.content.partition(b"\n")
        m = HEADER.fullmatch(header.strip())
        if m is None:
            raise LogUnavailable(f"worker UI {self.where}: unexpected answer {header[:200]!r}")
        start, end, total = (int(g) for g in m.groups())
        if total == 0 and data.startswith(b"Error: "):  # e.g. "invalid log directory": not on this worker
            raise LogUnavailable(f"worker UI {self.where}: {data.decode(errors='replace').strip()[:300]}")
        return Chunk(start, end, total, data[: end - start])


class FileLog:
    """The file the worker wrote, on this host."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    def read(self, offset: int, length: int) -> Chunk:
        try:
            with self.path.open("rb") as f:
                total = f.seek(0, 2)
                start = min(max(offset, 0), total)
                f.seek(start)
                data = f.read(max(0, min(length, total - start)))
        except OSError as e:
            raise LogUnavailable(f"{self.path}: {e.strerror or e}") from None
        return Chunk(start, start + len(data), total, data)


def local_files(nodes: dict[str, dict[str, Any]], driver_id: str, log_type: LogType) -> list[Path]:
    """The driver's log in the work directory of any worker node whose files are on this host."""
    valid_driver_id(driver_id)
    found = []
    for node in nodes.values():
        if node.get("role") != "spark_worker":
            continue
        path = Path(node["dirs"]["data"]) / "work" / driver_id / str(log_type)
        if path.is_file():
            found.append(path)
    return found


def _lines(data: bytes) -> list[str]:
    return [line.decode(errors="replace") for line in data.split(b"\n")]


def tail(source: LogSource, lines: int, *, partial: bool = True) -> tuple[list[str], int]:
    """The last `lines` lines, with a last one still being written if `partial`, and the offset after the last
    complete line, where following goes on. Reads back at most TAIL_MAX bytes."""
    total = source.read(0, 0).total
    window = TAIL_START
    while True:  # bounded: the window doubles up to TAIL_MAX
        start = max(0, total - window)
        chunk = source.read(start, total - start)
        data = chunk.data
        if start == 0 or data.count(b"\n") > lines or window >= TAIL_MAX:
            break
        window *= 2
    complete = data.rfind(b"\n") + 1  # 0: no complete line
    pos = chunk.start + complete
    body = _lines(data[:complete])[:-1] if complete else []  # the split leaves "" after the last \n
    if start > 0 and body:
        body = body[1:]  # the window's first line is cut at its start
    if partial and data[complete:]:
        body.append(data[complete:].decode(errors="replace"))
    return (body[-lines:] if lines > 0 else []), pos


def follow(
    source: LogSource,
    pos: int,
    emit: Callable[[str], None],
    *,
    poll_s: float = 1.0,
    alive: Callable[[], bool] = lambda: True,
    recheck_s: float = 5.0,
    give_up_s: float = 120.0,
    deadline: float | None = None,
) -> str:
    """Emit each complete line written from `pos` on, until Ctrl-C (KeyboardInterrupt, which goes on), `deadline`
    (time.monotonic()), or `alive()` says false (asked every `recheck_s`: the driver ended, or another replaced it)
    and the log is read to its end. Why it ended. A source that stays unreadable for `give_up_s` raises
    LogUnavailable; a log that shrinks (replaced) is read again from its start."""
    poll_s = min(max(poll_s, MIN_POLL_S), MAX_POLL_S)
    pending = b""
    failing_since: float | None = None
    next_check = time.monotonic() + recheck_s
    ended = False
    while deadline is None or time.monotonic() < deadline:
        try:
            chunk = source.read(pos, CHUNK)
            failing_since = None
        except LogUnavailable:
            now = time.monotonic()
            failing_since = failing_since or now
            if now - failing_since > give_up_s:
                raise
            time.sleep(poll_s)
            continue
        if chunk.total < pos:  # the file was replaced or truncated: start over
            pos, pending = 0, b""
            continue
        if chunk.data:
            pos = chunk.end
            pending += chunk.data
            *complete, pending = pending.split(b"\n")
            for line in complete:
                emit(line.decode(errors="replace"))
        if chunk.end < chunk.total:
            continue  # more to read now
        if ended:
            if pending:
                emit(pending.decode(errors="replace"))
            return "the driver ended"
        if time.monotonic() >= next_check:
            next_check = time.monotonic() + recheck_s
            ended = not alive()  # read once more to the end, then stop
            if ended:
                continue
        time.sleep(poll_s)
    return "time is up"
