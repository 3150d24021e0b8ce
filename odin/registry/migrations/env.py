"""Alembic's environment for the platform registry: always run from odin.registry.migrate, which hands over an
open connection (there is no alembic.ini: the URL comes from the environment Odin provisioned)."""

from __future__ import annotations

from alembic import context

from odin.registry.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, compare_type=True, transaction_per_migration=True)
with context.begin_transaction():
    context.run_migrations()
