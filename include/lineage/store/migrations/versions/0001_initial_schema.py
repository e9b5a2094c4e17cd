"""The lineage store's tables as releases before migrations made them (``metadata.create_all``).

A store without a version table whose tables are these is stamped at this revision, then upgraded.

Revision ID: 0001
Revises:
Create Date: 2026-11-23

Written out by hand, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lineage_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("dedup_key", sa.String(255), nullable=False, unique=True),
        sa.Column("run_id", sa.String(64)),
        sa.Column("event_type", sa.String(16)),
        sa.Column("event_time", sa.String(32)),
        sa.Column("job_namespace", sa.String(255)),
        sa.Column("job_name", sa.String(1024)),
        sa.Column("source", sa.String(1024)),
        sa.Column("payload", sa.Text, nullable=False),
    )
    op.create_index("ix_lineage_events_run_id", "lineage_events", ["run_id"])

    op.create_table(
        "lineage_nodes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(2048), nullable=False, unique=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("namespace", sa.String(1024), nullable=False),
        sa.Column("name", sa.String(2048), nullable=False),
        sa.Column("label", sa.String(2048), nullable=False),
    )

    op.create_table(
        "lineage_node_aliases",
        sa.Column("alias", sa.String(2048), nullable=False),
        sa.Column("node_id", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("alias", "node_id"),
    )

    op.create_table(
        "lineage_edges",
        sa.Column("source", sa.Integer, nullable=False),
        sa.Column("target", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("source", "target"),
    )
    op.create_index("ix_lineage_edges_target", "lineage_edges", ["target", "source"])

    op.create_table(
        "lineage_closure",
        sa.Column("ancestor", sa.Integer, nullable=False),
        sa.Column("descendant", sa.Integer, nullable=False),
        sa.Column("depth", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("ancestor", "descendant"),
    )
    op.create_index("ix_lineage_closure_upstream", "lineage_closure", ["descendant", "depth", "ancestor"])
    op.create_index("ix_lineage_closure_downstream", "lineage_closure", ["ancestor", "depth", "descendant"])

    op.create_table(
        "lineage_jobs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("node_id", sa.Integer, nullable=False, unique=True),
        sa.Column("namespace", sa.String(1024), nullable=False),
        sa.Column("name", sa.String(1024), nullable=False),
        sa.Column("created_at", sa.String(32)),
        sa.Column("updated_at", sa.String(32)),
        sa.Column("facets", sa.Text),
        sa.Column("current_version_id", sa.Integer),
        sa.Column("latest_run_id", sa.String(64)),
        sa.Column("latest_run_time", sa.String(32)),
        sa.UniqueConstraint("namespace", "name"),
    )

    op.create_table(
        "lineage_job_versions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Integer, nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("inputs", sa.Text),
        sa.Column("outputs", sa.Text),
        sa.Column("code_hash", sa.String(64)),
        sa.Column("code_version", sa.String(255)),
        sa.Column("created_at", sa.String(32)),
        sa.UniqueConstraint("job_id", "version"),
    )

    op.create_table(
        "lineage_datasets",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("node_id", sa.Integer, nullable=False, unique=True),
        sa.Column("namespace", sa.String(1024), nullable=False),
        sa.Column("name", sa.String(2048), nullable=False),
        sa.Column("created_at", sa.String(32)),
        sa.Column("updated_at", sa.String(32)),
        sa.Column("facets", sa.Text),
        sa.Column("current_version_id", sa.Integer),
        sa.Column("current_version_time", sa.String(32)),
        sa.UniqueConstraint("namespace", "name"),
    )

    op.create_table(
        "lineage_dataset_versions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("dataset_id", sa.Integer, nullable=False),
        sa.Column("version", sa.String(255), nullable=False),
        sa.Column("schema", sa.Text),
        sa.Column("schema_producer", sa.String(1024)),
        sa.Column("created_by_run_id", sa.String(64)),
        sa.Column("created_at", sa.String(32)),
        sa.UniqueConstraint("dataset_id", "version"),
    )

    op.create_table(
        "lineage_runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("job_id", sa.Integer, nullable=False),
        sa.Column("job_version_id", sa.Integer),
        sa.Column("state", sa.String(16)),
        sa.Column("state_rank", sa.Integer, nullable=False),
        sa.Column("state_time", sa.String(32)),
        sa.Column("started_at", sa.String(32)),
        sa.Column("ended_at", sa.String(32)),
        sa.Column("nominal_start", sa.String(64)),
        sa.Column("nominal_end", sa.String(64)),
        sa.Column("parent_run_id", sa.String(64)),
        sa.Column("root_run_id", sa.String(64)),
        sa.Column("error_message", sa.Text),
        sa.Column("code_hash", sa.String(64)),
        sa.Column("code_version", sa.String(255)),
        sa.Column("facets", sa.Text),
        sa.Column("facets_time", sa.String(32)),
    )
    op.create_index("ix_lineage_runs_job_id", "lineage_runs", ["job_id"])
    op.create_index("ix_lineage_runs_parent_run_id", "lineage_runs", ["parent_run_id"])

    op.create_table(
        "lineage_run_datasets",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("dataset_id", sa.Integer, nullable=False),
        sa.Column("direction", sa.String(6), nullable=False),
        sa.Column("dataset_version_id", sa.Integer),
        sa.PrimaryKeyConstraint("run_id", "dataset_id", "direction"),
    )
    op.create_index("ix_lineage_run_datasets_dataset", "lineage_run_datasets", ["dataset_id", "direction"])
    op.create_index("ix_lineage_run_datasets_version", "lineage_run_datasets", ["dataset_version_id"])

    op.create_table(
        "lineage_column_edges",
        sa.Column("dataset_id", sa.Integer, nullable=False),
        sa.Column("field", sa.String(512), nullable=False),
        sa.Column("input_dataset_id", sa.Integer, nullable=False),
        sa.Column("input_field", sa.String(512), nullable=False),
        sa.Column("transformations", sa.Text),
        sa.PrimaryKeyConstraint("dataset_id", "field", "input_dataset_id", "input_field"),
    )
    op.create_index("ix_lineage_column_edges_input", "lineage_column_edges", ["input_dataset_id", "input_field"])


def downgrade() -> None:
    op.drop_index("ix_lineage_column_edges_input", table_name="lineage_column_edges")
    op.drop_table("lineage_column_edges")
    op.drop_index("ix_lineage_run_datasets_version", table_name="lineage_run_datasets")
    op.drop_index("ix_lineage_run_datasets_dataset", table_name="lineage_run_datasets")
    op.drop_table("lineage_run_datasets")
    op.drop_index("ix_lineage_runs_parent_run_id", table_name="lineage_runs")
    op.drop_index("ix_lineage_runs_job_id", table_name="lineage_runs")
    op.drop_table("lineage_runs")
    op.drop_table("lineage_dataset_versions")
    op.drop_table("lineage_datasets")
    op.drop_table("lineage_job_versions")
    op.drop_table("lineage_jobs")
    op.drop_index("ix_lineage_closure_downstream", table_name="lineage_closure")
    op.drop_index("ix_lineage_closure_upstream", table_name="lineage_closure")
    op.drop_table("lineage_closure")
    op.drop_index("ix_lineage_edges_target", table_name="lineage_edges")
    op.drop_table("lineage_edges")
    op.drop_table("lineage_node_aliases")
    op.drop_table("lineage_nodes")
    op.drop_index("ix_lineage_events_run_id", table_name="lineage_events")
    op.drop_table("lineage_events")
