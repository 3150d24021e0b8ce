"""What a converge depends on, as one digest, and the digest of an environment's last successful converge.

A converge (`site.yml`) is a function of the playbooks and roles, the inventory, the extra variables, the `--only`
limit, and the files the roles read from outside `ansible/`. When all of them equal the last successful converge's
and every node it manages is healthy, running it again would change nothing: `odin up` skips it (17 s of CPU on
two cores), and `odin up --converge` runs it anyway.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from odin.paths import ANSIBLE_DIR, REPO

# Files the roles read through `odin_repo` (a role's config file or a copied lock). Kept beside the roles' own tree
# by tests/test_converged.py, which fails when a role reads a file of the repository that is not here.
OUTSIDE_INPUTS = (
    ".ci/requirements.lock",
    "odin/catalog/streams.yaml",
    "odin/alerting/rules",
    "jobs/engine/pyspark_archive.py",
)


def _files(roots: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for root in roots:
        if root.is_file():
            files.append(root)
        elif root.is_dir():
            files += (p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return sorted(files)


def inputs(repo: Path = REPO, ansible_dir: Path = ANSIBLE_DIR) -> list[Path]:
    """Every file a converge reads from the repository."""
    return _files([ansible_dir, *(repo / p for p in OUTSIDE_INPUTS)])


def digest(
    playbook: str, inventory: dict[str, Any], extravars: dict[str, Any], limit: str | None, files: list[Path]
) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([playbook, inventory, extravars, limit], sort_keys=True, default=str).encode())
    for f in files:
        h.update(f"\0{f}\0".encode())
        h.update(f.read_bytes())
    return h.hexdigest()


class LastConverge:
    """The digest of an environment's last successful converge, in its state directory. Any `odin down` forgets it."""

    def __init__(self, state_dir: Path, environment: str) -> None:
        self.path = state_dir / "odin" / f"{environment}.converged"

    def matches(self, value: str) -> bool:
        return self.path.is_file() and self.path.read_text().strip() == value

    def record(self, value: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(value + "\n")  # a torn write matches nothing: the next `up` converges

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)
