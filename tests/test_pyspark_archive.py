"""Spark's own Python processes import PySpark from its zip: compiled at set-up (jobs/engine/pyspark_archive.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession

from jobs.engine import pyspark_archive

ARCHIVE = pyspark_archive.default_archive()


def _pyspark_file(archive: Path, module: str = "pyspark") -> str:
    """Where a fresh interpreter with `archive` first on its path, as Spark starts one, imports `module` from."""
    code = f"import {module} as m; print(m.__file__)"
    env = {"PYTHONPATH": str(archive), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_sparks_python_workers_import_pyspark_compiled(spark: SparkSession) -> None:
    def where(_: object) -> list[str]:
        import pyspark

        return [pyspark.__file__ or ""]

    (found,) = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert found == f"{ARCHIVE}/pyspark/__init__.pyc", f"Spark's worker imported PySpark from {found}: run `make setup`"


def test_an_archive_is_compiled_once_and_a_changed_source_wins(tmp_path: Path) -> None:
    original = tmp_path / "pyspark.zip"
    with zipfile.ZipFile(ARCHIVE) as src, zipfile.ZipFile(original, "w") as out:  # as the wheel ships it: sources
        for info in src.infolist():
            if not info.filename.endswith(".pyc"):
                out.writestr(info, src.read(info))
    assert _pyspark_file(original).strip().endswith("/pyspark/__init__.py")
    assert not pyspark_archive.compiled(original)

    compiled = tmp_path / "compiled" / "pyspark.zip"
    compiled.parent.mkdir()
    shutil.copy(original, compiled)
    assert pyspark_archive.compile_archive(compiled) > 300
    assert pyspark_archive.compiled(compiled)
    assert _pyspark_file(compiled).strip() == f"{compiled}/pyspark/__init__.pyc"
    assert pyspark_archive.main([str(compiled)]) == 0  # already compiled: left as it is

    # a source edited after the archive was compiled is imported as edited, not from its stale bytecode
    edited = tmp_path / "edited.zip"
    with zipfile.ZipFile(compiled) as src, zipfile.ZipFile(edited, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            out.writestr(info, data + b"\n__file__ = 'edited'\n" if info.filename == "pyspark/version.py" else data)
    assert _pyspark_file(edited, "pyspark.version").strip() == "edited"
