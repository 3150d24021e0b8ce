"""The Spark session a dagger runs in (jobs/engine/session.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from jobs.engine.session import CHECKPOINT_FILES
from odin.paths import REPO

PROBE = """
from pyspark.sql.datasource import DataSource


class DefaultSource(DataSource):
    @classmethod
    def name(cls):
        return "probe"

    def schema(self):
        return "x int"
"""

SCRIPT = """
import os
from pyspark.sql.functions import udf
from jobs.engine.session import spark_session

spark = spark_session("lookup-probe", master="local[1]")
seen = udf(lambda _: __import__("pyspark_probe").DefaultSource.name())
print("workers import:", spark.range(1).select(seen("id")).first()[0])
try:
    spark.read.format("probe").load().schema
    print("found")
except Exception as e:
    print("not found" if "DATA_SOURCE_NOT_FOUND" in str(e) else f"failed: {e}")
print("environment:", os.environ.get("PYSPARK_DRIVER_PYTHON"))  # the process's own, as it was
spark.stop()
"""


def test_sparks_lookup_of_installed_python_data_sources_is_off(tmp_path: Path) -> None:
    """Spark looks up `pyspark_*` packages in Python processes of its own (a daemon and its worker) before a dagger's
    source is registered: a dagger's JVM skips it (session.JVM_ENVIRONMENT). A package Spark would discover, which
    the session's Python workers import, is not found as a data source."""
    (tmp_path / "pyspark_probe").mkdir()
    (tmp_path / "pyspark_probe" / "__init__.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    run = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    expected = ["workers import: probe", "not found", "environment: None"]
    assert run.stdout.splitlines() == expected, run.stdout + run.stderr[-3000:]


def test_checkpoint_files_are_written_by_rename_without_overwriting(spark: SparkSession, tmp_path: Path) -> None:
    """A dagger's checkpoint (offset and commit logs, state deltas) is written through the file system's own rename
    (session.CHECKPOINT_FILES): Hadoop's FileContext asked a shell command for each rename's file status, a process
    forked per file, tens of ms on every batch's path. What exactness relies on holds: a file appears whole, and a
    second writer of the same batch fails instead of replacing it."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    managers = getattr(jvm.org.apache.spark.sql.execution.streaming.checkpointing, "CheckpointFileManager$")
    hadoop = spark._jsparkSession.sessionState().newHadoopConf()  # type: ignore[attr-defined]
    files = managers.__getattr__("MODULE$").create(jvm.org.apache.hadoop.fs.Path(str(tmp_path)), hadoop)
    assert files.getClass().getName() == CHECKPOINT_FILES

    batch = jvm.org.apache.hadoop.fs.Path(str(tmp_path / "0"))
    first = files.createAtomic(batch, False)
    first.write(b"v1\n{}")
    assert not (tmp_path / "0").exists()  # not until it is closed
    first.close()
    second = files.createAtomic(batch, False)
    second.write(b"v1\n{another}")
    with pytest.raises(Py4JJavaError, match=r"FileAlreadyExists|already exists"):
        second.close()
    assert (tmp_path / "0").read_bytes() == b"v1\n{}"
