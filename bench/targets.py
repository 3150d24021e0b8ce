"""The platform's speed and memory targets beside the latest figure each benchmark recorded (`<state>/bench/*.json`,
bench/record.py): what `make bench` ends with. Figures, never pass/fail: a target not met is a row that says so.

    .venv/bin/python -m bench.targets [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.table import Table

from odin.paths import default_state_dir


@dataclass(frozen=True)
class Target:
    figure: str  # what people read
    bench: str  # the record's file name, without .json
    key: str  # the figure's name in it
    target: float
    better: Literal["lower", "higher"]
    unit: str
    how: str  # the command that measures it


TARGETS = (
    Target("`dagger run` start → first row in the sink (surge, small topic)", "dagger_throughput",
           "startup_first_row_s", 8, "lower", "s", "bench.dagger_throughput"),
    Target("process group peak memory (JVM + Python workers), surge dagger", "dagger_throughput",
           "peak_rss_group_mb", 600, "lower", "MB", "bench.dagger_throughput"),
    Target("Airflow trigger of dagger_deploy → first row", "deploy_latency", "deploy_first_row_s", 20, "lower", "s",
           "bench.deploy_latency"),
    Target("driver relaunch → first progress", "loki_playbooks.loki_driver-loss", "relaunch_first_progress_s", 8,
           "lower", "s", "bench.loki_playbooks"),
    Target("driver-loss recovery (Loki, full scale)", "loki_playbooks.loki_driver-loss", "recover_s", 20, "lower", "s",
           "bench.loki_playbooks"),
    Target("worker-loss recovery (Loki, full scale)", "loki_playbooks.loki_worker-loss", "recover_s", 30, "lower", "s",
           "bench.loki_playbooks"),
    Target("steady rate vs the plain one-consumer baseline (surge query)", "dagger_throughput", "ratio", 1.5, "higher",
           "x", "bench.dagger_throughput"),
    Target("steady rate vs the per-partition round-robin baseline", "dagger_throughput", "bytewax_ratio", 1.0,
           "higher", "x", "bench.dagger_throughput"),
    Target("p99 window latency after the window end (2 s delay, 1 s trigger)", "dagger_throughput", "p99_latency_s",
           3.5, "lower", "s", "bench.dagger_throughput"),
    Target("`odin up` full stack, cold", "stack_up", "odin_up_cold_s", 30, "lower", "s", "bench.stack_up"),
    Target("`odin up` full stack, nothing to do", "stack_up", "odin_up_warm_s", 5, "lower", "s", "bench.stack_up"),
)  # fmt: skip


def target(bench: str, key: str) -> Target:
    """The target of figure `key` of benchmark `bench` (what a benchmark prints beside its figure)."""
    return next(t for t in TARGETS if t.bench == bench and t.key == key)


@dataclass(frozen=True)
class Row:
    target: Target
    value: float | None  # None: not measured yet (or the bench could not)
    measured_at: str | None

    @property
    def met(self) -> bool | None:
        if self.value is None:
            return None
        return self.value <= self.target.target if self.target.better == "lower" else self.value >= self.target.target

    @property
    def ratio(self) -> float | None:
        """How far from the target: above 1 is short of it, whichever way the figure improves."""
        if self.value is None or self.value == 0:
            return None
        t = self.target.target
        return self.value / t if self.target.better == "lower" else t / self.value


def rows(state_dir: Path) -> list[Row]:
    out = []
    for t in TARGETS:
        path = state_dir / "bench" / f"{t.bench}.json"
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            out.append(Row(t, None, None))
            continue
        value = doc.get("figures", {}).get(t.key)
        out.append(Row(t, value if isinstance(value, int | float) else None, doc.get("measured_at")))
    return out


def table(found: list[Row]) -> Table:
    out = Table(title="targets (issue 31): the latest figure of each benchmark", title_justify="left")
    for col in ("figure", "measured", "target", "off by", "", "when", "measured by"):
        out.add_column(col, justify="right" if col in ("measured", "target", "off by") else "left")
    for r in found:
        t = r.target
        sign = "<=" if t.better == "lower" else ">="
        when = datetime.fromisoformat(r.measured_at).strftime("%Y-%m-%d %H:%M") if r.measured_at else "-"
        value = "not measured" if r.value is None else f"{r.value:,.2f} {t.unit}".replace(".00 ", " ")
        verdict = {True: "[green]met[/]", False: "[red]not met[/]", None: "-"}[r.met]
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
        out.add_row(t.figure, value, f"{sign} {t.target:g} {t.unit}", ratio, verdict, when, f"python -m {t.how}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.targets", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--state-dir", type=Path, default=None, help="where the benchmarks kept their figures")
    args = parser.parse_args(argv)
    found = rows(args.state_dir or default_state_dir())
    if args.json:
        doc = [
            {"figure": r.target.figure, "value": r.value, "unit": r.target.unit, "target": r.target.target,
             "better": r.target.better, "met": r.met, "measured_at": r.measured_at}
            for r in found
        ]  # fmt: skip
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    Console(width=max(Console().width, 160)).print(table(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
