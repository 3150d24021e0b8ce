"""`make bench` (Loki part): every standard playbook at its own scale (20,000 events/s of the seed's surge dagger)
against an isolated stack, and the figures each report records.

On a temporary stack (Kafka with its perf broker, VictoriaMetrics, PostgreSQL on free ports), team `loki` gets the
clusters the playbooks aim at: `perf` (1 master) and `perf-ha` (2 masters under ZooKeeper), each with `--workers`
workers of `--worker-cores` cores (default: 2 of 3: a killed worker's driver is relaunched on the other at once, with
room there for its two executors).
Each playbook runs through `loki.runner.run_playbook`, as `loki simulate` does; its report (JSON + HTML) stays in
the reports folder given (default: a temporary one, printed).

Targets (issue 13): 0 events lost, 0 counted twice, recovery <= 60 s; broker-loss shows its loss exactly (events
lost by the dagger <= acknowledged events gone from the broker). Prints a table and one line per playbook:
`loki_<playbook> acknowledged=<n> lost=<n> duplicated=<n> gone_from_broker=<n> detect_s=<s> recover_s=<s>
recovery_ratio=<recover / 60> verdict=<pass|fail>`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from bench.record import record
from loki.playbook import STANDARD_DIR, Playbook, load, standard_names
from loki.report import RECOVERY_TARGET_S
from loki.runner import run_playbook
from odin.cluster.lifecycle import Clusters
from odin.cluster.spec import ClusterSpec
from odin.endpoints import Endpoints
from odin.paths import temporary_state_dir
from odin.ports import stack_ports
from odin.registry.store import Registry
from odin.spec import Service
from odin.stack import Stack
from odin.teams.access import PLATFORM_TEAM
from odin.teams.actor import login

console = Console()
TEAM, MEMBER = "loki", "alice"


def team_clusters(workers: int, cores: int) -> list[ClusterSpec]:
    """The team's clusters: `perf` and `perf-ha`, each `workers` workers of `cores` cores (a dagger's driver and
    its two executors take one core each)."""
    memory = f"{max(2, cores)}g"
    return [
        ClusterSpec(team=TEAM, name="perf", workers=workers, worker_cores=cores, worker_memory=memory),
        ClusterSpec(team=TEAM, name="perf-ha", masters=2, workers=workers, worker_cores=cores, worker_memory=memory),
    ]


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    events = report["events"]
    detect = [c["detect_s"] for c in report["cases"] if c["detect_s"] is not None]
    recover = [c["recover_s"] for c in report["cases"] if c["recover_s"] is not None]
    fed = [s["sent"] for s in report["timeline"]]
    seconds = report["timeline"][-1]["t"] if report["timeline"] else 0.0
    return {
        "acknowledged": events["acknowledged"],
        "rate": fed[-1] / seconds if fed and seconds else 0.0,
        "failed": events["failed"],
        "indeterminate": events["indeterminate"],
        "lost": events["lost"],
        "duplicated": events["duplicated"],
        "gone_from_broker": events["gone_from_broker"],
        "detect_s": min(detect) if detect else None,
        "recover_s": max(recover) if recover else None,
        "max_rate": report["max_sustained_rate"],
        # the relaunched (or, without a relaunch, the deployed) driver's start -> first progress
        "relaunch_first_progress_s": max(report.get("driver_start_up_s", {}).values(), default=None),
        "verdict": report["verdict"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.loki_playbooks", description=__doc__.splitlines()[0])
    parser.add_argument("playbooks", nargs="*", help=f"which (default: all of {STANDARD_DIR})")
    parser.add_argument("--rate-scale", type=float, default=1.0)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--reports", type=Path, default=None, help="where the reports go")
    parser.add_argument("--workers", type=int, default=2, help="workers of each team cluster")
    parser.add_argument("--worker-cores", type=int, default=3, help="cores of each worker")
    args = parser.parse_args(argv)
    names = args.playbooks or standard_names()
    reports = args.reports or Path(tempfile.mkdtemp(prefix="loki-bench-"))
    results: dict[str, dict[str, Any]] = {}
    with temporary_state_dir("bench-loki") as state:
        stack = Stack("local", state)
        registry: Registry | None = None
        created: list[str] = []
        try:
            with console.status("odin up: Kafka (data and perf brokers), VictoriaMetrics, PostgreSQL"):
                up = stack.up(
                    stack.resolve(None, {Service.kafka_broker, Service.victoria_metrics, Service.postgres},
                                  stack_ports())
                )  # fmt: skip
                if not up.ok:
                    raise SystemExit(f"odin up failed: {[(f.task, f.message) for f in up.playbook.failures]}")
            registry = Registry.connect(Endpoints(stack.nodes()).registry_url)
            registry.ensure_team(TEAM)
            registry.add_member(TEAM, MEMBER)
            # the bench runs broker and host faults, which are a platform engineer's (loki/access.py)
            registry.ensure_team(PLATFORM_TEAM)
            registry.add_member(PLATFORM_TEAM, login())
            clusters = Clusters(registry, state)
            books = {n: load(STANDARD_DIR / f"{n}.yaml") for n in names}
            for spec in team_clusters(args.workers, args.worker_cores):
                if any(b.target.cluster == spec.name for b in books.values()):
                    with console.status(f"odin cluster create {TEAM}/{spec.name}"):
                        clusters.create(spec, MEMBER)
                    created.append(spec.name)
            for name, book in books.items():
                book = book.bound().scaled(args.rate_scale, args.time_scale)
                _empty_perf_topics(registry, book)
                started = time.monotonic()
                with console.status(f"loki simulate {name}") as status:
                    report, html = run_playbook(book, state, login(), reports, lambda m, s=status: s.update(m))
                results[name] = _figures(report) | {"wall_s": time.monotonic() - started, "report": str(html)}
                console.print(f"{name}: {results[name]['verdict']} ({html})")
                if report["state"] == "halted":  # `loki halt` or Ctrl-C: the bench stops too
                    break
        finally:
            if registry is not None:
                for name in created:  # a cluster's processes outlive the stack's services otherwise
                    Clusters(registry, state).destroy(TEAM, name, MEMBER)
                registry.close()
            stack.down()
    _print(results)
    return 0 if all(r["verdict"] == "pass" for r in results.values()) else 1


def _empty_perf_topics(registry: Registry, book: Playbook) -> None:
    """Each playbook starts on empty perf topics (Loki creates them again). Tansu's memory storage goes through every
    batch of a partition to find an offset, so the events of the playbooks before (3 million each) would slow every
    fetch of the later ones, which a Kafka broker, with its offset index, would not."""
    for feeder in book.load.feeders:
        record = registry.stream(feeder.stream)
        if record is None:
            continue
        admin = AdminClient({"bootstrap.servers": record.serving_bootstrap_servers})
        existing = admin.list_topics(timeout=30).topics
        if doomed := [t for t in record.topics if t in existing]:
            for future in admin.delete_topics(doomed, operation_timeout=30).values():
                future.result(60)


def _print(results: dict[str, dict[str, Any]]) -> None:
    table = Table(title="Loki standard playbooks: the reports' figures")
    columns = ["acknowledged", "rate", "failed", "indeterminate", "lost", "duplicated", "gone_from_broker",
               "detect_s", "recover_s", "relaunch_first_progress_s", "max_rate", "verdict", "wall_s"]  # fmt: skip
    table.add_column("playbook")
    for c in columns:
        table.add_column(c, justify="right")

    def cell(v: Any) -> str:
        if v is None:
            return "-"
        return f"{v:,.1f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v)

    for name, r in results.items():
        table.add_row(name, *(cell(r[c]) for c in columns))
    console.print(table)
    for name, r in results.items():
        ratio = r["recover_s"] / RECOVERY_TARGET_S if r["recover_s"] is not None else 0.0
        record(
            "loki_playbooks",
            f"loki_{name} acknowledged={r['acknowledged']} rate={r['rate']:.0f} lost={r['lost']} "
            f"duplicated={r['duplicated']} gone_from_broker={r['gone_from_broker']} detect_s={r['detect_s']} "
            f"recover_s={r['recover_s']} relaunch_first_progress_s={r['relaunch_first_progress_s']} "
            f"recovery_ratio={ratio:.2f} verdict={r['verdict']}",
        )


if __name__ == "__main__":
    raise SystemExit(main())
