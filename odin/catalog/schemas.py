"""A stream's schema: its message's descriptors as a FileDescriptorSet, a fingerprint, and `buf breaking`.

The fingerprint covers what decoding depends on: the message and every message and enum it reaches, by field
number, name, type and cardinality. Comments, options and unrelated messages in the same files do not change it.
Compatibility is judged by `buf breaking` (npm `@bufbuild/buf`, installed by `make setup`) with its WIRE rules:
what old and new producers and consumers can still read from each other.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

import protos
from odin.paths import REPO

BUF = REPO / ".local" / "npm" / "node_modules" / ".bin" / "buf"
BUF_CONFIG = json.dumps({"version": "v2", "breaking": {"use": ["WIRE"]}})


class BufError(RuntimeError):
    """buf could not judge (not installed, unreadable input); not a verdict on the schemas."""


def find(name: str, descriptor_sets: Iterable[Path] = (protos.DESCRIPTOR_SET,)) -> Descriptor:
    pool = protos.load_pool(descriptor_sets)
    try:
        return pool.FindMessageTypeByName(name)
    except KeyError:
        known = ", ".join(protos.message_names(descriptor_sets))
        raise KeyError(f"unknown protobuf message {name!r}; known: {known}") from None


@dataclass(frozen=True)
class Schema:
    """One version of a stream's message: what the registry keeps."""

    proto: str
    fingerprint: str  # sha256 hex
    descriptor_set: bytes  # FileDescriptorSet of the message's file and its imports

    @property
    def descriptor_set_b64(self) -> str:
        return base64.b64encode(self.descriptor_set).decode()

    @classmethod
    def of(cls, proto: str, descriptor_sets: Iterable[Path] = (protos.DESCRIPTOR_SET,)) -> Schema:
        desc = find(proto, descriptor_sets)
        return cls(proto, fingerprint(desc), protos.file_set(desc.file).SerializeToString(deterministic=True))

    @classmethod
    def stored(cls, proto: str, fingerprint: str, descriptor_set_b64: str) -> Schema:
        return cls(proto, fingerprint, base64.b64decode(descriptor_set_b64))


def fingerprint(desc: Descriptor) -> str:
    """sha256 of a canonical form of the message and every type it reaches."""
    types: dict[str, Any] = {}
    todo: list[Descriptor | EnumDescriptor] = [desc]
    while todo and len(types) < 10_000:
        d = todo.pop()
        if d.full_name in types:
            continue
        if isinstance(d, EnumDescriptor):
            types[d.full_name] = sorted([v.number, v.name] for v in d.values)
            continue
        fields = []
        for f in sorted(d.fields, key=lambda f: f.number):
            ref = f.message_type or f.enum_type
            if ref is not None:
                todo.append(ref)
            oneof = f.containing_oneof.name if f.containing_oneof and not _synthetic(f) else None
            fields.append([f.number, f.name, f.type, _repeated(f), ref.full_name if ref else None, oneof])
        types[d.full_name] = {"fields": fields, "map_entry": d.GetOptions().map_entry}
    canonical = json.dumps({"root": desc.full_name, "types": types}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _repeated(f: FieldDescriptor) -> bool:
    return f.is_repeated if hasattr(f, "is_repeated") else f.label == FieldDescriptor.LABEL_REPEATED


def _synthetic(f: FieldDescriptor) -> bool:
    """proto3 `optional` puts a field in a oneof of its own: presence, not a choice between fields."""
    return bool(getattr(f.containing_oneof, "is_synthetic", False))


def breaking_changes(old: Schema, new: Schema) -> list[str]:
    """What `buf breaking` finds in `new` against `old` (WIRE rules), one line each; empty: compatible."""
    if not BUF.exists():
        raise BufError(f"buf is not installed at {BUF}: run `make setup`")
    with tempfile.TemporaryDirectory(prefix="odin-buf-") as tmp:
        old_path, new_path = Path(tmp) / "old.binpb", Path(tmp) / "new.binpb"
        old_path.write_bytes(old.descriptor_set)
        new_path.write_bytes(new.descriptor_set)
        run = subprocess.run(
            [str(BUF), "breaking", str(new_path), "--against", str(old_path), "--config", BUF_CONFIG,
             "--error-format", "json"],
            capture_output=True, text=True, timeout=60, cwd=tmp,
        )  # fmt: skip
    if run.returncode == 0:
        return []
    findings = []
    for line in run.stdout.splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        findings.append(f"{item.get('path', '?')}: {item.get('message', line)} [{item.get('type', '?')}]")
    if not findings:  # buf failed without a verdict
        raise BufError(f"buf breaking exited {run.returncode}: {(run.stderr or run.stdout).strip()[:2000]}")
    return findings
