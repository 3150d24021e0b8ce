"""How long Airflow takes to parse `dags/` when the registry does not answer (no environment at all here): the
DAG processor parses every few seconds, so a parse must not wait on a database or the network.

`python -m bench.dag_parse` parses the folder in a fresh interpreter (as the DAG processor's parsing process does),
best of 3, with the forms' choices file in place, and prints the seconds per parse and the DAGs found.
Target: under 2 s, with no connection attempted (tests/test_dags.py checks the latter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from odin.paths import REPO

TARGET_S = 2.0
PARSE = """
import json, time
began = time.monotonic()
from airflow.dag_processing.dagbag import DagBag
imported = time.monotonic()
bag = DagBag(dag_folder=%r)
done = time.monotonic()
print(json.dumps({"import_s": imported - began, "parse_s": done - imported, "dags": len(bag.dags),
                  "errors": len(bag.import_errors)}))
"""


def parse_once(odin_home: Path) -> dict[str, float]:
    env = {**os.environ, "ODIN_HOME": str(odin_home)}
    done = subprocess.run(
        [sys.executable, "-c", PARSE % str(REPO / "dags")], env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="daggers-dag-parse-") as home:
        (Path(home) / "airflow").mkdir()
        choices = {"streams": ["booking-log"], "teams": ["pricing"], "clusters": ["main"]}
        (Path(home) / "airflow" / "form-choices.json").write_text(json.dumps(choices))
        runs = [parse_once(Path(home)) for _ in range(3)]
    best = min(runs, key=lambda r: r["parse_s"])
    verdict = "ok" if best["parse_s"] <= TARGET_S and not best["errors"] else "MISSED"
    print(
        f"dags/ parse, registry unreachable: {best['parse_s']:.2f} s for {best['dags']:.0f} DAGs "
        f"(Airflow's import {best['import_s']:.2f} s before it; target <= {TARGET_S:.0f} s, "
        f"ratio {best['parse_s'] / TARGET_S:.2f}) {verdict}; import errors: {best['errors']:.0f}"
    )


if __name__ == "__main__":
    main()
