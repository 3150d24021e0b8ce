"""Self-serve through a real Airflow (api-server, scheduler, dag-processor, triggerer on the stack's PostgreSQL, as
`odin up` runs it): a CI pipeline deploys a dagger through the REST API v2; a person through the trigger form."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.support.ui import WebDriverWait

from jobs.lifecycle.daggers import Daggers
from odin.apis.airflow_api import AirflowApi, AirflowApiError, access_token
from odin.paths import REPO
from odin.traffic.generator import booking_logs
from tests.support.airflow import Airflow, deploy_form
from tests.support.catalog import CLOSE, PERF_STREAM, START, catalog_events, produce_to_stream
from tests.support.events import surge_truth
from tests.support.seeds import SURGE_SQL
from tests.support.services import Services, TeamCluster
from tests.support.sinks import sink_reaches
from tests.support.trigger_form import TriggerForm, chromium

ARTIFACTS = REPO / ".local" / "artifacts"  # screenshots of the form and of the successful run


def _events(services: Services, team_cluster: TeamCluster, seed: int) -> None:
    events = list(booking_logs(1_000, seed=seed, start=START, rate=10))
    produce_to_stream(services, team_cluster.registry, events, CLOSE, PERF_STREAM)


def test_passwords_are_odins_and_private(airflow: Airflow) -> None:
    path = airflow.endpoints.airflow_passwords
    assert path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(AirflowApiError, match="login as alice"):
        AirflowApi(airflow.url, "alice", "not-her-password")
    logs = Path(airflow.endpoints.nodes["airflow-server"]["dirs"]["log"]).glob("airflow-server@*.log")
    assert not [p for p in logs if airflow.endpoints.airflow_password("alice") in p.read_text(errors="replace")]


def test_a_ci_pipeline_deploys_a_dagger_through_the_rest_api(
    airflow: Airflow, services: Services, team_cluster: TeamCluster
) -> None:
    registry, team = team_cluster.registry, team_cluster.team
    _events(services, team_cluster, seed=51)
    measurement = f"{team}_surge_api_{uuid.uuid4().hex[:6]}"
    conf = deploy_form(team, measurement, services, name="surge-api")
    bob, alice = airflow.api("bob"), airflow.api("alice")
    alice.wait_for_dag("dagger_deploy")
    alice.unpause("dagger_deploy")

    # The attack as it came: a member's sink upserting into the registry's members table.
    platform_engineers = registry.members("platform")
    members_sink = {"dsn": services.registry_url.replace("+psycopg", ""), "table": "members"}
    attack = conf | {"name": "members-api", "sink_type": "postgres", "sink": members_sink}
    # Three runs at once, as three pipelines would send them: the refusals must not hold up the deploy.
    by_bob, by_attack = bob.trigger("dagger_deploy", conf), alice.trigger("dagger_deploy", attack)
    deploy = alice.trigger("dagger_deploy", conf)

    refused = bob.wait("dagger_deploy", by_bob, timeout=300)
    assert refused.state == "failed"
    assert "bob is not a member of team" in bob.log("dagger_deploy", refused.run_id, "check")
    refused = alice.wait("dagger_deploy", by_attack, timeout=300)
    assert refused.state == "failed"
    assert "sink.dsn: the platform connects" in alice.log("dagger_deploy", refused.run_id, "check")
    assert registry.dagger(team, "members-api") is None and registry.members("platform") == platform_engineers

    run = alice.wait("dagger_deploy", deploy, timeout=600)
    tasks = alice.task_states("dagger_deploy", run.run_id)
    assert run.state == "success", {t: ti.state for t, ti in tasks.items()}
    try:
        record = registry.dagger(team, "surge-api")
        assert record is not None and record.state == "running"
        assert {e.actor for e in registry.history(f"dagger:{team}/surge-api")} == {"bob", "alice"}
        truth = surge_truth(catalog_events(services, registry, PERF_STREAM, before=CLOSE))
        assert sink_reaches(measurement, services, truth, until=CLOSE) == truth
    finally:
        Daggers(registry, team_cluster.state_dir).stop(team, "surge-api", "alice")


def test_a_person_deploys_a_dagger_with_the_trigger_form(
    airflow: Airflow, services: Services, team_cluster: TeamCluster
) -> None:
    registry, team = team_cluster.registry, team_cluster.team
    _events(services, team_cluster, seed=61)
    measurement = f"{team}_surge_ui_{uuid.uuid4().hex[:6]}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    sections = {
        "Dagger": {"team": team, "name": "surge-ui", "cluster": team_cluster.cluster},
        "Source": {"stream": PERF_STREAM},
        "Query": {"sql": SURGE_SQL},
        "Sink": {"sink_type": "influx", "sink": {"url": services.victoria_metrics_url, "measurement": measurement}},
        "Advanced": {"watermark_delay": "10s", "trigger_interval": "2s", "parallelism": 1},
    }
    alice = airflow.api("alice")
    alice.wait_for_dag("dagger_deploy")
    with chromium(ARTIFACTS / "dagger-deploy-failure") as browser:
        form = TriggerForm(browser, airflow.url)
        form.login("alice", airflow.endpoints.airflow_password("alice"))
        form.open("dagger_deploy", "Dagger")
        for section, fields in sections.items():
            form.section(section)
            for field, value in fields.items():
                form.fill(field, value)
        browser.save_screenshot(ARTIFACTS / "dagger-deploy-form.png")
        run_id = form.trigger()
        run = alice.wait("dagger_deploy", run_id, timeout=600)
        failed = [t for t, ti in alice.task_states("dagger_deploy", run_id).items() if ti.state == "failed"]
        if run.state != "success":
            pytest.fail("\n".join(alice.log("dagger_deploy", run_id, t) for t in failed))
        browser.refresh()
        WebDriverWait(browser, 30).until(lambda d: "success" in d.page_source.lower())
        browser.save_screenshot(ARTIFACTS / "dagger-deploy-run.png")
    try:
        record = registry.dagger(team, "surge-ui")
        assert record is not None and (record.state, record.cluster) == ("running", team_cluster.cluster)
        assert {e.actor for e in registry.history(f"dagger:{team}/surge-ui")} == {"alice"}
        truth = surge_truth(catalog_events(services, registry, PERF_STREAM, before=CLOSE))
        assert sink_reaches(measurement, services, truth, until=CLOSE) == truth
        assert (ARTIFACTS / "dagger-deploy-run.png").stat().st_size > 10_000
    finally:
        Daggers(registry, team_cluster.state_dir).stop(team, "surge-ui", "alice")


def _as(airflow: Airflow, user: str) -> httpx.Client:
    token = access_token(airflow.url, user, airflow.endpoints.airflow_password(user))
    return httpx.Client(base_url=f"{airflow.url}/api/v2", headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_teams_cannot_change_runs_or_pause_the_platforms_dags(airflow: Airflow, team_cluster: TeamCluster) -> None:
    """A team's user triggers and reads runs; changing one (its XCom, clearing or re-marking its tasks) would re-run
    another user's request as that user, and pausing a health DAG would switch off every team's healing."""
    alice = airflow.api("alice")
    alice.wait_for_dag("dagger_stop")
    alice.unpause("dagger_stop")
    run_id = alice.trigger("dagger_stop", {"team": team_cluster.team, "name": "nothing-to-stop"})
    assert alice.wait("dagger_stop", run_id, timeout=300).state == "failed"  # no such dagger
    with _as(airflow, "bob") as bob:
        assert bob.patch("/dags/dagger_health", json={"is_paused": True}).status_code == 403
        assert bob.patch("/dags/platform_health", json={"is_paused": True}).status_code == 403
        cleared = bob.post("/dags/dagger_stop/clearTaskInstances", json={"dry_run": False, "dag_run_id": run_id})
        assert cleared.status_code == 403
        xcom = f"/dags/dagger_stop/dagRuns/{run_id}/taskInstances/stop/xcomEntries/return_value"
        assert bob.patch(xcom, json={"value": {"team": "x"}}).status_code == 403
        assert bob.get(f"/dags/dagger_stop/dagRuns/{run_id}").status_code == 200  # reading stays every user's

    # A re-run of a destructive request is refused, whoever clears it (here a platform engineer may).
    with _as(airflow, "admin") as admin:
        body = {"dry_run": False, "dag_run_id": run_id, "task_ids": ["stop"], "only_failed": False}
        assert admin.post("/dags/dagger_stop/clearTaskInstances", json=body).status_code == 200
    rerun = alice.wait("dagger_stop", run_id, timeout=300)
    assert rerun.state == "failed"
    assert "a re-run is refused: trigger a new run to ask again" in alice.log("dagger_stop", run_id, "stop", 2)
    entries = team_cluster.registry.history(f"dagger:{team_cluster.team}/nothing-to-stop")
    assert [(e.action, e.outcome) for e in reversed(entries)] == [
        ("airflow_request", "ok"),
        ("dagger_stop", "refused"),  # no such dagger
        ("dagger_stop", "refused"),  # the re-run
    ]
