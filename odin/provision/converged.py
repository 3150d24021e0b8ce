"""What a node's converge depends on, as one digest per node, and the digests of its last successful converge.

A node's converge (`site.yml` limited to it) is a function of the playbooks and roles, its inventory entry, the
entries of the nodes its role reads (READS_OF_OTHER_NODES), the extra variables, and the files the roles read from
outside `ansible/`. A node whose inputs equal those of its last successful converge and that is healthy would not
change: `odin up` converges only the other ones (a worker added: that worker, not the stack), skips Ansible when
there are none (17 s of CPU on two cores), and `odin up --converge` converges every node anyway.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from odin.paths import ANSIBLE_DIR, REPO
from odin.provision.ansible import PlaybookResult

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


# What a role's tasks and templates read of other nodes (`hostvars[groups[...]]`): those nodes' entries are inputs of
# its converge. tests/test_converged.py fails when a role reads another group that is not here.
READS_OF_OTHER_NODES: dict[str, tuple[str, ...]] = {"spark_worker": ("spark_master",)}


def _hosts(inventory: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each host of an inventory (odin/provision/inventory.py), with its group (a node's role) and its entry."""
    return {
        name: (role, host)
        for role, group in inventory["all"]["children"].items()
        for name, host in group.get("hosts", {}).items()
    }


def node_digests(
    playbook: str, inventory: dict[str, Any], extravars: dict[str, Any], files: list[Path]
) -> dict[str, str]:
    """Each host's digest: what every node shares (the playbook, the extra variables, the files), its own entry, and
    the entries of the nodes its role reads."""
    shared = hashlib.sha256(json.dumps([playbook, extravars], sort_keys=True, default=str).encode())
    for f in files:
        shared.update(f"\0{f}\0".encode())
        shared.update(f.read_bytes())
    hosts = _hosts(inventory)
    digests: dict[str, str] = {}
    for name, (role, entry) in hosts.items():
        read = {n: e for n, (r, e) in hosts.items() if r in READS_OF_OTHER_NODES.get(role, ())}
        h = shared.copy()
        h.update(json.dumps([name, role, entry, read], sort_keys=True, default=str).encode())
        digests[name] = h.hexdigest()
    return digests


class LastConverge:
    """Each node's digest at its last successful converge, in the environment's state directory. `odin down` forgets
    the nodes it stops."""

    def __init__(self, state_dir: Path, environment: str) -> None:
        self.path = state_dir / "odin" / f"{environment}.converged"

    def _load(self) -> dict[str, str]:
        try:
            loaded = json.loads(self.path.read_text())
        except (OSError, ValueError):  # none yet, torn, or an older format: nothing matches, so all converge
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def stale(self, digests: dict[str, str]) -> set[str]:
        """The nodes whose inputs differ from their last successful converge's (or that never converged)."""
        last = self._load()
        return {name for name, value in digests.items() if last.get(name) != value}

    def record(self, digests: dict[str, str]) -> None:
        self._save(self._load() | digests)

    def converge(self, todo: set[str], digests: dict[str, str], run: Callable[[str], PlaybookResult]) -> PlaybookResult:
        """`run` the playbook limited to `todo` (an Ansible `--limit`); those nodes match nothing until it succeeds,
        so a failed or partial run never lets the next one skip them."""
        self.forget(todo)
        result = run(",".join(sorted(todo)))
        if result.ok:
            self.record({name: digests[name] for name in todo})
        return result

    def forget(self, names: set[str] | None = None) -> None:
        """These nodes (all when None) converge at the next `up`."""
        if names is None:
            self.path.unlink(missing_ok=True)
        else:
            self._save({n: d for n, d in self._load().items() if n not in names})

    def _save(self, digests: dict[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(digests, sort_keys=True, indent=1) + "\n")
        tmp.replace(self.path)
