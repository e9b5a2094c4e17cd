"""Two indexes the ingest path's reads lacked: a node's aliases by ``node_id`` (read once per node a transaction
touches) and the runs of a job version (asked when a run leaves a version a partial event gave it). Both were scans
of the whole table, which grows with history.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29

Written out here, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_lineage_node_aliases_node", "lineage_node_aliases", ["node_id"])
    op.create_index("ix_lineage_runs_job_version_id", "lineage_runs", ["job_version_id"])


def downgrade() -> None:
    op.drop_index("ix_lineage_runs_job_version_id", table_name="lineage_runs")
    op.drop_index("ix_lineage_node_aliases_node", table_name="lineage_node_aliases")
