"""Who may reach what on the stack's real PostgreSQL (issue 28, section 1): every TCP login needs a password
(scram-sha-256), a team's role enters its own database only and administers nothing, the registry and Airflow
work on roles of their own, and no password is anywhere but its 0600 file."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql

from odin import pg_roles
from odin.endpoints import AIRFLOW_ROLE, PG_SUPERUSER, REGISTRY_ROLE, SANDBOX_ROLE
from odin.registry import Registry, migrate
from odin.teams.databases import PASSWORD_ENV, ensure_team_database, pg_name, team_database
from odin.teams.secrets import TeamSecrets
from tests.support.services import Services, TeamDb

NO_PASSFILE = "/nonexistent/pgpass"  # so no ~/.pgpass of whoever runs the tests answers for them


def _connect(services: Services, user: str, dbname: str, **kw: Any) -> psycopg.Connection[Any]:
    host, port = services.postgres_address.split(":")
    return psycopg.connect(host=host, port=port, user=user, dbname=dbname, connect_timeout=10, **kw)


def _refused(services: Services, user: str, dbname: str, **kw: Any) -> str:
    with pytest.raises(psycopg.OperationalError) as caught:
        _connect(services, user, dbname, **kw).close()
    return str(caught.value)


@pytest.fixture
def other_team(services: Services) -> Iterator[TeamDb]:
    assert services.stack is not None
    team, secrets = f"t{uuid.uuid4().hex[:8]}", TeamSecrets(services.stack.state_dir)
    db = ensure_team_database(services, secrets, team)
    yield TeamDb(team, db.dsn, db.password_env, secrets.load(team)[db.password_env])
    with pg_roles.admin_connect(services.postgres_admin) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(pg_name(team))))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(pg_name(team))))


def test_a_tcp_login_without_password_is_refused(services: Services, team_db: TeamDb) -> None:
    """No `trust` for TCP: not for the superuser (never over TCP, even with a password), a platform role or a team."""
    assert "rejects connection" in _refused(services, PG_SUPERUSER, "postgres", passfile=NO_PASSFILE)
    assert "rejects connection" in _refused(services, PG_SUPERUSER, "postgres", password="anything")
    for user, db in ((REGISTRY_ROLE, "registry"), (AIRFLOW_ROLE, "airflow"), (pg_name(team_db.team),) * 2):
        assert "no password supplied" in _refused(services, user, db, passfile=NO_PASSFILE)
        assert "password authentication failed" in _refused(services, user, db, password="wrong")
    hba = (Path(services._node("postgres")["dirs"]["data"]) / "pg_hba.conf").read_text()
    assert "trust" not in hba.split("# TYPE", 1)[1] and "scram-sha-256" in hba


def test_a_team_role_enters_its_own_database_only(services: Services, team_db: TeamDb, other_team: TeamDb) -> None:
    with team_db.connect() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS mine (id int PRIMARY KEY)")  # its own database: it owns `public`
        conn.execute("INSERT INTO mine VALUES (1) ON CONFLICT DO NOTHING")
        assert conn.execute("SELECT count(*) FROM mine").fetchone() == (1,)
        rights = conn.execute(
            "SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls FROM pg_roles "
            "WHERE rolname = current_user"
        ).fetchone()
        assert rights == (False, False, False, False, False)
        conn.commit()
        conn.autocommit = True  # CREATE DATABASE may only be tried outside a transaction
        # nothing that administers the server, reads its files or becomes another role
        for statement in (
            "CREATE ROLE intruder LOGIN PASSWORD 'x'",
            f"ALTER ROLE {pg_name(team_db.team)} SUPERUSER",
            f"CREATE DATABASE {pg_name(team_db.team)}_2",
            f"SET ROLE {REGISTRY_ROLE}",
            f"GRANT pg_read_all_data TO {pg_name(team_db.team)}",
            "SELECT pg_read_file('/etc/hostname')",
            "COPY mine TO '/tmp/daggers-copy-out'",
            "SELECT rolpassword FROM pg_authid",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)
    user, password = pg_name(team_db.team), team_db.password
    for database in ("registry", "airflow", "daggers", "postgres", "template1", pg_name(other_team.team)):
        message = _refused(services, user, database, password=password)
        assert f'permission denied for database "{database}"' in message, message
    # and the other team's password opens the other team's database, not this one
    assert "password authentication failed" in _refused(services, user, user, password=other_team.password)


def test_the_registry_airflow_and_sandbox_work_on_roles_of_their_own(services: Services, team_db: TeamDb) -> None:
    registry = Registry.connect(services.registry_url)  # the URL names a password file, never a password
    try:
        assert registry.engine.url.username == REGISTRY_ROLE and registry.engine.url.password is None
        assert migrate.current(registry.engine) == migrate.head()
        registry.ensure_team(team_db.team)
        assert team_db.team in registry.teams()
    finally:
        registry.close()
    passfiles = {role: services.postgres_passfile(role) for role in (REGISTRY_ROLE, AIRFLOW_ROLE, SANDBOX_ROLE)}
    with _connect(services, AIRFLOW_ROLE, "airflow", passfile=passfiles[AIRFLOW_ROLE]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS airflow_probe (id int)")  # Airflow migrates its own metadata
        conn.execute("DROP TABLE airflow_probe")
    with psycopg.connect(services.postgres_dsn) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (SANDBOX_ROLE,)
    # none of them reaches another's database, nor a team's
    for role, database in (
        (REGISTRY_ROLE, "airflow"),
        (AIRFLOW_ROLE, "registry"),
        (SANDBOX_ROLE, "registry"),
        (REGISTRY_ROLE, pg_name(team_db.team)),
    ):
        message = _refused(services, role, database, passfile=passfiles[role])
        assert f'permission denied for database "{database}"' in message, message
    with pg_roles.admin_connect(services.postgres_admin) as conn:
        rows = conn.execute(
            "SELECT rolname, rolsuper OR rolcreatedb OR rolcreaterole, rolpassword LIKE 'SCRAM-SHA-256$%%' "
            "FROM pg_authid WHERE rolname = ANY(%s) ORDER BY rolname",
            ([*passfiles, pg_name(team_db.team)],),
        ).fetchall()
    assert len(rows) == 4 and all(not extra and scram for _, extra, scram in rows), rows


def test_passwords_are_in_0600_files_only(services: Services, team_db: TeamDb) -> None:
    assert services.stack is not None
    state = services.stack.state_dir
    secrets_dir = services.postgres_passfile(REGISTRY_ROLE).parent
    assert secrets_dir.stat().st_mode & 0o777 == 0o700
    passwords = {team_db.password}
    for role in (REGISTRY_ROLE, AIRFLOW_ROLE, SANDBOX_ROLE):
        passfile = services.postgres_passfile(role)
        assert passfile.stat().st_mode & 0o777 == 0o600
        password = pg_roles.read_passfile(passfile)
        assert password is not None and len(password) >= 40
        passwords.add(password)
    assert TeamSecrets(state).path(team_db.team).stat().st_mode & 0o777 == 0o600
    # not in any log, Ansible's records of its runs or configuration file of the stack
    for path in state.rglob("*"):
        if not path.is_file() or path.parent == secrets_dir or path.name == "secrets.json" or "pgdata" in path.parts:
            continue
        text = path.read_bytes()
        assert not any(p.encode() in text for p in passwords), f"a password is in {path}"
    # nor on any process's command line (a URL would put it there), nor in a service's environment (PGPASSWORD)
    daemons = {int(f.read_text().split()[0]) for f in (state / "run").glob("*.pid")}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                seen = (proc / "cmdline").read_bytes()
                seen += (proc / "environ").read_bytes() if int(proc.name) in daemons else b""
            except OSError:
                continue
            assert not any(p.encode() in seen for p in passwords), f"a password is in process {proc.name}'s"


def test_team_databases_are_idempotent_made_on_first_use_and_rotate(services: Services) -> None:
    """A team the registry had before its database (Registry.ensure_team alone) gets one when first resolved; a new
    value of its secret becomes the role's password."""
    assert services.stack is not None
    state, team = services.stack.state_dir, f"t{uuid.uuid4().hex[:8]}"
    registry = Registry.connect(services.registry_url)
    try:
        registry.ensure_team(team)
    finally:
        registry.close()
    secrets = TeamSecrets(state)
    assert PASSWORD_ENV not in secrets.names(team)
    first = team_database(team, state)
    assert first.dsn == f"postgresql://{pg_name(team)}@{services.postgres_address}/{pg_name(team)}"
    assert first.password_env == PASSWORD_ENV and "password" not in first.dsn
    password = secrets.load(team)[PASSWORD_ENV]
    with pg_roles.admin_connect(services.postgres_admin) as conn:
        assert pg_roles.ensure_role(conn, pg_name(team), password, 32) == []  # as made: nothing to change
        assert pg_roles.ensure_database(conn, pg_name(team), pg_name(team)) == []
    assert team_database(team, state) == first
    psycopg.connect(first.dsn, password=password).close()
    secrets.set(team, PASSWORD_ENV, "a-new-password-from-odin-secret-set")
    team_database(team, state)
    psycopg.connect(first.dsn, password="a-new-password-from-odin-secret-set").close()
    assert "password authentication failed" in _refused(services, pg_name(team), pg_name(team), password=password)


