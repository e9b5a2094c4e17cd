"""``lineage_ancestry``: each node's ancestors from ``lineage_closure`` packed into one blob, for the upstream read.

The blob's format is ``include/lineage/store/ancestry.py``'s (little-endian 64-bit ``ancestor, depth`` pairs ordered
by (depth, ancestor)); it is written out again here, not imported, so that this revision keeps describing its own
moment. Filled from the closure rows of every node.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24

Written out by hand, never from the live ``schema.metadata``.
"""

from __future__ import annotations

import itertools
import struct

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_BATCH = 500


def upgrade() -> None:
    ancestry = op.create_table(
        "lineage_ancestry",
        sa.Column("descendant", sa.Integer, nullable=False),
        sa.Column("packed", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("descendant"),
    )
    # one descendant's rows at a time, written in batches: a store's closure can hold millions of rows
    closure = op.get_bind().execute(
        sa.text("SELECT descendant, ancestor, depth FROM lineage_closure ORDER BY descendant")
    )
    batch = []
    for node, rows in itertools.groupby(closure, key=lambda row: row[0]):
        batch.append({"descendant": node, "packed": _pack([(ancestor, depth) for _, ancestor, depth in rows])})
        if len(batch) == _BATCH:
            op.bulk_insert(ancestry, batch)
            batch = []
    if batch:
        op.bulk_insert(ancestry, batch)


def downgrade() -> None:
    op.drop_table("lineage_ancestry")


def _pack(pairs: list[tuple[int, int]]) -> bytes:
    ordered = sorted(pairs, key=lambda pair: (pair[1], pair[0]))
    return struct.pack(f"<{2 * len(ordered)}q", *(value for pair in ordered for value in pair))
