"""``lineage_events.marquez``: what Marquez's model reads of each event (its job, run, type and datasets with their
symlinks), written at ingest, so that ``GET /api/v1/lineage`` rebuilds the model from a few hundred bytes an event
instead of parsing every payload. Existing rows keep it null and are read from their payload, as before: filling it
here would parse every stored event inside the migration.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28

Written out here, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("lineage_events") as batch:
        batch.add_column(sa.Column("marquez", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("lineage_events") as batch:
        batch.drop_column("marquez")
