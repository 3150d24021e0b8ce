"""Team clusters on the test stack: created, protected, scaled, failed over and destroyed by Odin, recorded in
the registry; bad requests refused before anything is touched."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobs.lifecycle.daggers import Daggers
from jobs.lifecycle.submission import SparkRest
from jobs.spec import parse_spec
from odin.apis import http_client
from odin.cluster.health import check_cluster, health
from odin.cluster.lifecycle import Clusters
from odin.cluster.secret import rest_token
from odin.cluster.spec import ClusterSpec
from odin.paths import BIN_DIR, REPO, spark_class_archive
from odin.processes import of_node
from odin.provision.ansible import SKIPPED
from odin.provision.terraform import Terraform
from odin.registry import Refused, Registry
from odin.registry.records import DaggerRecord
from odin.traffic.generator import booking_logs, produce
from tests.support.catalog import catalog_stream, closing_markers
from tests.support.events import surge_truth
from tests.support.kafka import new_topic
from tests.support.loki_runs import assert_accounted, assert_exact, simulate
from tests.support.services import Services
from tests.support.sinks import sink_reaches
from tests.support.specs import deployable, surge_spec


@pytest.fixture
def platform(services: Services) -> Iterator[tuple[Registry, Clusters, str]]:
    """The stack's registry, Odin's clusters in the stack's state dir, and a team of its own for the test."""
    assert services.stack is not None
    registry = Registry.connect(services.registry_url)
    team = f"t{uuid.uuid4().hex[:8]}"
    registry.ensure_team(team)
    try:
        yield registry, Clusters(registry, services.stack.state_dir), team
    finally:
        registry.close()


def _nodes(clusters: Clusters, spec: ClusterSpec) -> dict:
    return clusters._terraform(spec).outputs()["nodes"]


