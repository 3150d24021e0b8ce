"""The Daggers page inside Airflow (dags/provider/plugin/): the plugin's app in the real api-server, for Airflow's
logged-in user. Misuse first: another team's user sees none of the team's daggers and is refused its dagger's page
(recorded), an anonymous request is refused; then alice, in a browser, finds her dagger in Airflow's UI."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from urllib.parse import quote

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from jobs.lifecycle.daggers import Daggers
from jobs.spec import parse_spec
from odin.apis import victoria
from odin.paths import REPO
from odin.traffic.generator import booking_logs
from tests.support.airflow import Airflow, as_user
from tests.support.catalog import START, produce_to_stream
from tests.support.services import Services, TeamCluster
from tests.support.specs import catalog_spec
from tests.support.trigger_form import TriggerForm, chromium, plugin_frame

ARTIFACTS = REPO / ".local" / "artifacts"  # screenshots of the page in Airflow's UI
NAME = "surge-page"


def _outputs(services: Services, measurement: str, timeout_s: float = 180) -> None:
    """Wait for the dagger's first windows in the TSDB."""
    deadline = time.monotonic() + timeout_s
    while not victoria.export(services.victoria_metrics_url, f'{{__name__=~"{measurement}_.+"}}'):
        assert time.monotonic() < deadline, f"no {measurement} points after {timeout_s:.0f}s"
        time.sleep(3)


@pytest.fixture(scope="module")
def dagger(airflow: Airflow, services: Services, team_cluster: TeamCluster) -> Iterator[str]:
    """alice's team's surge dagger, running on its cluster with output in the TSDB; a health check of the team
    recorded. Stopped after the module."""
    from jobs.health.checkup import Checkup

    registry, team = team_cluster.registry, team_cluster.team
    measurement = f"{team}_page_{uuid.uuid4().hex[:6]}"
    produce_to_stream(
        services, registry, list(booking_logs(1_000, seed=71, start=START, rate=10)), START + timedelta(minutes=8)
    )
    spec = catalog_spec(team, measurement, services) | {"name": NAME}
    daggers = Daggers(registry, team_cluster.state_dir)
    daggers.deploy(parse_spec(spec), team_cluster.cluster, "alice")
    try:
        _outputs(services, measurement)
        vm = services.victoria_metrics_url
        Checkup(registry, team_cluster.state_dir, metrics_url=vm, teams=[team]).run(heal=False)
        yield measurement
    finally:
        daggers.stop(team, NAME, "alice")


def test_other_teams_and_anonymous_users_see_nothing_of_a_teams_daggers(
    airflow: Airflow, team_cluster: TeamCluster, dagger: str
) -> None:
    registry, team = team_cluster.registry, team_cluster.team
    page = f"/daggers/dagger/{team}/{NAME}"
    with as_user(airflow, "bob") as bob:
        listing = bob.get("/daggers/", params={"user": "alice", "team": team})  # the actor is never a parameter
        assert listing.status_code == 200, listing.text
        assert "bob" in listing.text and team not in listing.text and NAME not in listing.text
        refused = bob.get(page)
        assert refused.status_code == 403
        assert f"bob is not a member of team {team}" in refused.text
        assert bob.get(f"/daggers/team/{team}").status_code == 403
    [entry] = [e for e in registry.history(f"dagger:{team}/{NAME}") if e.actor == "bob"]
    assert (entry.action, entry.outcome) == ("daggers_page", "refused")
    assert [e for e in registry.history(f"team:{team}") if (e.actor, e.outcome) == ("bob", "refused")]

    with as_user(airflow, None) as anonymous:
        for path in ("/daggers/", page, f"/daggers/team/{team}"):
            response = anonymous.get(path)
            assert response.status_code == 401 and team not in response.text and NAME not in response.text
        browser = anonymous.get(page, headers={"Accept": "text/html"})  # a person's browser is sent to log in
        assert browser.status_code == 303 and "/auth/login" in browser.headers["location"]
        forged = anonymous.get(page, headers={"Authorization": "Bearer not-a-token"})
        assert forged.status_code == 401 and NAME not in forged.text

    with as_user(airflow, "alice") as alice:
        missing = alice.get(f"/daggers/dagger/{team}/no-such-dagger")
        assert missing.status_code == 404 and f"team {team} has no dagger &#39;no-such-dagger&#39;" in missing.text
        nobody = alice.get(f"/daggers/dagger/{quote('<i>nope', safe='')}/x")  # named as asked, and escaped
        assert (
            nobody.status_code == 404 and "no team &#39;&lt;i&gt;nope&#39;" in nobody.text and "<i>" not in nobody.text
        )
        mine = alice.get(page)
        assert mine.status_code == 200 and f"{team}/{NAME}" in mine.text


