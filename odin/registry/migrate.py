"""The registry's migrations (Alembic, in odin/registry/migrations): `odin up` runs `upgrade` after PostgreSQL is
up; `odin registry migrate` does it by hand. Migrations run as the registry's own role, which owns its database;
creating that database is the administrator's (ensure_database)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, make_url

from odin import pg_roles

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head() -> str:
    """The newest revision this code knows."""
    revision = ScriptDirectory.from_config(_config()).get_current_head()
    assert revision is not None, f"no migrations in {MIGRATIONS}"
    return revision


def current(engine: Engine) -> str | None:
    """The revision the database is at (None: never migrated)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def ensure_database(url: str, admin: str) -> None:
    """The URL's database, owned by the URL's role and private to it, created on the administrator's connection
    (libpq conninfo, Endpoints.postgres_admin) if the server lacks it: the registry's role may not create databases."""
    target = make_url(url)
    assert target.database and target.username, f"{target.render_as_string(hide_password=True)}: no database or role"
    with pg_roles.admin_connect(admin) as conn:
        pg_roles.ensure_database(conn, target.database, target.username)


def upgrade(engine: Engine, revision: str = "head") -> str:
    """Migrate to `revision` (default: the newest); returns the revision the database is at."""
    cfg = _config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    now = current(engine)
    assert now is not None
    return now


def downgrade(engine: Engine, revision: str) -> str | None:
    cfg = _config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
    return current(engine)
