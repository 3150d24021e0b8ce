"""Ansible through ansible-runner: run a playbook of ansible/ against an inventory and summarise it."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ansible_mitogen  # only its location: the package itself is nearly empty
import ansible_runner

from odin.paths import ANSIBLE_DIR, BIN_DIR

# Mitogen keeps one Python interpreter per host for the whole run instead of starting one per task: an `odin up` that
# changes nothing takes 17 s of CPU instead of 44 s (docs/decisions.md). ODIN_ANSIBLE_STRATEGY=linear is Ansible's
# own strategy, to tell a Mitogen problem from a playbook's.
MITOGEN_STRATEGIES = Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"


@dataclass(frozen=True)
class TaskFailure:
    host: str
    task: str
    message: str


SKIPPED = "skipped"  # a PlaybookResult's status when Odin had no reason to run it (odin/provision/converged.py)


@dataclass
class PlaybookResult:
    playbook: str
    status: str
    rc: int
    changed: dict[str, int] = field(default_factory=dict)
    failures: list[TaskFailure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.failures

    @property
    def total_changed(self) -> int:
        return sum(self.changed.values())


def _item_label(item: Any) -> str:
    return str(item.get("name", item)) if isinstance(item, dict) else str(item)


def _failure_message(res: dict[str, Any]) -> str:
    items = [r for r in res.get("results", []) if isinstance(r, dict) and r.get("failed")]
    if items:  # a loop: say which items failed and why
        return "\n".join(f"{_item_label(r.get('item'))}: {_failure_message(r)}" for r in items)[-2000:]
    msg = str(res.get("msg") or "")
    for key in ("stderr", "module_stderr", "stdout"):
        if res.get(key):
            msg = f"{msg}\n{res[key]}".strip()
            break
    return msg[-2000:]


def run_playbook(
    playbook: str,
    inventory: dict[str, Any],
    extravars: dict[str, Any],
    private_dir: Path,
    limit: str | None = None,
    on_task: Callable[[str], None] | None = None,
) -> PlaybookResult:
    """Run `ansible/<playbook>`; `on_task` is told each task's name as it starts (for progress displays)."""
    private_dir.mkdir(parents=True, exist_ok=True)
    failures: list[TaskFailure] = []

    def handle(event: dict[str, Any]) -> bool:
        data = event.get("event_data", {})
        if event.get("event") == "playbook_on_task_start" and on_task:
            on_task(data.get("task", ""))
        elif event.get("event") in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            failures.append(
                TaskFailure(data.get("host", "?"), data.get("task", "?"), _failure_message(data.get("res", {})))
            )
        return True

    r = ansible_runner.run(
        private_data_dir=str(private_dir),
        project_dir=str(ANSIBLE_DIR),
        playbook=playbook,
        inventory=inventory,
        extravars=extravars,
        limit=limit,
        envvars={
            # ansible-runner spawns ansible-playbook by name: it must find the venv's copy first.
            "PATH": f"{BIN_DIR}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_STRATEGY_PLUGINS": str(MITOGEN_STRATEGIES),
            "ANSIBLE_STRATEGY": os.environ.get("ODIN_ANSIBLE_STRATEGY", "mitogen_linear"),
        },
        quiet=True,
        rotate_artifacts=5,
        event_handler=handle,
    )
    if r.rc != 0 and not failures:  # e.g. a syntax error: no task failed, ansible-playbook did
        failures.append(TaskFailure("-", f"ansible-playbook {playbook}", r.stdout.read()[-2000:]))
    stats = r.stats or {}
    return PlaybookResult(playbook, r.status, r.rc, dict(stats.get("changed", {})), failures)
