"""The registry's migrations (Alembic, in odin/registry/migrations): `odin up` runs `upgrade` after PostgreSQL is
up; `odin registry migrate` does it by hand. Creates the database first if the server lacks it."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, make_url, text

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


def ensure_database(url: str) -> None:
    """CREATE DATABASE, through the server's `postgres` database, if the URL's database does not exist."""
    target = make_url(url)
    admin = create_engine(target.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            exists = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": target.database})
            if exists.first() is None:
                conn.execute(text(f'CREATE DATABASE "{target.database}"'))
    finally:
        admin.dispose()


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
