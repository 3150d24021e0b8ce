"""The class-data archive of Spark's JVMs (the JDK's AppCDS; its path and options: odin/paths.py): Spark's classes
parsed and verified once, at `make setup`, then mapped by every dagger's JVM, which is ready in about half the time
(bench/RESULTS.md), and by the standalone masters and workers (~40% less CPU to start).

`python -m jobs.engine.jvm_archive` starts Spark's JVM with `-XX:ArchiveClassesAtExit` and runs what a dagger runs (a
streaming query with a watermark, a windowed aggregation, foreachBatch to Arrow, SQL functions); the JVM writes
the classes it loaded as it exits. The JVM ignores an archive made for another JDK or classpath (start-up is then
as without one), and the archive is named for the PySpark version, so an upgrade makes a new one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from odin.paths import QUIET_CDS, spark_class_archive

BATCHES = 6  # micro-batches of the workload's query


def build() -> Path:
    """Run the workload in a process group of its own, and wait for its JVM to exit: it writes the archive then."""
    archive = spark_class_archive()
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(f".{archive.name}.{os.getpid()}")
    child = subprocess.Popen([sys.executable, "-m", "jobs.engine.jvm_archive", str(tmp)], start_new_session=True)
    try:
        child.wait(300)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        raise SystemExit("the JVM archive's workload did not finish in 5 minutes") from None
    for _ in range(1200):  # the JVM outlives its Python process while it writes the archive: at most 2 minutes
        try:
            os.killpg(child.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    if child.returncode != 0 or not tmp.exists():
        raise SystemExit(f"the JVM wrote no class-data archive (workload exit {child.returncode})")
    tmp.replace(archive)
    return archive


def _workload(tmp: Path) -> None:
    import json

    from pyspark.sql import functions as F

    from jobs.engine.session import spark_session

    options = f"-XX:ArchiveClassesAtExit={tmp} {QUIET_CDS}"
    log = tmp.with_suffix(".log")  # Spark's errors, if any; its warnings are of no use here
    spark = spark_session("jvm-archive", conf={"spark.driver.extraJavaOptions": options}, log_file=log, archive=False)
    with tempfile.TemporaryDirectory(prefix="jvm-archive-") as work:
        events = Path(work) / "events"
        events.mkdir()
        for second in range(BATCHES):  # a file per batch, a second of event time each: windows close as it goes
            rows = (json.dumps({"ts": second + i / 1000, "value": i}) for i in range(1000))
            (events / f"{second:02d}.json").write_text("\n".join(rows))
        windows = (
            spark.readStream.schema("ts DOUBLE, value LONG")
            .option("maxFilesPerTrigger", 1)
            .json(str(events))
            .withColumn("timestamp", F.col("ts").cast("timestamp"))
            .withWatermark("timestamp", "1 second")
            .groupBy(F.window("timestamp", "1 second"), (F.col("value") % 7).alias("key"))
            .agg(F.count("*").alias("n"), F.approx_count_distinct("value").alias("d"))
        )
        # availableNow: the query ends by itself once every file is read. A stop() that interrupts a batch inside
        # the foreachBatch callback makes Spark match the long Py4J error against a regex that can overflow the
        # stream thread's stack (a StackOverflowError trace in `make setup`'s output, in some runs).
        query = (
            windows.writeStream.outputMode("append")
            .foreachBatch(lambda df, _batch: df.toArrow())
            .option("checkpointLocation", str(Path(work) / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        if not query.awaitTermination(120):
            query.stop()
    spark.sql("SELECT sha2('x', 256), to_json(map('a', 1)), date_trunc('hour', now())").collect()
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        _workload(Path(sys.argv[1]))
    else:
        path = build()
        print(f"class-data archive for the driver JVM: {path} ({path.stat().st_size / 2**20:.0f} MB)")
