"""The loki_chaos DAG through a real Airflow (REST API v2, as a CI pipeline or the form triggers it): it runs; who
may run what is the triggering user's to be checked, never a param; `loki halt` stops a run the DAG started."""

from __future__ import annotations

import base64
import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from loki.store import SimulationStore
from odin import processes
from odin.paths import BIN_DIR, REPO
from tests.support.airflow import Airflow, as_user
from tests.support.loki_runs import ENV, as_platform_engineer, state_args
from tests.support.services import Services, TeamCluster

DAG = "loki_chaos"


def test_no_dag_file_shadows_an_importable_module() -> None:
    """Airflow puts dags/ first on its tasks' import path: a DAG file named like a package hides it from every task
    (dags/daggers.py hid the generated protobuf package `daggers`, and loki_chaos failed at import)."""
    for dag_file in sorted((REPO / "dags").glob("*.py")):
        name = dag_file.stem
        assert name not in sys.stdlib_module_names, f"{dag_file.name} shadows the standard library's {name}"
        found = importlib.util.find_spec(name)
        where = found and (found.origin or list(found.submodule_search_locations or []))
        assert found is None, f"{dag_file.name} shadows {name} ({where}) on Airflow's import path"
    generated = importlib.util.find_spec("daggers.events")
    assert generated is not None and ".local/gen" in str(generated.origin or generated.submodule_search_locations)


@pytest.fixture(scope="module")
def perf_cluster(team_cluster: TeamCluster) -> Iterator[str]:
    """The team's perf cluster (a team runs Loki only there), the smallest there is."""
    from odin.cluster.lifecycle import Clusters
    from odin.cluster.spec import ClusterSpec

    clusters = Clusters(team_cluster.registry, team_cluster.state_dir)
    spec = ClusterSpec(team=team_cluster.team, name="perf", workers=1, worker_cores=1, worker_memory="512m")
    clusters.create(spec, team_cluster.member)
    try:
        yield "perf"
    finally:
        clusters.destroy(team_cluster.team, "perf", team_cluster.member)


def _playbook(case: dict[str, Any], feed_s: int) -> dict[str, Any]:
    """A tiny experiment: a slow feeder, no consumer, one fault. Its blast radius is the caller's wish (anything):
    a team's run gets the platform's instead."""
    return {
        "name": "dag-check",
        "blast_radius": ["broker/*", "host/*", "spark/*", "topic/*"],
        "load": {"feeders": [{"stream": "booking-log-perf", "rate": {"shape": "steady", "events_per_s": 20},
                              "duration": f"{feed_s}s"}]},
        "steady_state": {"probes": [], "interval": "1s", "settle": "5s"},
        "cases": [case],
    }  # fmt: skip


def _pause(target: str, duration_s: int) -> dict[str, Any]:
    return {"name": "paused", "type": "pause", "target": target, "start": "2s", "duration": f"{duration_s}s"}


def _worker_pid(team_cluster: TeamCluster, cluster: str) -> int:
    from odin.cluster.lifecycle import Clusters

    nodes = Clusters(team_cluster.registry, team_cluster.state_dir).nodes(team_cluster.team, cluster)
    [worker] = [n for n in nodes.values() if n["role"] == "spark_worker"]
    [pid] = [p.pid for p in processes.of_node(worker) if p.pid]
    return pid


def _state_letter(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2]


def test_loki_chaos_runs_for_a_team_on_its_perf_cluster_and_refuses_the_rest(
    airflow: Airflow,
    services: Services,
    team_cluster: TeamCluster,
    perf_cluster: str,
) -> None:
    registry, team = team_cluster.registry, team_cluster.team
    bob, alice = airflow.api("bob"), airflow.api("alice")
    alice.wait_for_dag(DAG)
    airflow.api("admin").unpause(DAG)  # a platform engineer's (pausing it stops every team's experiments)
    worker = "spark/${team}/${cluster}/worker-*"
    conf = {"playbook_spec": _playbook(_pause(worker, 3), 8), "team": team, "cluster": perf_cluster}

    refused = bob.wait(DAG, bob.trigger(DAG, conf), timeout=300)
    assert refused.state == "failed"
    assert f"bob is not a member of team {team}" in bob.log(DAG, refused.run_id, "simulate")
    broker = {**conf, "playbook_spec": _playbook(_pause("broker/kafka-perf", 3), 8)}
    outside = alice.wait(DAG, alice.trigger(DAG, broker), timeout=300)
    assert outside.state == "failed"  # her playbook's blast radius names every broker: the platform's does not
    assert "broker/kafka-perf is outside blast_radius" in alice.log(DAG, outside.run_id, "simulate")
    refusals = [(e.actor, e.outcome) for e in registry.history("loki:local/dag-check")]
    assert ("bob", "refused") in refusals and ("alice", "refused") in refusals
    assert not [r for r in SimulationStore(registry).runs(playbook="dag-check") if r.actor == "bob"]

    run = alice.wait(DAG, alice.trigger(DAG, conf), timeout=600)
    assert run.state == "success", alice.log(DAG, run.run_id, "simulate")[-3000:]
    [done] = SimulationStore(registry).runs(playbook="dag-check")[:1]
    assert (done.actor, done.state, done.verdict) == ("alice", "finished", "pass")
    assert done.spec["blast_radius"][0] == f"spark/{team}/{perf_cluster}/*"  # the platform's, not hers
    # the Daggers page lists the run, with its verdict, to her team and to nobody else's
    with as_user(airflow, "alice") as page:
        listing = page.get("/daggers/")
        assert listing.status_code == 200, listing.text
        [row] = [r for r in listing.text.split("<tr>") if f"<td>{done.id}</td>" in r]
        assert "dag-check" in row and f"{team}/{perf_cluster}" in row and "<td>pass</td>" in row
    with as_user(airflow, "bob") as other:
        assert f"<td>{done.id}</td>" not in other.get("/daggers/").text


