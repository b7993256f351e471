"""Orders, their audit log and the synchronization outbox.

Revision ID: 0001
Revises:
Create Date: 2025-11-22
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _amount_type() -> sa.types.TypeEngine[Any]:
    # Exact on both backends; see storage.ExactDecimal, which reads and writes these.
    if op.get_bind().dialect.name == "postgresql":
        return sa.Numeric()
    return sa.String(80)


def upgrade() -> None:
    op.create_table(
        "orders",
        sa.Column("order_id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("product_name", sa.Text(), nullable=False),
        sa.Column("amount", _amount_type(), nullable=False),
        sa.Column("create_time", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "order_audit_log",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("order_id", sa.String(36), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("product_name", sa.Text(), nullable=False),
        sa.Column("amount", _amount_type(), nullable=False),
        sa.Column("create_time", sa.DateTime(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_order_audit_log_order_id", "order_audit_log", ["order_id"])
    op.create_table(
        "order_sync_outbox",
        sa.Column("order_id", sa.String(36), primary_key=True),
        sa.Column("synchronized_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("order_sync_outbox")
    op.drop_index("ix_order_audit_log_order_id", table_name="order_audit_log")
    op.drop_table("order_audit_log")
    op.drop_table("orders")
