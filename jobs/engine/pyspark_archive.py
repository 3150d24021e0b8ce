"""Spark's own Python processes import the venv's compiled PySpark and Py4J, not the zips Spark ships them in.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` and `py4j-<version>-src.zip` first on the path of every Python
process it starts (the data source's planners, the streaming source runner, each daemon and its workers). Importing
from a zip costs each of them twice: Python caches no bytecode for a zip (the wheel ships sources only, so each
process compiled what it imported), and once a process has set up Spark's files it calls
`importlib.invalidate_caches()`, which in Python 3.11 re-reads a zip's whole directory once per package imported
from it: 0.2-0.3 s of CPU and ~14 MB that stay, in each process, for PySpark's zip (docs/decisions.md). Those
processes run the venv's interpreter, which has both packages installed and compiled (`make setup`'s
`--compile-bytecode`): an archive emptied here leaves them to it. An archive is emptied only when the interpreter
has the same version of its package installed; otherwise it is left as it is, and used.

`python jobs/engine/pyspark_archive.py [LIB_DIR]` (default: the running interpreter's PySpark's `python/lib`). It
needs only the standard library, so Ansible runs it on hosts that have the platform's venv but not its code. Run
after every install of PySpark: the install writes the archives anew. Idempotent.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import sys
import zipfile
from pathlib import Path

VERSION = re.compile(rb"""^__version__(?:: *str)? *= *['"]([^'"]+)['"]""", re.MULTILINE)


def default_lib() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SystemExit("pyspark is not installed in this interpreter")
    return Path(spec.origin).parent / "python" / "lib"


def archived_package(archive: Path) -> tuple[str, str] | None:
    """The package an archive holds and its version (`<package>/version.py`); None for an emptied archive."""
    with zipfile.ZipFile(archive) as z:
        names = z.namelist()
        if not names:
            return None
        package = names[0].split("/", 1)[0]
        found = VERSION.search(z.read(f"{package}/version.py"))
    if found is None:
        raise SystemExit(f"{archive}: no __version__ in {package}/version.py")
    return package, found.group(1).decode()


def installed_version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def empty(archive: Path) -> None:
    """Replace `archive` with an empty one in one rename: a Python process starting meanwhile reads one or the other."""
    tmp = archive.with_name(f".{archive.name}.{os.getpid()}")
    try:
        zipfile.ZipFile(tmp, "w").close()
        os.replace(tmp, archive)
    finally:
        tmp.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    lib = Path(argv[0]) if argv else default_lib()
    for archive in sorted(lib.glob("*.zip")):
        held = archived_package(archive)
        if held is None:
            print(f"{archive}: already empty")
            continue
        package, version = held
        installed = installed_version(package)
        if installed != version:
            print(f"{archive}: kept ({package} {version}; this interpreter has {installed or 'none'})")
            continue
        empty(archive)
        print(f"{archive}: emptied ({package} {version} is imported from this interpreter's)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