def test_databases_made_by_the_superuser_are_handed_to_their_role(services: Services) -> None:
    """A stack made before the platform roles: its databases and objects belonged to `postgres`."""
    name = f"adopt_{uuid.uuid4().hex[:8]}"
    with pg_roles.admin_connect(services.postgres_admin) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            with pg_roles.admin_connect(services.postgres_admin, name) as db:
                db.execute("CREATE TYPE mood AS ENUM ('ok', 'not')")
                db.execute("CREATE TABLE t (id serial PRIMARY KEY, m mood, i int GENERATED ALWAYS AS IDENTITY)")
                db.execute("CREATE VIEW v AS SELECT id FROM t")
                db.execute("CREATE SEQUENCE free_standing")
            assert pg_roles.ensure_database(conn, name, SANDBOX_ROLE) == [
                f"database {name}: owner {SANDBOX_ROLE}",
                f"database {name}: private to its owner",
            ]
            with pg_roles.admin_connect(services.postgres_admin, name) as db:
                assert pg_roles.adopt(db, SANDBOX_ROLE) == [f"4 object(s) now owned by {SANDBOX_ROLE}"]
                assert pg_roles.adopt(db, SANDBOX_ROLE) == []
                owners = db.execute(
                    "SELECT DISTINCT pg_get_userbyid(relowner) FROM pg_class c JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
                ).fetchall()
                assert owners == [(SANDBOX_ROLE,)]
        finally:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_scram_verifier_is_postgresqls() -> None:
    """A unit test of the verifier's arithmetic (the tests above log in with it on the real server)."""
    verifier = pg_roles.scram_verifier("pencil", salt=b"0123456789abcdef")
    assert verifier.startswith("SCRAM-SHA-256$4096:MDEyMzQ1Njc4OWFiY2RlZg==$")
    assert pg_roles.verifies(verifier, "pencil") and not pg_roles.verifies(verifier, "pencil2")
    assert not pg_roles.verifies(None, "pencil") and not pg_roles.verifies("md5abc", "pencil")
