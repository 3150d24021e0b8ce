"""A Terraform root's outputs as its many readers see them (every Airflow task, health check and CLI reads an
environment's nodes): read from the local backend's state file under a shared lock, without loading Terraform,
whose library (a Go runtime) only its commands need (odin/provision/terraform.py)."""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from odin.paths import TERRAFORM_DIR

STATE_FILE = "terraform.tfstate"


class TerraformError(RuntimeError):
    """A Terraform command failed; the message carries Terraform's own diagnostics."""


def config_dir(environment: str) -> Path:
    """The environment's Terraform root (terraform/environments/<environment>)."""
    path = TERRAFORM_DIR / "environments" / environment
    if not path.is_dir():
        raise TerraformError(f"no Terraform environment {environment!r} in {path.parent}")
    return path


def work_dir(state_dir: Path, environment: str) -> Path:
    """Where an environment's state and data dir live."""
    return state_dir / "terraform" / environment


@contextmanager
def locked(work: Path, shared: bool = False) -> Iterator[None]:
    """Commands, which rewrite the data dir's backend file and the state, take the lock alone; readers of the state
    share it. The OS drops a dead holder's lock."""
    work.mkdir(parents=True, exist_ok=True)
    with open(work / ".odin.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield


def outputs(work: Path) -> dict[str, Any]:
    """Current outputs, or {} when nothing was applied yet (what `terraform output` reads)."""
    path = work / STATE_FILE
    with locked(work, shared=True):
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as e:
            raise TerraformError(f"{path}: not a Terraform state ({e})") from None
    return {k: v["value"] for k, v in state.get("outputs", {}).items()}
