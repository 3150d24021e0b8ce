"""Compile protos/ into a descriptor set and Python modules (`python -m protos.build`)."""

from __future__ import annotations

import site
import sys
from pathlib import Path

from grpc_tools import protoc

from protos import DESCRIPTOR_SET, PROTO_ROOT, PY_OUT, proto_files


def build() -> None:
    PY_OUT.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto shipped with grpcio-tools
    files = [str(p.relative_to(PROTO_ROOT)) for p in proto_files()]
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={PY_OUT}",
        f"--pyi_out={PY_OUT}",
        f"--descriptor_set_out={DESCRIPTOR_SET}",
        "--include_imports",
        "--include_source_info",
        *files,
    ]
    if protoc.main(args) != 0:
        sys.exit(f"protoc failed on {', '.join(files)}")
    # Make `import daggers.events.booking_log_pb2` work everywhere the venv's Python runs.
    pth = Path(site.getsitepackages()[0]) / "daggers_protos.pth"
    pth.write_text(f"{PY_OUT}\n")
    print(f"compiled {len(files)} proto files -> {DESCRIPTOR_SET}, {PY_OUT}")


if __name__ == "__main__":
    build()
