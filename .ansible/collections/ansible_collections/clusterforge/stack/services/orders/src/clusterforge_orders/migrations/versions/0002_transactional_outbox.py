"""The transactional outbox: delivery state per order, and every existing order queued.

Revision 0001's ``order_sync_outbox`` only said that a listener had run; nothing was
delivered anywhere, so its rows carry no information worth keeping. The table is
rebuilt with the delivery state, and every order already stored gets an undelivered row,
so the first start with a delivery target indexes the orders taken before the upgrade.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_UNDELIVERED = sa.text("delivered_at IS NULL")


def upgrade() -> None:
    op.drop_table("order_sync_outbox")
    op.create_table(
        "order_sync_outbox",
        sa.Column("order_id", sa.String(36), primary_key=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("delivered_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
    )
    # The relay's one query: due rows among the undelivered. A partial index stays as
    # small as the backlog, however many orders were delivered.
    op.create_index(
        "ix_order_sync_outbox_undelivered",
        "order_sync_outbox",
        ["next_attempt_at"],
        sqlite_where=_UNDELIVERED,
        postgresql_where=_UNDELIVERED,
    )
    op.execute(
        "INSERT INTO order_sync_outbox (order_id, created_at, attempts, next_attempt_at) "
        "SELECT order_id, create_time, 0, create_time FROM orders"
    )


def downgrade() -> None:
    op.drop_index("ix_order_sync_outbox_undelivered", table_name="order_sync_outbox")
    op.drop_table("order_sync_outbox")
    op.create_table(
        "order_sync_outbox",
        sa.Column("order_id", sa.String(36), primary_key=True),
        sa.Column("synchronized_at", sa.DateTime(), nullable=False),
    )
