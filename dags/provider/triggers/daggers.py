"""Waiting for a deployed dagger's first progress without holding a worker slot: the triggerer polls the
lifecycle's verdict (jobs/lifecycle/daggers.py) in a thread."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from jobs.lifecycle import START_TIMEOUT_S

POLL_S = 2.0


class DaggerStartedTrigger(BaseTrigger):
    """Fires once the deployment's query reported progress, or its driver failed, or `timeout_s` passed."""

    def __init__(self, deployment: dict[str, Any], timeout_s: float = START_TIMEOUT_S) -> None:
        super().__init__()
        self.deployment = deployment
        self.timeout_s = timeout_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {
            "deployment": self.deployment,
            "timeout_s": self.timeout_s,
        }

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from jobs.lifecycle.daggers import Deployment, verdict  # here, not at the top: DAG files import this module

        deployment = Deployment(**self.deployment)
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            now = await asyncio.to_thread(verdict, deployment)
            if now.done:
                yield TriggerEvent({"ok": now.ok, "reason": now.reason, "deployment": self.deployment})
                return
            await asyncio.sleep(POLL_S)
        reason = f"no progress within {self.timeout_s:.0f} s"
        yield TriggerEvent({"ok": False, "reason": reason, "deployment": self.deployment})
