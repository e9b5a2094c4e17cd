"""``lineage_rejected_lines``: the event files' lines the follower could not store, kept instead of stopping it;
``lineage_file_cursors.read_lines``: how many lines a cursor is past, so a bad line is named by its number.

A cursor written before it has no line count (null): the follower names a bad line past it by its byte offset until
the file is read again from its start.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27

Written out here, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lineage_rejected_lines",
        sa.Column("path", sa.String(length=1024), nullable=False),
        sa.Column("byte_offset", sa.BigInteger(), nullable=False),
        sa.Column("line_sha256", sa.String(length=64), nullable=False),
        sa.Column("line_number", sa.BigInteger(), nullable=True),
        sa.Column("length", sa.BigInteger(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("rejected_at", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("path", "byte_offset", "line_sha256"),
    )
    with op.batch_alter_table("lineage_file_cursors", schema=None) as batch_op:
        batch_op.add_column(sa.Column("read_lines", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("lineage_file_cursors", schema=None) as batch_op:
        batch_op.drop_column("read_lines")
    op.drop_table("lineage_rejected_lines")
