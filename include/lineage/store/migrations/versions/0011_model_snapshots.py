"""``lineage_model_snapshots``: Marquez's model as of a stored event (queries/model_snapshot.py), so that a process
starting on a large store replays only the events stored since. Nothing to fill: the first process that builds the
model writes the first snapshot.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28

Written out here, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lineage_model_snapshots",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("format", sa.Integer(), nullable=False),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("last_event_id", sa.Integer(), nullable=False),
        sa.Column("taken_at", sa.String(length=32), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("lineage_model_snapshots")  # a cache: every snapshot can be made again from the events
