"""`make bench` (stack part): how long Odin takes to converge the local stack, cold and warm.

Runs on an isolated stack (temp state dir, free ports) so it never touches the stack of `make up`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from bench.record import record
from odin.paths import temporary_state_dir
from odin.ports import stack_ports
from odin.provision.ansible import SKIPPED
from odin.stack import Stack

console = Console()


def timed(label: str, rows: list[tuple[str, float, str]], fn: Callable[[], str]) -> None:
    with console.status(label):
        started = time.perf_counter()
        detail = fn()
        rows.append((label, time.perf_counter() - started, detail))


def main() -> int:
    rows: list[tuple[str, float, str]] = []
    with temporary_state_dir("bench") as path:
        stack = Stack("local", path)
        ports = stack_ports()

        def up(workers: int) -> str:
            report = stack.up(stack.resolve(workers, None, ports))
            if not report.ok:
                raise SystemExit(f"odin up failed: {report.playbook.failures}")
            ran = "not run" if report.playbook.status == SKIPPED else f"changed={report.playbook.total_changed}"
            return f"plan {report.plan.summary()}; ansible {ran}"

        try:
            timed("odin up (cold, all services, 2 workers)", rows, lambda: up(2))
            timed("odin up (warm, nothing to do)", rows, lambda: up(2))
            timed("odin up --workers 3 (add one worker)", rows, lambda: up(3))
            timed("odin status", rows, lambda: f"{sum(n.health.ok for n in stack.status())} healthy")
        finally:
            timed("odin down", rows, lambda: f"stopped {stack.down().stopped} process(es)")

    table = Table(title="Odin on the local environment")
    for col in ("step", "seconds", "detail"):
        table.add_column(col)
    for label, seconds, detail in rows:
        table.add_row(label, f"{seconds:.1f}", detail)
    console.print(table)
    cold, warm = rows[0][1], rows[1][1]
    record("stack_up", f"odin_up_cold_s={cold:.1f} odin_up_warm_s={warm:.1f} warm_over_cold={warm / cold:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
