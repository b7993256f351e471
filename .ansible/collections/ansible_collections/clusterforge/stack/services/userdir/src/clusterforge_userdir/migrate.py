"""Versioned schema: Alembic migrations shipped inside the package, run programmatically.

No ``alembic.ini`` is needed at run time; the service upgrades its database to the newest
revision before it accepts requests.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

MIGRATIONS_DIRECTORY = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "userdir_alembic_version"
# Any fixed number: instances starting together on one PostgreSQL take turns migrating.
_POSTGRES_MIGRATION_LOCK = 0x75736572


def _alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIRECTORY))
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIRECTORY}")
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()


def upgrade_database(engine: Engine, *, revision: str = "head") -> None:
    """Bring the schema to ``revision``; a no-op when it is there already."""
    config = _alembic_config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _POSTGRES_MIGRATION_LOCK}
            )
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade_database(engine: Engine, *, revision: str) -> None:
    config = _alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
