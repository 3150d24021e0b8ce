"""The SparkSession every dagger (and every test) runs in: local by default, or a cluster given a master URL."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


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
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
