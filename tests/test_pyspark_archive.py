"""Spark's own Python processes import the venv's compiled PySpark and Py4J (jobs/engine/pyspark_archive.py)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import py4j
import pyspark
from pyspark.sql import SparkSession

from jobs.engine import pyspark_archive


def _imported_from(path: Path, module: str) -> str:
    """Where a fresh interpreter with `path` first on its path, as Spark starts one, imports `module` from."""
    code = f"import {module} as m; print(m.__file__)"
    env = {"PYTHONPATH": str(path), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return run.stdout.strip()


def _archive(path: Path, package: str, version: str) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{package}/__init__.py", "")
        z.writestr(f"{package}/version.py", f"__version__: str = '{version}'\n")
    return path


def test_sparks_python_workers_import_the_venvs_compiled_pyspark_and_py4j(spark: SparkSession) -> None:
    def where(_: object) -> list[tuple[str, bool]]:
        import py4j
        import pyspark

        return [(m.__file__ or "", Path(m.__cached__ or "").is_file()) for m in (pyspark, py4j)]

    found = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert found == [(pyspark.__file__, True), (py4j.__file__, True)], f"Spark's worker imported {found}: `make setup`"


def test_an_archive_is_emptied_only_for_the_version_this_interpreter_has(tmp_path: Path) -> None:
    same = _archive(tmp_path / "pyspark.zip", "pyspark", pyspark.__version__)
    other = _archive(tmp_path / "py4j-0.0.1-src.zip", "py4j", "0.0.1")
    absent = _archive(tmp_path / "nosuch.zip", "nosuchpackage", "1.0")
    kept = {path: path.read_bytes() for path in (other, absent)}
    assert _imported_from(same, "pyspark") == f"{same}/pyspark/__init__.py"  # as Spark's processes did

    assert pyspark_archive.main([str(tmp_path)]) == 0
    assert pyspark_archive.archived_package(same) is None
    assert _imported_from(same, "pyspark") == pyspark.__file__
    assert {path: path.read_bytes() for path in kept} == kept  # another version is imported from its archive still
    assert _imported_from(other, "py4j") == f"{other}/py4j/__init__.py"

    assert pyspark_archive.main([str(tmp_path)]) == 0  # already empty: left as it is
    assert pyspark_archive.archived_package(same) is None
