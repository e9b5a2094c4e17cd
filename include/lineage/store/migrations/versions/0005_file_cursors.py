"""``lineage_file_cursors``: how far each event file under ``var/lineage/`` has been read into the store.

A store made before it has no cursor, so the first follower of each file reads it whole once (ingest is
idempotent: nothing is stored twice) and records where it stopped.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26

Written out here, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lineage_file_cursors",
        sa.Column("path", sa.String(length=1024), nullable=False),
        sa.Column("read_bytes", sa.BigInteger(), nullable=False),
        sa.Column("head_sha256", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("path"),
    )


def downgrade() -> None:
    op.drop_table("lineage_file_cursors")
