"""The registry's migrations (Alembic, in odin/registry/migrations): `odin up` runs `upgrade` after PostgreSQL is
up; `odin registry migrate` does it by hand. Migrations run as the registry's own role, which owns its database;
creating that database is the administrator's (ensure_database).

Every process that opens the registry checks its revision (`head` against `current`): both are read without loading
Alembic, which only a migration needs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, make_url, text

from odin import pg_roles

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "alembic_version"  # Alembic's default, where it keeps the revision a database is at


def _config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head() -> str:
    """The newest revision this code knows: scripts are named `<revision>_<what>.py` and numbered in order, each
    revising the one before (tests/test_registry.py checks this against Alembic's own graph)."""
    revisions = [p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9]*_*.py")]
    assert revisions, f"no migrations in {MIGRATIONS}"
    return max(revisions)


def current(engine: Engine) -> str | None:
    """The revision the database is at (None: never migrated)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table(VERSION_TABLE):
            return None
        return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def ensure_database(url: str, admin: str) -> None:
    """The URL's database, owned by the URL's role and private to it, created on the administrator's connection
    (libpq conninfo, Endpoints.postgres_admin) if the server lacks it: the registry's role may not create databases."""
    target = make_url(url)
    assert target.database and target.username, f"{target.render_as_string(hide_password=True)}: no database or role"
    with pg_roles.admin_connect(admin) as conn:
        pg_roles.ensure_database(conn, target.database, target.username)


def upgrade(engine: Engine, revision: str = "head") -> str:
    """Migrate to `revision` (default: the newest); returns the revision the database is at."""
    from alembic import command

    cfg = _config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    now = current(engine)
    assert now is not None
    return now


def downgrade(engine: Engine, revision: str) -> str | None:
    from alembic import command

    cfg = _config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
    return current(engine)
