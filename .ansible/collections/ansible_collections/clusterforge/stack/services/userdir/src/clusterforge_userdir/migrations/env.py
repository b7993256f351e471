"""Alembic environment: always handed an open connection by ``migrate.upgrade_database``."""

from __future__ import annotations

from alembic import context

from clusterforge_userdir.migrate import VERSION_TABLE
from clusterforge_userdir.storage import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table=VERSION_TABLE,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
