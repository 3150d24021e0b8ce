"""Compile the PySpark that Spark's own Python processes import.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` first on the path of every Python process it starts (the data
source's planners, the streaming source runner, each daemon and its workers), so they import PySpark from that
archive, not from the venv's compiled copy. The wheel ships it with sources only, and Python caches no bytecode for
a zip: each of those processes compiled PySpark again, ~1 s of CPU each, about ten of them in a dagger's start
(bench/RESULTS.md). This adds to the archive a hash-checked `.pyc` beside each module, which zipimport uses while
it matches the source it was compiled from.

`python jobs/engine/pyspark_archive.py [ZIP]` (default: the running interpreter's PySpark). It needs only the
standard library, so Ansible runs it on hosts that have the platform's venv but not its code. Run after every
install of PySpark: the install writes the archive anew. Idempotent.
"""

from __future__ import annotations

import importlib.util
import os
import py_compile
import sys
import tempfile
import zipfile
from pathlib import Path

CHECKED = py_compile.PycInvalidationMode.CHECKED_HASH  # zipimport checks the source's hash: an edit is never missed
SKIPPED = "/tests/"  # PySpark's own test suites: never imported by a worker, and a third of the archive


def default_archive() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SystemExit("pyspark is not installed in this interpreter")
    return Path(spec.origin).parent / "python" / "lib" / "pyspark.zip"


def compiled(archive: Path) -> bool:
    """Whether every module of the archive (its tests aside) has its bytecode beside it."""
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
    return all(f"{n}c" in names for n in names if n.endswith(".py") and SKIPPED not in n)


def compile_archive(archive: Path) -> int:
    """Rewrite `archive` with bytecode beside its modules; returns how many were compiled. The new archive replaces
    the old in one rename: a Python process starting meanwhile reads one or the other, whole."""
    tmp = archive.with_name(f".{archive.name}.{os.getpid()}")
    count = 0
    try:
        with (
            zipfile.ZipFile(archive) as src,
            zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out,
            tempfile.TemporaryDirectory() as work,
        ):
            source, pyc = Path(work, "m.py"), Path(work, "m.pyc")
            for info in src.infolist():
                if info.filename.endswith(".pyc"):
                    continue  # compiled again from the source beside it
                data = src.read(info)
                out.writestr(info, data)
                if not info.filename.endswith(".py") or SKIPPED in info.filename:
                    continue
                source.write_bytes(data)
                shown = f"{archive}/{info.filename}"  # in tracebacks, as zipimport names it
                py_compile.compile(str(source), str(pyc), shown, doraise=True, invalidation_mode=CHECKED)
                out.writestr(zipfile.ZipInfo(f"{info.filename}c", info.date_time), pyc.read_bytes())  # stored: fast
                count += 1
        os.replace(tmp, archive)
    finally:
        tmp.unlink(missing_ok=True)
    return count


def main(argv: list[str]) -> int:
    archive = Path(argv[0]) if argv else default_archive()
    if compiled(archive):
        print(f"{archive}: already compiled")
        return 0
    print(f"{archive}: {compile_archive(archive)} modules compiled")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
