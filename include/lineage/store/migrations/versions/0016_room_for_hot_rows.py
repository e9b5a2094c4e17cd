"""PostgreSQL only: jobs' and datasets' pages filled to 30 %, so that the new version of a row that every
transaction rewrites fits beside the old one (a HOT update, pruned in place) instead of growing the table: the 10^5
year left 1,200 jobs in 40 MB of pages (1.3 MB with room), read whole by each draw of the page. The tables are
rewritten once here (``CLUSTER`` by their key, which runs inside the migration's transaction where ``VACUUM FULL``
cannot): a store's jobs and datasets are thousands of rows. SQLite updates a row in place: nothing to do there.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29

Written out here, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

POSTGRESQL_ONLY = True  # tests/unit/test_store_migrations.py: its shape on SQLite does not change
FILLFACTOR = 30
TABLES = ("lineage_jobs", "lineage_datasets")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} SET (fillfactor = {FILLFACTOR})")
        op.execute(f"CLUSTER {table} USING {table}_pkey")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} RESET (fillfactor)")
