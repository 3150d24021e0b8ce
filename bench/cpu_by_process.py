"""Where a command's CPU goes, by kind of process: `python -m bench.cpu_by_process [--json FILE] -- COMMAND...`.

Runs COMMAND (e.g. `bash .ci/run`, the whole suite) and samples every process of the machine every 2 s, adding
each one's CPU since the last sample to its kind, told by its command line (a Spark driver a cluster launched, an
executor, a PySpark worker, Ansible, an Airflow component...). The machine's busy CPU is printed beside the sum:
what ran between two samples in a process that also ended between them is not seen, so the kinds cover most of it,
not all. Processes that ran before the command started count from its start only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table

SAMPLE_S = 2.0
KINDS = [  # the first pattern found in the command line names the kind
    ("Spark: local driver (dagger run, preview, Loki's ground truth)", r"java .*SparkSubmit"),
    ("Spark: cluster driver", r"java .*DriverWrapper"),
    ("Spark: executor", r"java .*CoarseGrainedExecutorBackend"),
    ("Spark: master", r"java .*deploy\.master\.Master"),
    ("Spark: worker", r"java .*deploy\.worker\.Worker"),
    ("ZooKeeper", r"java .*zookeeper"),
    ("other JVMs", r"^\S*java "),
    ("PySpark daemons and workers", r"pyspark\.(daemon|worker)|pyspark\.sql\.(worker|streaming)"),
    ("Ansible", r"ansible|mitogen|^worker:"),
    ("Airflow: scheduler", r"airflow scheduler"),
    ("Airflow: DAG processor", r"dag-processor"),
    ("Airflow: triggerer", r"airflow triggerer"),
    ("Airflow: API server", r"api.server|api_server"),
    ("Airflow: tasks", r"airflow (worker|task|supervisor)|LocalExecutor"),
    ("Airflow: other (CLI, migrations)", r"airflow"),
    ("dagger CLI", r"bin/dagger|bench\.startup_probe"),
    ("Loki", r"bin/loki|loki\."),
    ("Odin", r"bin/odin|odin\."),
    ("pytest", r"pytest|xdist|execnet|exec\(eval\(sys\.stdin"),
    ("a dagger's Python driver (cluster mode)", r"jobs/engine/driver\.py"),
    ("PostgreSQL", r"postgres"),
    ("VictoriaMetrics, vmalert", r"victoria-metrics|vmalert"),
    ("InfluxDB", r"influxd"),
    ("Kafka (Tansu)", r"tansu|calfkit"),
    ("Alertmanager", r"alertmanager"),
    ("Chromium (browser tests)", r"chrom"),
    ("stress-ng (Loki)", r"stress-ng"),
    ("other Python", r"python"),
]
PATTERNS = [(kind, re.compile(pattern)) for kind, pattern in KINDS]


def kind_of(command_line: str) -> str:
    return next((kind for kind, pattern in PATTERNS if pattern.search(command_line)), "other")


def busy_cpu_s() -> float:
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def profile(command: list[str]) -> tuple[int, Counter[str], float]:
    """COMMAND's exit code, CPU seconds by kind, and the machine's busy CPU seconds meanwhile."""
    kinds: dict[tuple[int, float], str] = {}
    last: dict[tuple[int, float], float] = {}
    totals: Counter[str] = Counter()
    began = busy_cpu_s()
    first = True
    proc = subprocess.Popen(command)
    while True:
        seen: dict[tuple[int, float], float] = {}
        for p in psutil.process_iter(["pid", "create_time", "cmdline", "name", "cpu_times"]):
            cpu = p.info["cpu_times"]
            if cpu is None:
                continue
            key = (p.info["pid"], p.info["create_time"])
            if key not in kinds:
                kinds[key] = kind_of(" ".join(p.info["cmdline"] or []) or (p.info["name"] or ""))
            seen[key] = cpu.user + cpu.system
            if not first:  # what ran before the command is not its
                totals[kinds[key]] += seen[key] - last.get(key, 0.0)
        first, last = False, seen
        kinds = {k: v for k, v in kinds.items() if k in seen}
        if proc.poll() is not None:
            return proc.returncode, totals, busy_cpu_s() - began
        time.sleep(SAMPLE_S)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command (after --)")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to profile after --")
    code, totals, busy = profile(command)
    table = Table(title=f"CPU by kind of process: {' '.join(command)} (exit {code})")
    table.add_column("kind")
    table.add_column("CPU s", justify="right")
    table.add_column("share of busy", justify="right")
    for kind, seconds in totals.most_common():
        if seconds >= 0.05:
            table.add_row(kind, f"{seconds:,.1f}", f"{seconds / busy:.0%}" if busy else "-")
    table.add_row("all kinds / the machine's busy CPU", f"{sum(totals.values()):,.1f}", f"{busy:,.1f} s")
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps({"exit": code, "busy_cpu_s": busy, "by_kind": dict(totals.most_common())}))
    return code


if __name__ == "__main__":
    sys.exit(main())
