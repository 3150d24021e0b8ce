"""The Grafana dashboards (odin/dashboards): the checked-in files are the generator's, each is a Grafana dashboard
model, every query parses as MetricsQL on a real VictoriaMetrics, and once a deployed dagger ran and a health check
wrote its points, every series a dashboard reads exists, every variable offers the dagger, and every panel shows
data."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from jobs.health.checkup import Checkup
from jobs.lifecycle.daggers import Daggers
from jobs.spec import parse_spec
from odin.apis import http_client, victoria
from odin.dashboards.model import BUILTINS, Variable, interpolate, references
from odin.dashboards.platform import DASHBOARDS
from odin.dashboards.render import DATASOURCE_UID, GRAFANA_DIR, differences, files
from odin.paths import REPO
from odin.traffic.generator import booking_logs, produce
from tests.support.catalog import catalog_stream, closing_markers
from tests.support.events import surge_truth
from tests.support.kafka import new_topic
from tests.support.services import Services, TeamCluster
from tests.support.sinks import sink_reaches
from tests.support.specs import deployable, surge_spec
from tests.support.waiting import wait_for

MODELS = sorted((GRAFANA_DIR / "dashboards").glob("*.json"))
PANEL_KINDS = {"timeseries", "state-timeline", "stat", "table", "bargauge", "gauge"}


def _load(path: Path) -> dict[str, Any]:
    model: dict[str, Any] = json.loads(path.read_text())
    return model


# -- pure ------------------------------------------------------------------------------------------------------


def test_the_checked_in_files_are_the_generators_output(tmp_path: Path) -> None:
    assert differences(files(DASHBOARDS), GRAFANA_DIR) == []
    assert {p.name for p in MODELS} == {d.filename for d in DASHBOARDS}
    check = [sys.executable, "-m", "odin.dashboards", "--check"]
    ok = subprocess.run(check, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert (ok.returncode, ok.stdout) == (0, "")
    # A copy with one dashboard edited by hand and a stray file: --check names both and fails.
    written = subprocess.run(
        [*check[:-1], "--out", str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert written.returncode == 0, written.stderr
    edited = tmp_path / "dashboards" / "daggers-metrics.json"
    edited.write_text(edited.read_text().replace("Consumer lag", "Lag"))
    (tmp_path / "dashboards" / "old.json").write_text("{}")
    bad = subprocess.run([*check, "--out", str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert bad.returncode == 1
    assert bad.stdout.splitlines() == [f"differs: {edited}", f"not generated: {tmp_path / 'dashboards' / 'old.json'}"]


def test_the_datasource_is_victoria_metrics_and_the_provider_loads_the_dashboards() -> None:
    provisioning = GRAFANA_DIR / "provisioning"
    [source] = yaml.safe_load((provisioning / "datasources" / "victoria-metrics.yaml").read_text())["datasources"]
    assert (source["type"], source["uid"], source["url"]) == ("prometheus", DATASOURCE_UID, "http://127.0.0.1:8428")
    [provider] = yaml.safe_load((provisioning / "dashboards" / "daggers.yaml").read_text())["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/")


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_each_dashboard_is_a_grafana_dashboard_model(path: Path) -> None:
    model = _load(path)
    assert isinstance(model, dict) and "id" not in model  # Grafana gives a provisioned dashboard its id
    assert model["uid"] == path.stem and 0 < len(model["uid"]) <= 40  # Grafana's limit
    assert model["title"] and isinstance(model["schemaVersion"], int) and model["schemaVersion"] >= 36
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert len(variables) == len(model["templating"]["list"])
    for i, v in enumerate(model["templating"]["list"]):
        assert v["type"] == "query" and v["datasource"]["uid"] == DATASOURCE_UID
        assert re.fullmatch(r"label_values\(.+, \w+\)", v["definition"]), v["definition"]
        before = {w["name"] for w in model["templating"]["list"][:i]}  # Grafana fills them in order
        assert references(v["definition"]) <= before, v["definition"]
    panels = model["panels"]
    assert panels and len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for p in panels:
        assert p["type"] in PANEL_KINDS and p["title"] and p["targets"], p
        grid = p["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        covered = {(grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])}
        assert not covered & cells, f"panel {p['title']!r} overlaps another"
        cells |= covered
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"])
        for t in p["targets"]:
            assert t["datasource"] == {"type": "prometheus", "uid": DATASOURCE_UID}
            assert t["expr"].strip() and isinstance(t["legendFormat"], str)
            unknown = references(t["expr"]) - set(variables) - set(BUILTINS)
            assert not unknown, f"{p['title']}: {t['expr']} names undefined variables {unknown}"


def test_uids_are_unique_across_dashboards() -> None:
    uids = [_load(p)["uid"] for p in MODELS]
    assert len(set(uids)) == len(uids) == len(DASHBOARDS)


# -- on a real VictoriaMetrics -------------------------------------------------------------------------------------

# What a person picks in each dashboard's variables (the parse test's are made up: no data needed).
PLACEHOLDERS = {"team": "pricing", "dagger": "pricing.surge", "cluster": "main", "measurement": "pricing_surge"}


def _query_range(vm: str, expr: str, hours: float = 1) -> httpx.Response:
    """As Grafana's Prometheus datasource asks, one-minute steps (the step `$__interval` stands for in BUILTINS).
    nocache: VictoriaMetrics otherwise leaves out the last 30 s and aligns the end to the step, which would hide
    the points the test's dagger and health check wrote a moment ago (a dashboard shows them a little later)."""
    end = time.time()
    params = {"query": expr, "start": str(end - hours * 3600), "end": str(end), "step": "60", "nocache": "1"}
    return http_client.post(f"{vm}/api/v1/query_range", data=params, timeout=30)