def test_alice_finds_her_dagger_on_the_daggers_page_in_airflows_ui(
    airflow: Airflow, team_cluster: TeamCluster, dagger: str
) -> None:
    team = team_cluster.team
    with as_user(airflow, "admin") as admin:  # loaded once: a second copy of its entry point is an import error
        assert admin.get("/api/v2/plugins/importErrors").json()["total_entries"] == 0
        assert [p["name"] for p in admin.get("/api/v2/plugins").json()["plugins"]].count("daggers") == 1
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with chromium(ARTIFACTS / "daggers-page-failure") as browser:
        TriggerForm(browser, airflow.url).login("alice", airflow.endpoints.airflow_password("alice"))
        row = f"tr.dagger[data-team='{team}'][data-name='{NAME}']"
        plugin_frame(browser, airflow.url, "daggers", row)
        # the page is in Airflow's navigation, and shown inside its UI
        browser.switch_to.default_content()
        assert browser.find_elements(By.XPATH, "//a[contains(@href, 'plugin/daggers')]")
        browser.switch_to.frame(browser.find_element(By.CSS_SELECTOR, "iframe"))

        def sparkline_drawn(_: object) -> bool:  # VictoriaMetrics' queries see a point ~30 s after it is written
            if browser.find_elements(By.CSS_SELECTOR, f"{row} svg.sparkline polyline"):
                return True
            # the page again, inside Airflow's UI: a refresh would leave the driver outside the frame, where no row is
            plugin_frame(browser, airflow.url, "daggers", row)
            return False

        WebDriverWait(browser, 90, poll_frequency=5).until(sparkline_drawn)
        cells = browser.find_element(By.CSS_SELECTOR, row).text
        assert "running" in cells and team_cluster.cluster in cells
        assert team in browser.find_element(By.ID, "clusters").text
        assert "Loki runs" in browser.page_source  # a team's real run there: tests/test_loki_dag.py
        browser.switch_to.default_content()
        browser.save_screenshot(ARTIFACTS / "daggers-page.png")
        browser.switch_to.frame(browser.find_element(By.CSS_SELECTOR, "iframe"))

        browser.find_element(By.CSS_SELECTOR, f"{row} a").click()
        WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.ID, "output"))
        assert f"{team}/{NAME}" in browser.find_element(By.ID, "title").text
        assert browser.find_elements(By.CSS_SELECTOR, "#output svg.chart polyline, #output svg.chart circle")
        assert dagger in browser.find_element(By.ID, "output").text  # the measurement it charts
        history = browser.find_element(By.ID, "history").text
        assert "dagger_deploy" in history and "alice" in history and "v1" in history  # the spec version it asked
        assert browser.find_element(By.ID, "spec-version").text == "v1"
        forms = {
            a.get_attribute("href").rsplit("/", 1)[1] for a in browser.find_elements(By.CSS_SELECTOR, "a.form-link")
        }
        assert forms == {"dagger_deploy", "dagger_update", "dagger_stop"}
        fields = browser.find_element(By.CSS_SELECTOR, ".form[data-dag='dagger_update']").text
        assert NAME in fields and team_cluster.cluster in fields and "SELECT" in fields
        log = browser.find_element(By.ID, "log").text
        assert log.strip(), "the driver's log, or why it cannot be read"
        # the UI follows the frame: the detail has an address of its own in Airflow's UI
        browser.switch_to.default_content()
        assert f"/plugin/daggers/daggers/dagger/{team}/{NAME}" in browser.current_url
        browser.save_screenshot(ARTIFACTS / "daggers-page-detail.png")
    assert (ARTIFACTS / "daggers-page-detail.png").stat().st_size > 10_000


def test_what_cannot_be_reached_is_a_message_on_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """No registry, no VictoriaMetrics: the page says so (escaped), and the api-server goes on."""
    from dags.provider.plugin import data, render

    def unreachable() -> None:
        raise ConnectionError("registry at <127.0.0.1:1> refused")

    monkeypatch.setattr(data, "_environment", unreachable)
    page = data.overview("alice")
    html = render.overview_page(page, "/daggers", "")
    assert "the platform registry cannot be reached" in html and "&lt;127.0.0.1:1&gt;" in html
    with pytest.raises(Exception, match="Connect"):
        data.input_rates("http://127.0.0.1:1", ["pricing"])
    detail = data.Detail("alice", "pricing", "surge")
    record = SimpleNamespace(spec={"sink": {"type": "influx", "measurement": "pricing_surge"}})
    data._output(detail, record, "http://127.0.0.1:1")
    assert "VictoriaMetrics (http://127.0.0.1:1) did not answer" in detail.output_note
    assert any("input rate from VictoriaMetrics" in p for p in detail.problems)
    html = render.detail_page(detail, "/daggers", "")
    assert "did not answer" in html and "Not everything could be read" in html
