"""Who may run a Loki experiment, on what: checked before anything is touched, refusals recorded in the registry's
history. Platform engineers run any playbook as written. A member of a team runs only against one of that team's
perf clusters (`perf`, `perf-*`, `*-perf`: the standard playbooks' names), and with the blast radius the platform
fixes for it (`team_radius`), whatever the playbook says: that cluster's nodes, the team's drivers on it, the
run's own consumers and links, and perf topics. Brokers and the host are shared by every team: platform only."""

from __future__ import annotations

import re

from loki.playbook import Playbook, parse
from odin.registry import Refused, Registry
from odin.teams.access import PLATFORM_TEAM, require_member

PERF_CLUSTER = re.compile(r"^(perf|perf-.+|.+-perf)$")
ACTION = "loki_run"


def team_radius(team: str, cluster: str) -> list[str]:
    """What a team's run may touch; `loki.plan` also refuses any team driver that runs on another cluster."""
    return [
        f"spark/{team}/{cluster}/*",
        f"driver/{team}/*",
        "dagger/*",
        "link/*",
        "topic/*-perf",
        "topic/*-perf.dlq",
    ]


def is_platform_engineer(registry: Registry, actor: str) -> bool:
    return actor in registry.members(PLATFORM_TEAM)


def authorise(registry: Registry, actor: str | None, book: Playbook, action: str = ACTION) -> Playbook:
    """The playbook `actor` may run: as written for a platform engineer; aimed at its team's perf cluster with the
    platform's blast radius for a member. Refused (and recorded) otherwise."""
    subject = f"loki:{book.target.environment}/{book.name}"
    with registry.refusals(actor or "(nobody)", action, subject):
        return _authorised(registry, actor, book)


def _authorised(registry: Registry, actor: str | None, book: Playbook) -> Playbook:
    if not actor:
        raise Refused("no acting user: a Loki run is triggered by a person or an API user")
    if is_platform_engineer(registry, actor):
        return book
    team, cluster = book.target.team, book.target.cluster
    if not team or not cluster:
        raise Refused(
            f"target.team and target.cluster: {actor} is not a platform engineer, and runs only against a perf "
            "cluster of one of its teams (give --team and --cluster, or the form's team and cluster)"
        )
    require_member(registry, actor, team)
    if not PERF_CLUSTER.match(cluster):
        raise Refused(
            f"target.cluster: {team}/{cluster} is not a perf cluster; a team's experiments run on its clusters named "
            "perf, perf-* or *-perf (odin cluster create --team TEAM --name perf)"
        )
    record = registry.cluster(team, cluster)
    if record is None or record.state != "ready" or record.environment != book.target.environment:
        raise Refused(
            f"target.cluster: {team}/{cluster} is not a ready cluster of environment {book.target.environment} "
            "(odin cluster list)"
        )
    for i, c in enumerate(book.load.consumers):
        spec_team = (c.spec or {}).get("team")
        if spec_team is not None and spec_team not in (team, "${team}"):
            raise Refused(f"load.consumers.{i}.spec.team: {spec_team!r}: a run of team {team} runs its own daggers")
    data = book.model_dump(mode="json")
    data["blast_radius"] = team_radius(team, cluster)
    return parse(data)


def may_halt(registry: Registry, actor: str, team: str | None) -> bool:
    """A run may be halted by a platform engineer or a member of its target team."""
    return is_platform_engineer(registry, actor) or (team is not None and team in registry.teams_of(actor))