def test_loki_halt_stops_a_run_the_dag_started(
    airflow: Airflow,
    services: Services,
    team_cluster: TeamCluster,
    perf_cluster: str,
) -> None:
    """The run's recorded process is Airflow's task; `loki halt` asks it through the store and signals it only if
    that pid still has the start time recorded."""
    registry, team = team_cluster.registry, team_cluster.team
    alice = airflow.api("alice")
    alice.wait_for_dag(DAG)
    airflow.api("admin").unpause(DAG)
    pid = _worker_pid(team_cluster, perf_cluster)
    conf = {"playbook_spec": _playbook(_pause("spark/${team}/${cluster}/worker-*", 120), 130), "team": team,
            "cluster": perf_cluster}  # fmt: skip
    run_id = alice.trigger(DAG, conf)
    deadline = time.monotonic() + 300
    while (
        time.monotonic() < deadline and _state_letter(pid) != "T" and alice.state(DAG, run_id) in ("queued", "running")
    ):
        time.sleep(0.5)
    assert _state_letter(pid) == "T", alice.log(DAG, run_id, "simulate")[-3000:]
    as_platform_engineer(services)
    halted = subprocess.run(
        [str(BIN_DIR / "loki"), "halt", *state_args(services)], capture_output=True, text=True, env=ENV, timeout=300
    )
    assert halted.returncode == 0, halted.stdout + halted.stderr
    assert "halting" in halted.stdout, halted.stdout
    assert _state_letter(pid) in "SR"
    assert alice.wait(DAG, run_id, timeout=300).state == "failed"  # halted: no verdict to pass
    [last] = SimulationStore(registry).runs(playbook="dag-check")[:1]
    steps = [e.step for e in SimulationStore(registry).entries(last.id)]
    assert last.state == "halted" and "halt.requested" in steps and "fault.reverted" in steps, (last, steps)


class Page(HTMLParser):
    """What a page loads: its images' sources, and any other resource it would fetch (scripts, styles, frames)."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.fetches: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "img":
            self.images.append(found.get("src") or "")
        elif tag in ("script", "link", "iframe", "embed", "object") and (found.get("src") or found.get("href")):
            self.fetches.append(f"{tag} {found.get('src') or found.get('href')}")


def test_reports_gather_puts_the_runs_on_one_page_that_opens_offline(
    airflow: Airflow, services: Services, team_cluster: TeamCluster
) -> None:
    registry = team_cluster.registry
    finished = {r.id for r in SimulationStore(registry).runs(state="finished") if r.report}
    assert finished, "the module's Loki runs come first"
    admin = airflow.api("admin")
    admin.wait_for_dag("reports_gather")
    admin.unpause("reports_gather")  # the test stack's Airflow pauses new DAGs (tests/conftest.py)
    run = admin.wait("reports_gather", admin.trigger("reports_gather", {}), timeout=300)
    assert run.state == "success", admin.log("reports_gather", run.run_id, "gather")[-3000:]

    assert services.stack is not None
    out = services.stack.state_dir / "reports"
    index = json.loads((out / "index.json").read_text())
    assert finished <= {r["run"] for r in index["loki_runs"]}
    run_summary = next(r for r in index["loki_runs"] if r["run"] in finished)
    assert run_summary["recovery"] and run_summary["verdict"] == "pass"
    page = Page()
    page.feed((out / "index.html").read_text())
    assert not page.fetches  # everything is inline: it opens offline
    assert len(page.images) >= 2  # at least the trends across runs and the recovery per fault
    for src in page.images:
        head, _, data = src.partition(",")
        assert head == "data:image/png;base64"
        assert base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n")