def test_every_query_parses_as_metricsql(services: Services) -> None:
    vm = services.victoria_metrics_url
    # What a query that does not parse gets (422 from VictoriaMetrics; 400 from a Prometheus-compatible API).
    assert _query_range(vm, "sum(rate(dagger_metrics_lag[1m])").status_code in (400, 422)
    assert _query_range(vm, "sum(rate(dagger_metrics_lag[$__rate_interval]))").status_code in (400, 422)
    refused = []
    for d in DASHBOARDS:
        exprs = [interpolate(t.expr, PLACEHOLDERS) for p in d.panels for t in p.targets]
        exprs += [interpolate(str(v.source), PLACEHOLDERS) for v in d.variables]  # a selector is a query too
        for expr in exprs:
            r = _query_range(vm, expr)
            if r.status_code != 200 or r.json()["status"] != "success":
                refused.append(f"{d.uid}: {expr}: {r.status_code} {r.text[:300]}")
    assert refused == []


def _series(vm: str, selector: str) -> list[dict[str, str]]:
    start = (datetime.now(UTC) - timedelta(hours=2)).timestamp()
    r = http_client.post(f"{vm}/api/v1/series", data={"match[]": selector, "start": str(start)}, timeout=30)
    r.raise_for_status()
    series: list[dict[str, str]] = r.json()["data"]
    return series


def _variable_values(vm: str, v: Variable, values: dict[str, str]) -> set[str]:
    """What Grafana offers in variable `v`: the label's values on the series its source selects, extracted."""
    start = (datetime.now(UTC) - timedelta(hours=2)).timestamp()
    params = {"match[]": interpolate(str(v.source), values), "start": str(start)}
    r = http_client.get(f"{vm}/api/v1/label/{v.label}/values", params=params, timeout=30)
    r.raise_for_status()
    found: list[str] = r.json()["data"]
    if v.extract is None:
        return set(found)
    return {m.group(1) for value in found if (m := re.search(v.extract, value))}


def test_every_series_a_dashboard_reads_exists_after_a_dagger_ran_and_a_health_check(
    services: Services, team_cluster: TeamCluster
) -> None:
    """The surge dagger deployed on a team's cluster (telemetry, and its output to VictoriaMetrics), then one health
    check (dagger_health, cluster_health): each dashboard, its variables set to that dagger, shows it everywhere."""
    registry, team, vm = team_cluster.registry, team_cluster.team, services.victoria_metrics_url
    daggers = Daggers(registry, team_cluster.state_dir)
    topic, name, measurement = new_topic(services), "surge-dash", f"{team}_surge_{uuid.uuid4().hex[:6]}"
    start = (datetime.now(UTC) - timedelta(minutes=20)).replace(second=0, microsecond=0)
    events = list(booking_logs(1_200, seed=71, start=start, rate=10))  # two minutes of bookings
    produce(
        services.kafka_bootstrap, topic, iter([*events, *closing_markers(start + timedelta(minutes=4))]), partitions=2
    )
    sink = {"type": "influx", "version": 2, "url": vm, "measurement": measurement}
    fields = deployable(surge_spec(services, topic, sink), catalog_stream(services, registry, topic))
    fields |= {"team": team, "name": name, "parallelism": 1}
    deployed = daggers.deploy(parse_spec(fields), team_cluster.cluster, team_cluster.member)
    try:
        truth = surge_truth(events)
        assert sink_reaches(measurement, services, truth, checkpoint=Path(deployed.checkpoint)) == truth
        report = Checkup(registry, team_cluster.state_dir, metrics_url=vm, teams=[team]).run(heal=False)
    finally:
        daggers.stop(team, name, team_cluster.member)
    checked = report.dagger(team, name)
    assert checked is not None and [c.name for c in report.clusters] == [team_cluster.cluster], report
    victoria.flush(vm)
    health = f'dagger_health_level{{team="{team}"}}'  # the check's points take a moment to be searchable
    wait_for(lambda: _series(vm, health), 30, f"{health} in VictoriaMetrics")

    # The labels each data source gives the dagger: telemetry `<team>.<name>`, the health check the bare name.
    chosen = {
        "daggers-metrics": {"team": team, "dagger": f"{team}.{name}"},
        "daggers-health": {"team": team, "dagger": name},
        "daggers-clusters": {"team": team, "cluster": team_cluster.cluster},
        "daggers-surge-demand": {"team": team, "measurement": measurement},
    }
    assert set(chosen) == {d.uid for d in DASHBOARDS}
    missing, unoffered, empty = [], [], []
    for d in DASHBOARDS:
        values = chosen[d.uid]
        for v in d.variables:
            offered = _variable_values(vm, v, values)
            if values[v.name] not in offered:
                unoffered.append(f"{d.uid}: ${v.name} offers {sorted(offered)}, not {values[v.name]}")
        for p in d.panels:
            for t in p.targets:
                missing += [f"{d.uid}: {s}" for s in t.selectors if not _series(vm, interpolate(str(s), values))]
                r = _query_range(vm, interpolate(t.expr, values))
                r.raise_for_status()
                if not r.json()["data"]["result"]:
                    empty.append(f"{d.uid} / {p.title}: {interpolate(t.expr, values)}")
    assert not missing, "series no dagger or health check wrote:\n" + "\n".join(missing)
    assert not unoffered, "\n".join(unoffered)
    assert not empty, "panels without data:\n" + "\n".join(empty)
