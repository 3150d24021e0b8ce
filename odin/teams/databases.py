"""Each team's PostgreSQL database: what a dagger's `postgres` sink `target` resolves to on the platform.

A team gets one login role and one database it owns, which only that role may connect to (odin/pg_roles.py: no
CREATEDB, CREATEROLE or superuser; every database private to its owner), so a team's dagger cannot reach the
registry, Airflow's metadata or another team's tables. The role's password is one of the team's secrets
(PASSWORD_ENV, odin/teams/secrets.py), which its deployed drivers get as an environment variable: a DSN never
carries it. Made by `odin team add`; a team made before (or by `Registry.ensure_team` alone) gets its database the
first time it is resolved. Setting the secret to a new value (`odin secret set TEAM DAGGERS_PG_PASSWORD`) and
resolving again rotates the password.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from odin import pg_roles
from odin.endpoints import Endpoints
from odin.environment import nodes
from odin.paths import default_state_dir
from odin.teams.secrets import TeamSecrets

PASSWORD_ENV = "DAGGERS_PG_PASSWORD"
CONNECTION_LIMIT = 32  # per team: one team's daggers cannot take every connection of the server (100)
MAX_IDENTIFIER = 63  # PostgreSQL truncates longer names silently: two long team names could meet


@dataclass(frozen=True)
class TeamDatabase:
    dsn: str  # libpq URL without a password
    password_env: str  # the team's secret, and its drivers' environment variable, holding the password


def pg_name(team: str) -> str:
    """The team's role and database name: `team_` and the team's name (a slug; `-` → `_`, which slugs lack, so
    names stay distinct), shortened with a digest past PostgreSQL's identifier length."""
    name = "team_" + team.replace("-", "_")
    if len(name) <= MAX_IDENTIFIER:
        return name
    return f"{name[: MAX_IDENTIFIER - 9]}_{hashlib.sha256(team.encode()).hexdigest()[:8]}"


def ensure_team_database(where: Endpoints, secrets: TeamSecrets, team: str) -> TeamDatabase:
    """Create or bring up to date the team's role, password and database; idempotent, and safe to run from several
    processes at once (an advisory lock serialises them)."""
    name = pg_name(team)
    with pg_roles.admin_connect(where.postgres_admin) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"odin.team_database.{team}",))
        password = secrets.load(team).get(PASSWORD_ENV)
        if password is None:  # read again under the lock: another process may just have made it
            password = pg_roles.new_password()
            secrets.set(team, PASSWORD_ENV, password)
        pg_roles.ensure_role(conn, name, password, CONNECTION_LIMIT)
        pg_roles.ensure_database(conn, name, name)
    return team_database_at(where, team)


def team_database_at(where: Endpoints, team: str) -> TeamDatabase:
    """Where the team's database is (nothing is made: a request is checked against this before anything is)."""
    name = pg_name(team)
    return TeamDatabase(f"postgresql://{name}@{where.postgres_address}/{name}", PASSWORD_ENV)


def team_database(team: str, state_dir: Path | None = None, environment: str = "local") -> TeamDatabase:
    """The team's database in an Odin environment (what the deploy path resolves a `postgres` sink's `target`
    with), made first if the team has none yet. LookupError if the environment has no PostgreSQL."""
    state_dir = state_dir or default_state_dir()
    return ensure_team_database(Endpoints(nodes(environment, state_dir)), TeamSecrets(state_dir), team)
