"""Who may run a Loki experiment, on the real registry (a database of its own): platform engineers anything; a team's
members only on that team's perf clusters, with the platform's blast radius; every refusal in the history."""

from __future__ import annotations

import pytest
import yaml

from loki.access import authorise, team_radius
from loki.playbook import STANDARD_DIR, Playbook, parse
from odin.registry import Refused, Registry
from odin.registry.records import ClusterRecord
from odin.teams.access import PLATFORM_TEAM


def _book(team: str | None, cluster: str | None, playbook: str = "worker-loss", **changes: object) -> Playbook:
    data = yaml.safe_load((STANDARD_DIR / f"{playbook}.yaml").read_text())
    data["load"]["consumers"][0]["spec_file"] = str(STANDARD_DIR / "consumers" / "surge.yaml")
    data.update(changes)
    return parse(data).bound(team=team, cluster=cluster)


def _cluster(registry: Registry, team: str, name: str, state: str = "ready") -> None:
    registry.put_cluster(
        ClusterRecord(team=team, name=name, environment="local", masters=1, workers=1, worker_cores=1,
                      worker_memory="1g", state=state, terraform_state="")  # type: ignore[arg-type]
    )  # fmt: skip


@pytest.fixture
def teams(registry: Registry) -> Registry:
    for team, member in ((PLATFORM_TEAM, "pat"), ("pricing", "alice"), ("search", "bob")):
        registry.ensure_team(team)
        registry.add_member(team, member)
    _cluster(registry, "pricing", "perf")
    _cluster(registry, "pricing", "main")
    _cluster(registry, "pricing", "perf-old", state="failed")
    return registry


def test_a_platform_engineer_runs_a_playbook_as_written(teams: Registry) -> None:
    book = _book("pricing", "main", blast_radius=["broker/*", "host/*"])
    assert authorise(teams, "pat", book) == book


def test_a_member_runs_on_the_teams_perf_cluster_with_the_platforms_blast_radius(teams: Registry) -> None:
    wished = _book("pricing", "perf", blast_radius=["broker/*", "host/*", "spark/*"])
    given = authorise(teams, "alice", wished)
    assert given.blast_radius == team_radius("pricing", "perf")
    assert given.cases == wished.cases and given.load == wished.load


@pytest.mark.parametrize(
    ("actor", "team", "cluster", "reason"),
    [
        ("bob", "pricing", "perf", "bob is not a member of team pricing"),
        ("alice", "pricing", "main", "target.cluster: pricing/main is not a perf cluster"),
        ("alice", "pricing", "perf-old", "target.cluster: pricing/perf-old is not a ready cluster"),
        ("alice", "pricing", "perf-new", "target.cluster: pricing/perf-new is not a ready cluster"),
        ("alice", None, None, "target.team and target.cluster: alice is not a platform engineer"),
        (None, "pricing", "perf", "no acting user"),
    ],
)
def test_anyone_else_is_refused_and_the_refusal_is_in_the_history(
    teams: Registry, actor: str | None, team: str | None, cluster: str | None, reason: str
) -> None:
    book = _book(team, cluster) if team else _book(None, None, "broker-pause", target={"environment": "local"})
    with pytest.raises(Refused, match=reason):
        authorise(teams, actor, book)
    [entry] = teams.history(f"loki:local/{book.name}")
    assert (entry.actor, entry.action, entry.outcome) == (actor or "(nobody)", "loki_run", "refused")
    assert reason in entry.message


def test_a_members_run_carries_only_its_teams_daggers(teams: Registry) -> None:
    book = _book("pricing", "perf")
    data = book.model_dump(mode="json")
    data["load"]["consumers"][0] = {"name": "surge", "placement": "cluster", "spec": {"team": "search", "name": "x"}}
    with pytest.raises(Refused, match=r"load\.consumers\.0\.spec\.team: 'search'"):
        authorise(teams, "alice", parse(data))
