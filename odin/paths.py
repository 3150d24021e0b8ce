"""Where things live: the repository, its Terraform/Ansible trees and the gitignored state directory."""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TERRAFORM_DIR = REPO / "terraform"
ANSIBLE_DIR = REPO / "ansible"
BIN_DIR = Path(sys.executable).parent  # the venv's bin: ansible-playbook, spark-class, airflow
# Map the archive where it was built to be mapped. This JDK maps it elsewhere by default (ArchiveRelocationMode=1, a
# guard against address-guessing), patching every pointer in it: each JVM dirtied most of its ~170 MB, memory no other
# JVM shares, before its first class (`spark-submit --version` 0.73-0.78 -> 0.63-0.67 s, max RSS 253 -> 223 MB).
# Where the address is taken, the JVM relocates anyway.
MAP_IN_PLACE = "-XX:+UnlockDiagnosticVMOptions -XX:ArchiveRelocationMode=0"
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # no warning when the class-data archive does not fit the JVM


@functools.cache
def spark_class_archive() -> Path:
    """Spark's classes parsed and verified once, at `make setup` (jobs/engine/jvm_archive.py builds it), then mapped
    by every Spark JVM of this host: a dagger's driver and executors, and the standalone masters and workers. Named
    for the PySpark version: an upgrade makes a new one."""
    # imported here, not with the module: every Python process Spark starts imports this one (18 ms more at each)
    from importlib.metadata import version

    return REPO / ".local" / "jvm" / f"spark-{version('pyspark')}.jsa"


def spark_archive_options() -> str:
    """Options for a Spark JVM: map the class-data archive, if this host has one."""
    archive = spark_class_archive()
    return f"-XX:SharedArchiveFile={archive} {MAP_IN_PLACE} {QUIET_CDS}" if archive.exists() else ""


def write_atomic(path: Path, text: str, mode: int = 0o666) -> None:
    """Write a file whole or not at all: a reader (another process: a driver starting, a planner) sees the old file
    or the new one, never half of one. The temporary file beside it is this process's; `mode` as `open` takes it (the
    umask applies)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def default_state_dir() -> Path:
    """`ODIN_HOME` if set (tests point it at a temp dir), else `<repo>/.local`."""
    return Path(os.environ.get("ODIN_HOME", REPO / ".local")).resolve()


@contextmanager
def temporary_state_dir(prefix: str) -> Iterator[Path]:
    """A throwaway state dir (tests, benchmarks) that services' own OS users can enter (PostgreSQL runs as
    `postgres`); removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=f"daggers-{prefix}-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
