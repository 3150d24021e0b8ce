"""JSON-lines sink: to a file (appended) or stdout, and `read_log` to get the current view back.

File format, one JSON object a line:

    {"_begin": 7}                                              a batch starts
    {"_batch": 7, "window_end": "2026-03-01T08:01:00Z", ...}   one line per row (column -> value)
    {"_commit": 7, "_rows": 2, "_key": ["window_end", ...]}    the batch is complete

A batch counts only once its `_commit` line is there (fsync'ed with the rows), so a crash mid-batch leaves rows that
`read_log` ignores and the replay writes again; the writer reads the last `_commit` back on open and skips a replay
of that batch. Within the committed batches, a later row for the same key supersedes an earlier one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa

from jobs.sinks.base import BaseSink, OutputShape, RetryPolicy, SinkError, check_columns, json_value, rows
from jobs.spec import DaggerSpec, LogSink

RESERVED = ("_begin", "_batch", "_commit")
_COMMIT_PREFIX = b'{"_commit":'
_BLOCK = 1 << 16


def _last_commit(path: Path) -> int | None:
    """The batch id of the last `_commit` line, reading the file backwards a block at a time (logs grow large)."""
    if not path.exists():
        return None
    with path.open("rb") as f:
        end = f.seek(0, os.SEEK_END)
        tail = b""
        while end > 0:
            start = max(0, end - _BLOCK)
            f.seek(start)
            chunk = f.read(end - start) + tail
            lines = chunk.split(b"\n")
            # The first piece may be a partial line unless we are at the file's start: keep it for the next block.
            tail = lines[0] if start > 0 else b""
            for line in reversed(lines if start == 0 else lines[1:]):
                if line.startswith(_COMMIT_PREFIX):
                    try:
                        return int(json.loads(line)["_commit"])
                    except (ValueError, KeyError):
                        continue  # torn line
            end = start
    return None


def read_log(path: str | Path) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The current view of a log sink's file: key (values of the key columns, as JSON values: timestamps are ISO
    strings) -> the latest committed row. Rows of batches never committed (a crash mid-batch) are left out."""
    view: dict[tuple[Any, ...], dict[str, Any]] = {}
    pending: dict[int, list[dict[str, Any]]] = {}
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            try:
                obj = json.loads(line)
            except ValueError:
                continue  # a line torn by a crash
            if not isinstance(obj, dict):
                continue
            if "_begin" in obj:
                pending[obj["_begin"]] = []  # an earlier, interrupted attempt of the same batch is discarded
            elif "_commit" in obj:
                keys = obj.get("_key") or []
                for row in pending.pop(obj["_commit"], []):
                    view[tuple(row.get(k) for k in keys) if keys else (len(view),)] = row
            elif "_batch" in obj:
                batch_id = obj.pop("_batch")
                pending.setdefault(batch_id, []).append(obj)
    return view


class LogWriter(BaseSink[LogSink]):
    kind = "log"
    spec_type = LogSink

    def __init__(
        self, dagger: DaggerSpec, shape: OutputShape, retry: RetryPolicy | None = None, stream: TextIO | None = None
    ) -> None:
        super().__init__(dagger, shape, retry)
        sink = self.sink
        self.path = sink.path
        self._stream = stream or sys.stdout
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.last_batch_id = _last_commit(self.path)
            self._terminate_torn_line()

    def _terminate_torn_line(self) -> None:
        """A crash mid-line leaves a fragment: end it, so the next line is whole (read_log skips the fragment)."""
        assert self.path is not None
        if self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open("rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")

    def _write_batch(self, batch: pa.Table, batch_id: int) -> tuple[int, int]:
        check_columns(self.kind, batch, self.shape.key_columns, "key columns")
        clash = [c for c in batch.column_names if c in RESERVED]
        if clash:
            raise SinkError(f"log sink: columns {clash} clash with the log's own fields {list(RESERVED)}")
        lines = [json.dumps({"_begin": batch_id})]
        for row in rows(batch):
            lines.append(json.dumps({"_batch": batch_id, **{k: json_value(v) for k, v in row.items()}}))
        commit = {"_commit": batch_id, "_rows": batch.num_rows, "_key": list(self.shape.key_columns)}
        lines.append(json.dumps(commit, separators=(",", ":")))
        text = "\n".join(lines) + "\n"
        if self.path is None:
            self._stream.write(text)
            self._stream.flush()
        else:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())  # the commit line is durable before Spark records the batch as done
        return batch.num_rows, 0
