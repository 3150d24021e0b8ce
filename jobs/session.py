"""The SparkSession every dagger (and every test) runs in: local by default, or a cluster given a master URL."""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from pyspark.sql import SparkSession

from odin.paths import REPO

SHIPPED_PACKAGES = ("jobs", "protos")  # what executors import: the Kafka reader, decoder, UDFs and schema loader


def spark_session(
    app_name: str = "dagger", master: str = "local[2]", shuffle_partitions: int = 2, conf: dict[str, str] | None = None
) -> SparkSession:
    # Bind Spark's driver and block manager to loopback, and run Python workers with this interpreter (the venv).
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


@cache
def engine_zip() -> Path:
    """The engine's packages as one zip (built once per driver process), for executors' Python path."""
    path = Path(tempfile.mkdtemp(prefix="dagger-engine-")) / "dagger_engine.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for package in SHIPPED_PACKAGES:
            for f in sorted((REPO / package).rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".tsv"):
                    z.write(f, f.relative_to(REPO))
    return path


def ship_engine(spark: SparkSession, files: Iterable[Path]) -> None:
    """Executors of a cluster run the driver's engine, whatever their hosts have installed: the packages go on
    their Python path and the compiled schemas (`files`) into their SparkFiles directory (see protos.local_file)."""
    sc = spark.sparkContext
    sc.addPyFile(str(engine_zip()))
    for f in files:
        sc.addFile(str(f))
