"""``ix_lineage_runs_job_start``: (job, when the run started, run id), the expression the queries order a job's runs
by, so a job's latest run started by an instant is one index seek instead of a read of every run of the job.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28

Written out here, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_lineage_runs_job_start",
        "lineage_runs",
        [
            sa.text("job_id"),
            sa.text("coalesce(started_at, first_event_time, state_time)"),
            sa.text("id"),
        ],
    )


def downgrade() -> None:
    op.drop_index("ix_lineage_runs_job_start", table_name="lineage_runs")
