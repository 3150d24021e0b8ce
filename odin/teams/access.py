"""Who may do what, from the registry's teams: platform engineers (team `platform`) provision clusters; a team's
members deploy to and stop daggers on that team's clusters only. Checked before anything is touched."""

from __future__ import annotations

from odin.registry import Refused, Registry

PLATFORM_TEAM = "platform"


def require_platform_engineer(registry: Registry, user: str | None) -> str:
    if not user:
        raise Refused("no triggering user: runs that change clusters must be triggered by a person or an API user")
    if user not in registry.members(PLATFORM_TEAM):
        raise Refused(
            f"{user} is not a platform engineer (a member of team {PLATFORM_TEAM}): ask one, or have them run "
            f"`odin team add {PLATFORM_TEAM} --member {user}`"
        )
    return user


def require_member(registry: Registry, user: str | None, team: str) -> str:
    if not user:
        raise Refused(f"no triggering user: only members of team {team} may act on its daggers")
    if team not in registry.teams():
        raise Refused(f"team {team!r} is not in the registry (odin team list)")
    if team not in registry.teams_of(user) and user not in registry.members(PLATFORM_TEAM):
        raise Refused(
            f"{user} is not a member of team {team}: only its members may act on its clusters and daggers; a platform "
            f"engineer adds you: `odin team add {team} --member {user}`"
        )
    return user


def visible_teams(registry: Registry, user: str | None, team: str | None = None) -> list[str] | None:
    """The teams whose daggers, SQL and history `user` may see: `team` if a member (or a platform engineer), else
    all of theirs; None: every team (platform engineers)."""
    if team:
        require_member(registry, user, team)
        return [team]
    if user and user in registry.members(PLATFORM_TEAM):
        return None
    return sorted(registry.teams_of(user)) if user else []


def once(registry: Registry, subject: str, action: str, user: str | None, run_id: str | None) -> None:
    """A destructive request is carried out once per Airflow run: a cleared task re-runs as the run's original
    user, so a re-run is refused (whoever cleared it) and the user triggers a new run to ask again. The marker is
    the registry's history, which no Airflow user can change."""
    if not run_id:
        return
    done = [e for e in registry.history(subject, limit=500) if e.detail.get("airflow_run") == run_id
            and e.detail.get("request") == action]  # fmt: skip
    marker = {"airflow_run": run_id, "request": action}
    if done:
        reason = (f"run {run_id} already asked for {action} of {subject} (by {done[-1].actor}); a re-run is refused: "
                  "trigger a new run to ask again")  # fmt: skip
        registry.record(user or "?", action, subject, "refused", reason, marker)
        raise Refused(reason)
    registry.record(user or "?", "airflow_request", subject, "ok", f"{action} for run {run_id}", marker)
