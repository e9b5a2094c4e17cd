"""``lineage_store_state``: one row whose ``events_deleted`` whatever deletes events moves (``lineage prune``), so
that a reader keeping what it read of the events (Marquez's model, the page's audits) tells they changed from the
newest id and this counter instead of counting every event before each answer (store/change_key.py).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28

Written out here, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    state = op.create_table(
        "lineage_store_state",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("events_deleted", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.bulk_insert(state, [{"id": 1, "events_deleted": 0}])


def downgrade() -> None:
    op.drop_table("lineage_store_state")
