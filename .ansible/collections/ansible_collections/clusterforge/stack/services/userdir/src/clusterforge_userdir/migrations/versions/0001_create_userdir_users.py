"""Create the users table with case-insensitive unique usernames.

Revision ID: 0001
Revises:
Create Date: 2025-01-01 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "userdir_users",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("nickname", sa.String(64), nullable=True),
        sa.Column("mobile", sa.String(16), nullable=True),
        sa.Column("status", sa.SmallInteger, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=False), nullable=False),
    )
    # "Alice" and "alice" are the same user: uniqueness is enforced by the database so
    # concurrent creates cannot both win.
    op.create_index(
        "uq_userdir_users_username_lower",
        "userdir_users",
        [sa.text("lower(username)")],
        unique=True,
    )
    op.create_index("ix_userdir_users_created_at", "userdir_users", ["created_at"])
    op.create_index("ix_userdir_users_status", "userdir_users", ["status"])


def downgrade() -> None:
    op.drop_table("userdir_users")
