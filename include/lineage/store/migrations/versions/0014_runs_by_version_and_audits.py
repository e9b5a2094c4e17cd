"""Two reads of a year's store that grew with its history, found on a store of 6.4 x 10^6 events:

- ``ix_lineage_runs_version_start``: (job version, when the run started, run id), in place of 0013's index of the job
  version alone. An impact's runs are the runs of the job versions that read the impacted data, counted and the
  newest listed from this index (they were found through every run's own input rows: two minutes for a hub read by
  a million runs). 0013's question (does any run still have this version) is a seek on its first column.
- ``lineage_run_audits``: a row for each run whose facets hold a ``writeAuditPublish`` facet the project could have
  written, so that the page reads the blocked audits and their tables' audits, not every run's facets (34 s). Filled
  here from the runs' facets, by the rule of ``store/run_audits.py`` as it stands on this revision's day.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29

Written out here, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

FACET = "writeAuditPublish"
TABLE_LIMIT = 1024
PAGE = 1000


def upgrade() -> None:
    op.create_index(
        "ix_lineage_runs_version_start",
        "lineage_runs",
        [
            sa.text("job_version_id"),
            sa.text("coalesce(started_at, first_event_time, state_time)"),
            sa.text("id"),
        ],
    )
    op.drop_index("ix_lineage_runs_job_version_id", table_name="lineage_runs")
    audits = op.create_table(
        "lineage_run_audits",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("table_name", sa.String(1024), nullable=False),
        sa.Column("branch", sa.Text),
        sa.Column("published", sa.Boolean, nullable=False),
        sa.Column("facet", sa.Text, nullable=False),
    )
    op.create_index("ix_lineage_run_audits_published_table", "lineage_run_audits", ["published", "table_name"])
    op.create_index("ix_lineage_run_audits_table", "lineage_run_audits", ["table_name"])
    _fill(op.get_bind(), audits)


def _fill(conn, audits) -> None:
    """A row for each run whose facets hold an audit facet: a table named by a non-empty text of at most 1,024
    characters. Facets that are not JSON are left out (the page skipped them too)."""
    # streamed (a server-side cursor on PostgreSQL): a year's store has hundreds of thousands of audits
    # (the statement's option: a connection's own would outlive this query and stream Alembic's statements too)
    runs = conn.execute(
        sa.text("""SELECT id, facets FROM lineage_runs WHERE facets LIKE '%"writeAuditPublish"%'""").execution_options(
            stream_results=True, yield_per=PAGE
        )
    )
    rows = []
    for run_id, facets in runs:
        try:
            facet = json.loads(facets).get(FACET)
        except (ValueError, AttributeError):
            continue
        if not isinstance(facet, dict):
            continue
        table = facet.get("table")
        if not isinstance(table, str) or not table or len(table) > TABLE_LIMIT:
            continue
        branch = facet.get("branch")
        rows.append(
            {
                "run_id": run_id,
                "table_name": table,
                "branch": None if branch is None else str(branch),
                "published": facet.get("published") is True,
                "facet": json.dumps(facet, sort_keys=True, separators=(",", ":"), ensure_ascii=False),
            }
        )
        if len(rows) == PAGE:
            op.bulk_insert(audits, rows)
            rows = []
    if rows:
        op.bulk_insert(audits, rows)


def downgrade() -> None:
    op.drop_table("lineage_run_audits")
    op.create_index("ix_lineage_runs_job_version_id", "lineage_runs", ["job_version_id"])
    op.drop_index("ix_lineage_runs_version_start", table_name="lineage_runs")
