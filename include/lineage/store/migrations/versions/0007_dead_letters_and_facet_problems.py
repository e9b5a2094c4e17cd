"""``lineage_dead_letters``: what ``lineage serve`` refused, kept with why (``lineage rejected``, ``--replay``);
``lineage_facet_problems`` and ``lineage_events.received``/``problems``: an accepted event kept as received, with what
the OpenLineage spec refuses in it (an invalid facet is kept, named and not read).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

Written out here, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lineage_dead_letters",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("received_at", sa.String(length=32), nullable=False),
        sa.Column("last_received_at", sa.String(length=32), nullable=False),
        sa.Column("times", sa.Integer(), nullable=False),
        sa.Column("endpoint", sa.String(length=64), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("client", sa.String(length=255), nullable=True),
        sa.Column("length", sa.BigInteger(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("replayed_at", sa.String(length=32), nullable=True),
        sa.Column("replay_outcome", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("sha256"),
    )
    op.create_table(
        "lineage_facet_problems",
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("path", sa.String(length=1024), nullable=False),
        sa.Column("facet", sa.String(length=255), nullable=True),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("event_time", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("event_id", "path"),
    )
    with op.batch_alter_table("lineage_facet_problems", schema=None) as batch_op:
        batch_op.create_index("ix_lineage_facet_problems_node", ["node_id", "event_time"], unique=False)
    with op.batch_alter_table("lineage_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("received", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("problems", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("lineage_events", schema=None) as batch_op:
        batch_op.drop_column("problems")
        batch_op.drop_column("received")
    with op.batch_alter_table("lineage_facet_problems", schema=None) as batch_op:
        batch_op.drop_index("ix_lineage_facet_problems_node")
    op.drop_table("lineage_facet_problems")
    op.drop_table("lineage_dead_letters")
