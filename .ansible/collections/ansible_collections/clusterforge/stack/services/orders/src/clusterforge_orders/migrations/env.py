"""Alembic environment: runs on the connection that ``Database.migrate`` hands over."""

from __future__ import annotations

from alembic import context

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "the order service's migrations run through Database.migrate(), which passes "
        "a connection; they have no alembic.ini of their own"
    )

context.configure(
    connection=connection,
    target_metadata=None,
    version_table=config.get_main_option("version_table") or "alembic_version",
)
with context.begin_transaction():
    context.run_migrations()
