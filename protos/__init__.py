"""The platform's event schemas (`protos/daggers/events/*.proto`) and helpers to load them at run time.

`make setup` (`python -m protos.build`) compiles them into a descriptor set and Python modules under
`.local/gen/`; the modules are importable as `daggers.events.<name>_pb2` through a .pth file in the venv.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import FileDescriptor

PROTO_ROOT = Path(__file__).resolve().parent
GEN_DIR = PROTO_ROOT.parent / ".local" / "gen"
DESCRIPTOR_SET = GEN_DIR / "events.desc"
PY_OUT = GEN_DIR / "py"


def local_file(path: Path) -> Path:
    """`path` if this host has it, else the copy Spark shipped to this executor (`SparkContext.addFile`), else
    `path` (the caller reports it missing)."""
    if path.exists():
        return path
    try:
        from pyspark import SparkFiles

        shipped = Path(SparkFiles.get(path.name))
    except Exception:  # not inside a Spark task: nothing was shipped here
        return path
    return shipped if shipped.exists() else path


def proto_files() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def pool_of(files: Iterable[descriptor_pb2.FileDescriptorProto]) -> descriptor_pool.DescriptorPool:
    """A fresh pool holding `files`, in dependency order (a file already added is skipped)."""
    pool = descriptor_pool.DescriptorPool()
    seen: set[str] = set()
    for f in files:
        if f.name not in seen:
            pool.Add(f)
            seen.add(f.name)
    return pool


def load_pool(descriptor_sets: Iterable[Path] = (DESCRIPTOR_SET,)) -> descriptor_pool.DescriptorPool:
    """A fresh pool holding every file of the given descriptor sets (files already added are skipped)."""
    for path in descriptor_sets:
        if not Path(path).exists():
            raise FileNotFoundError(f"descriptor set {path} not found: run `make setup` to compile the protos")
    return pool_of(
        f for path in descriptor_sets for f in descriptor_pb2.FileDescriptorSet.FromString(Path(path).read_bytes()).file
    )


def file_set(root: FileDescriptor) -> descriptor_pb2.FileDescriptorSet:
    """`root` and every file it imports, in dependency order."""
    ordered: list[FileDescriptor] = []
    seen: set[str] = set()

    def visit(f: FileDescriptor) -> None:
        if f.name in seen:
            return
        seen.add(f.name)
        for dep in f.dependencies:
            visit(dep)
        ordered.append(f)

    visit(root)
    fds = descriptor_pb2.FileDescriptorSet()
    for f in ordered:
        f.CopyToProto(fds.file.add())
    return fds


def message_names(descriptor_sets: Iterable[Path] = (DESCRIPTOR_SET,)) -> list[str]:
    """Full names of the top-level messages in the given descriptor sets (google/* files left out)."""
    names = []
    for path in descriptor_sets:
        for f in descriptor_pb2.FileDescriptorSet.FromString(Path(path).read_bytes()).file:
            if not f.name.startswith("google/"):
                names += [f"{f.package}.{m.name}" if f.package else m.name for m in f.message_type]
    return sorted(set(names))
