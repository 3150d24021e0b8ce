"""`dagger run` with a timestamp at each start-up phase (bench/dagger_throughput.py measures start-up with it).

`python -m bench.startup_probe TIMELINE run SPEC [options]` runs the `dagger` CLI (jobs.cli:app, what bin/dagger
runs) unchanged, after wrapping the engine's start-up steps so that each appends a JSON line
`{"event": ..., "t": <time.time()>, ...}` to TIMELINE as it starts and ends:

- `imported`: PySpark and the engine imported (the CLI imports the engine later; here it is imported first, to be
  wrapped, which moves that cost before `session_start` and changes nothing else);
- `session_*`: jobs.engine.runner.session_for (JVM start and SparkSession);
- `prepare_*`: jobs.engine.runner._prepare, inside it `datasource_*` (spark.dataSource.register) and `udfs_*`;
- `frame_*`: jobs.engine.runner.streaming_frame, inside it `load_*` (readStream...load(), once per stream);
- `start_*`: DataStreamWriter.start (the query starts);
- `progress`: each batch's progress as the engine hands it to its telemetry (batch id, Spark's trigger `timestamp`,
  `durationMs`, input rows);
- `sink_write`: each write of the sink (rows), the moment it returns.

A function the engine no longer has is left alone: its phase is then missing from the timeline.
"""

from __future__ import annotations

import time

STARTED = time.time()  # before the heavy imports

import functools  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, TextIO  # noqa: E402


class Timeline:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def mark(self, event: str, t: float | None = None, **extra: Any) -> None:
        self.out.write(json.dumps({"event": event, "t": time.time() if t is None else t, **extra}) + "\n")
        self.out.flush()

    def around(self, owner: Any, name: str, label: str) -> None:
        """Mark `<label>_start` and `<label>_end` around every call of `owner.name`."""
        fn = getattr(owner, name, None)
        if fn is None:
            return

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.mark(f"{label}_start")
            try:
                return fn(*args, **kwargs)
            finally:
                self.mark(f"{label}_end")

        setattr(owner, name, timed)


def instrument(timeline: Timeline) -> None:
    from jobs.engine.session import use_system_allocator

    use_system_allocator()  # as `dagger run` does before it imports pyarrow, which the engine's import below does
    from pyspark.sql.datasource import DataSourceRegistration
    from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

    import jobs.cli  # noqa: F401  (imported here so that `imported` covers what `dagger run` imports)
    import jobs.engine.runner as engine
    import jobs.engine.telemetry as telemetry

    timeline.mark("imported")
    timeline.around(engine, "session_for", "session")
    timeline.around(engine, "_prepare", "prepare")
    timeline.around(DataSourceRegistration, "register", "datasource")
    timeline.around(engine, "register_udfs", "udfs")
    timeline.around(engine, "streaming_frame", "frame")
    timeline.around(DataStreamReader, "load", "load")
    timeline.around(DataStreamWriter, "start", "start")

    record = getattr(telemetry.Telemetry, "record", None)
    if record is not None:

        def recorded(self: Any, progress: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            timeline.mark(
                "progress",
                batch=progress.get("batchId"),
                timestamp=progress.get("timestamp"),
                duration_ms=progress.get("durationMs") or {},
                input_rows=progress.get("numInputRows"),
            )
            return record(self, progress, *args, **kwargs)

        telemetry.Telemetry.record = recorded  # type: ignore[method-assign]

    open_sink = getattr(engine, "open_sink", None)
    if open_sink is not None:

        def opened(*args: Any, **kwargs: Any) -> Any:
            sink = open_sink(*args, **kwargs)
            write = sink.write

            def written(table: Any, *a: Any, **kw: Any) -> Any:
                n = write(table, *a, **kw)
                timeline.mark("sink_write", rows=getattr(table, "num_rows", None))
                return n

            sink.write = written
            return sink

        engine.open_sink = opened


def main(path: Path, argv: list[str]) -> None:
    with path.open("a") as out:
        timeline = Timeline(out)
        timeline.mark("probe_start", t=STARTED)
        instrument(timeline)
        from jobs.cli import app

        sys.argv = ["dagger", *argv]
        try:
            app()
        finally:
            timeline.mark("exit")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit("usage: python -m bench.startup_probe TIMELINE run SPEC [dagger run options]")
    main(Path(sys.argv[1]), sys.argv[2:])