def test_a_cluster_is_created_protected_scaled_and_destroyed(platform: tuple[Registry, Clusters, str]) -> None:
    registry, clusters, team = platform
    spec = ClusterSpec(team=team, name="main", workers=1, worker_memory="512m")
    report = clusters.create(spec, "alice")
    record = report.record
    assert (record.state, record.masters, record.workers) == ("ready", 1, 1)
    assert record.addresses["recovery"] == "FILESYSTEM" and record.addresses["master_url"].startswith("spark://127.")
    nodes = _nodes(clusters, spec)
    try:
        # The REST endpoint refuses requests without a token signed with the cluster's secret.
        [rest] = record.addresses["rest_urls"]
        status = f"{rest}/v1/submissions/status/driver-none"
        assert http_client.get(status, timeout=10).status_code == 403
        forged = rest_token(_other_secret(clusters.root(team, "main")), "mallory")
        assert http_client.get(status, headers={"Authorization": f"Bearer {forged}"}, timeout=10).status_code == 403
        token = rest_token(clusters.secret_file(team, "main"), "alice")
        ok = http_client.get(status, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert ok.status_code == 200 and ok.json()["submissionId"] == "driver-none"
        # The secret is readable by Odin's user only, and on no command line or Ansible artifact.
        secret = clusters.secret_file(team, "main")
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        value = secret.read_text().strip()
        for node in nodes.values():
            for p in of_node(node):
                assert value not in Path(f"/proc/{p.pid}/cmdline").read_bytes().decode(errors="replace")
                # Spark's classes come from the host's class-data archive (`make setup` builds it): less CPU to start
                assert str(spark_class_archive()) in Path(f"/proc/{p.pid}/maps").read_text(), (node["name"], p.name)
        artifacts = [f for f in (clusters.root(team, "main") / "ansible").rglob("*") if f.is_file()]
        assert artifacts and not [f for f in artifacts if value in f.read_text(errors="replace")]

        scaling = clusters.scale(team, "main", 2, "alice")
        assert (scaling.record.state, scaling.record.workers) == ("ready", 2)
        before, nodes = nodes, _nodes(clusters, spec)
        assert health(nodes, 2) == []
        [added] = set(nodes) - set(before)
        assert scaling.converged == [added]  # Ansible ran on the new worker only

        # A heal converges the nodes with a process down, and nothing when all run.
        [worker] = of_node(nodes[added])
        os.killpg(worker.pid, signal.SIGKILL)  # type: ignore[arg-type]
        healed = clusters.heal(team, "main", "alice", "a test killed a worker")
        assert healed.converged == [added] and health(nodes, 2) == []
        again = clusters.heal(team, "main", "alice", "nothing to heal")
        assert again.converged == [] and again.playbook is not None and again.playbook.status == SKIPPED

        registry.put_dagger(
            DaggerRecord(
                team=team, name="surge", spec={}, spec_version=1, checkpoint="/x", state="running", cluster="main"
            )
        )
        with pytest.raises(Refused, match=r"1 dagger\(s\) run on .*/main \(surge\): stop them first"):
            clusters.destroy(team, "main", "alice")
        registry.set_dagger_state(team, "surge", "stopped")
    finally:
        clusters.destroy(team, "main", "alice")
    assert registry.cluster(team, "main").state == "destroyed"  # type: ignore[union-attr]
    assert not any(p.running for node in nodes.values() for p in of_node(node))
    assert not clusters.root(team, "main").exists()
    actions = [(e.action, e.outcome) for e in reversed(registry.history(f"cluster:{team}/main"))]
    assert actions == [
        ("cluster_create", "ok"),
        ("cluster_scale", "ok"),
        ("cluster_heal", "ok"),
        ("cluster_heal", "ok"),
        ("cluster_destroy", "refused"),
        ("cluster_destroy", "ok"),
    ]


def _other_secret(root: Path) -> Path:
    path = root / "not-the-secret"
    path.write_text("c29tZS1vdGhlci1rZXktb2YtMzItYnl0ZXMtbG9uZy4uLi4")
    return path


def test_two_masters_fail_over_to_the_standby_and_a_dagger_keeps_running_then_moves_cluster(
    platform: tuple[Registry, Clusters, str], services: Services
) -> None:
    """Loki's master-loss playbook kills the active master while a dagger runs (and Loki's own under load): ZooKeeper
    elects the standby, the worker and the drivers re-register with it, and both daggers go on exactly (their
    drivers never stopped). Then the cluster is destroyed with `move_daggers_to`: the dagger resumes its checkpoint
    on the team's other cluster, still exact."""
    registry, clusters, team = platform
    registry.add_member(team, "alice")
    spec = ClusterSpec(team=team, name="ha", masters=2, workers=1, worker_cores=5, worker_memory="5g")
    record = clusters.create(spec, "alice").record
    daggers = Daggers(registry, clusters.state_dir)
    topic, measurement = new_topic(services), f"{team}_surge_ha_{uuid.uuid4().hex[:6]}"
    start = (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0)
    first = list(booking_logs(1_500, seed=41, start=start, rate=10))
    produce(
        services.kafka_bootstrap, topic, iter([*first, *closing_markers(start + timedelta(minutes=5))]), partitions=2
    )
    sink = {"type": "influx", "version": 2, "url": services.victoria_metrics_url, "measurement": measurement}
    fields = deployable(surge_spec(services, topic, sink), catalog_stream(services, registry, topic))
    fields |= {"team": team, "name": "surge-ha", "parallelism": 1}
    try:
        assert record.addresses["recovery"] == "ZOOKEEPER"
        deployed = daggers.deploy(parse_spec(fields), "ha", "alice")
        progress = Path(deployed.checkpoint)  # sink waits follow the dagger's own progress
        assert sink_reaches(measurement, services, surge_truth(first), checkpoint=progress) == surge_truth(first)

        nodes = _nodes(clusters, spec)
        active = check_cluster(nodes, 1).active_master
        report, run = simulate(services, "master-loss", "--team", team, "--cluster", "ha")
        assert_accounted(report, services, run)
        assert_exact(report)
        [fault] = report["faults"]
        assert fault["resource"] == f"spark/{team}/ha/active-master" and fault["error"] is None
        after = check_cluster(nodes, 1)  # Odin brought the killed master back: as the standby
        assert after.ok and after.active_master not in (None, active), after

        second = list(booking_logs(1_500, seed=42, start=start + timedelta(minutes=10), rate=10))
        later = [*second, *closing_markers(start + timedelta(minutes=15))]
        produce(services.kafka_bootstrap, topic, iter(later), partitions=2)
        both = surge_truth(first) + surge_truth(second)
        assert sink_reaches(measurement, services, both, checkpoint=progress) == both
        rest = SparkRest(record.addresses["rest_urls"], lambda: rest_token(clusters.secret_file(team, "ha"), "alice"))
        assert rest.status(deployed.submission_id).state == "RUNNING"  # type: ignore[arg-type]

        clusters.create(ClusterSpec(team=team, name="spare", workers=1, worker_cores=2, worker_memory="2g"), "alice")
        clusters.destroy(team, "ha", "alice", move_daggers_to="spare")  # the lifecycle moves it (its entry point)
        moved = registry.dagger(team, "surge-ha")
        assert moved is not None and (moved.state, moved.cluster) == ("running", "spare")
        third = list(booking_logs(1_000, seed=43, start=start + timedelta(minutes=20), rate=10))
        produce(
            services.kafka_bootstrap,
            topic,
            iter([*third, *closing_markers(start + timedelta(minutes=25))]),
            partitions=2,
        )
        every = both + surge_truth(third)
        assert (
            sink_reaches(measurement, services, every, checkpoint=progress) == every
        )  # resumed from its checkpoint: nothing twice
        daggers.stop(team, "surge-ha", "alice")
    finally:
        for d in registry.daggers(team=team, states=("deploying", "running", "stopping")):
            registry.set_dagger_state(team, d.name, "stopped")  # its driver goes with the cluster
        for name in ("ha", "spare"):
            if (c := registry.cluster(team, name)) is not None and c.state != "destroyed":
                clusters.destroy(team, name, "alice")


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"workers": 0}, "workers"),
        ({"name": "Main Cluster"}, "name"),
        ({"masters": 6}, "masters"),
        ({"environment": "gcp"}, "gcp: required for environment gcp"),
        ({"worker_memory": "lots"}, "worker_memory"),
    ],
)
def test_bad_cluster_specs_name_the_field(fields: dict, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        ClusterSpec.model_validate({"team": "pricing", "name": "main", **fields})


def test_gcp_is_refused_before_anything_changes_saying_what_is_missing(
    platform: tuple[Registry, Clusters, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, clusters, team = platform
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.delenv("GOOGLE_CREDENTIALS", raising=False)
    gcp = {"project": "p", "admin_cidr": "203.0.113.7/32", "ssh_public_key": "ssh-ed25519 AAAA odin"}
    spec = ClusterSpec(team=team, name="cloud", environment="gcp", gcp=gcp)  # type: ignore[arg-type]
    with pytest.raises(Refused, match=r"missing: the Terraform provider hashicorp/google .*; GCP credentials"):
        clusters.create(spec, "alice")
    assert registry.cluster(team, "cloud") is None and not clusters.root(team, "cloud").exists()
    [entry] = registry.history(f"cluster:{team}/cloud")
    assert entry.outcome == "refused"


def test_a_cluster_of_an_unknown_team_is_refused(platform: tuple[Registry, Clusters, str]) -> None:
    registry, clusters, _ = platform
    with pytest.raises(Refused, match="team 'nobody' is not in the registry"):
        clusters.create(ClusterSpec(team="nobody", name="main"), "alice")
    assert registry.cluster("nobody", "main") is None


def test_the_gcp_root_is_formatted_and_parses_offline(tmp_path: Path) -> None:
    """Its provider cannot be downloaded here: `terraform get` loads and parses the root and its modules."""
    root = REPO / "terraform" / "clusters" / "gcp"
    env = {**os.environ, "TF_DATA_DIR": str(tmp_path / ".terraform"), "TF_CLI_CONFIG_FILE": os.devnull}
    for args in (["fmt", "-check", "-recursive", str(REPO / "terraform")], ["get", "-no-color"]):
        run = subprocess.run(
            [str(BIN_DIR / "python"), "-m", "odin.provision.tf", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stdout + run.stderr
    assert "cluster.master in ../../modules/service_node" in run.stdout
    Terraform("gcp", tmp_path, config_dir=root, work_dir=tmp_path / "work")  # a root Odin can drive
