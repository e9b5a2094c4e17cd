"""The statements of the store's ingest path (``ingest.py``), built once: an event costs a handful of executions of
already-compiled SQL. ``dialect_statements`` builds those that need an upsert in the dialect's own form, once per
store.
"""

from __future__ import annotations

from sqlalchemy import bindparam, case, func, literal_column, or_, select, update

from include.lineage.store.schema import (
    aliases_table,
    ancestry_table,
    closure_table,
    column_edges_table,
    dataset_versions_table,
    datasets_table,
    edge_history_table,
    edges_table,
    events_table,
    file_cursors_table,
    job_versions_table,
    jobs_table,
    nodes_table,
    rejected_lines_table,
    run_datasets_table,
    runs_table,
)


def p(name: str):
    """A bound parameter (the statements below name theirs ``p_*``)."""
    return bindparam(name)


SELECT_NODE = select(nodes_table.c.id).where(
    nodes_table.c.kind == p("p_kind"), nodes_table.c.namespace == p("p_ns"), nodes_table.c.name == p("p_name")
)
SELECT_ALIASES = select(aliases_table.c.alias).where(aliases_table.c.node_id == p("p_node"))
SELECT_JOB_EDGES = select(edges_table.c.source, edges_table.c.target).where(
    or_(edges_table.c.source == p("p_node"), edges_table.c.target == p("p_node"))
)
SELECT_JOB = select(jobs_table.c.id, jobs_table.c.facets, jobs_table.c.facet_times, jobs_table.c.updated_at).where(
    jobs_table.c.namespace == p("p_ns"), jobs_table.c.name == p("p_name")
)
UPDATE_JOB_FACETS = (
    update(jobs_table)
    .where(jobs_table.c.id == p("p_id"))
    .values(facets=p("p_facets"), facet_times=p("p_times"), updated_at=p("p_time"))
)
SELECT_JOB_LATEST = select(
    jobs_table.c.latest_run_id, jobs_table.c.latest_run_time, jobs_table.c.current_version_id
).where(jobs_table.c.id == p("p_id"))
UPDATE_JOB_LATEST = (
    update(jobs_table)
    .where(jobs_table.c.id == p("p_id"))
    .values(latest_run_id=p("p_run"), latest_run_time=p("p_time"), current_version_id=p("p_version"))
)
SELECT_LATEST_RUN = (
    select(runs_table.c.id, runs_table.c.first_event_time, runs_table.c.job_version_id)
    .where(runs_table.c.job_id == p("p_job"))
    .order_by(runs_table.c.first_event_time.desc(), runs_table.c.id.desc())
    .limit(1)
)
SELECT_RUN_NODES = (
    select(run_datasets_table.c.direction, datasets_table.c.node_id)
    .join(datasets_table, datasets_table.c.id == run_datasets_table.c.dataset_id)
    .where(run_datasets_table.c.run_id == p("p_run"))
)
SELECT_DATASET = select(
    datasets_table.c.id, datasets_table.c.facets, datasets_table.c.facet_times, datasets_table.c.updated_at
).where(datasets_table.c.namespace == p("p_ns"), datasets_table.c.name == p("p_name"))
UPDATE_DATASET_FACETS = (
    update(datasets_table)
    .where(datasets_table.c.id == p("p_id"))
    .values(facets=p("p_facets"), facet_times=p("p_times"), updated_at=p("p_time"))
)
UPDATE_NODE_LABEL = update(nodes_table).where(nodes_table.c.id == p("p_id")).values(label=p("p_label"))
SELECT_VERSION = select(
    dataset_versions_table.c.id, dataset_versions_table.c.schema, dataset_versions_table.c.created_by_run_id
).where(dataset_versions_table.c.dataset_id == p("p_dataset"), dataset_versions_table.c.version == p("p_version"))
UPDATE_VERSION = (
    update(dataset_versions_table)
    .where(dataset_versions_table.c.id == p("p_id"))
    .values(
        schema=func.coalesce(dataset_versions_table.c.schema, p("p_schema")),
        schema_producer=case(
            (dataset_versions_table.c.schema.is_(None), p("p_producer")),
            else_=dataset_versions_table.c.schema_producer,
        ),
        created_by_run_id=func.coalesce(dataset_versions_table.c.created_by_run_id, p("p_run")),
    )
)
# The outputs a run's earlier transactions stored, their write time set to the run's as it now stands
# (``pending.written_at``): the run's rows of the primary key, outputs only
RETIME_OUTPUTS = (
    update(run_datasets_table)
    .where(run_datasets_table.c.run_id == p("p_run"), run_datasets_table.c.direction == literal_column("'output'"))
    .values(written_at=p("p_written"))
)
UPDATE_CURRENT_VERSION = (
    update(datasets_table)
    .where(
        datasets_table.c.id == p("p_id"),
        or_(datasets_table.c.current_version_time.is_(None), datasets_table.c.current_version_time <= p("p_time")),
    )
    .values(current_version_id=p("p_version"), current_version_time=p("p_time"))
)
UPDATE_FIRST_VERSION = (
    update(datasets_table)
    .where(datasets_table.c.id == p("p_id"), datasets_table.c.current_version_id.is_(None))
    .values(current_version_id=p("p_version"))
)
SELECT_RUN_IO = (
    select(run_datasets_table.c.direction, datasets_table.c.namespace, datasets_table.c.name)
    .join(datasets_table, datasets_table.c.id == run_datasets_table.c.dataset_id)
    .where(run_datasets_table.c.run_id == p("p_run"))
)
SELECT_JOB_VERSION = select(job_versions_table.c.id).where(
    job_versions_table.c.job_id == p("p_job"), job_versions_table.c.version == p("p_version")
)
RUN_USING_VERSION = select(runs_table.c.id).where(runs_table.c.job_version_id == p("p_version")).limit(1)
DELETE_JOB_VERSION = job_versions_table.delete().where(job_versions_table.c.id == p("p_version"))


def dialect_statements(dialect: str) -> dict:
    """The statements that need an upsert, in the dialect's own form (SQLite and PostgreSQL share the syntax)."""
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    else:
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    up, down = closure_table.alias("up"), closure_table.alias("down")
    # Every ancestor of the source (itself included) now reaches every descendant of the target (itself included),
    # at distance d(x, source) + 1 + d(target, y); an existing pair keeps the shorter distance.
    pairs = (
        select(up.c.ancestor, down.c.descendant, (up.c.depth + 1 + down.c.depth).label("depth"))
        .select_from(up)
        .join(down, down.c.ancestor == p("p_target"))
        .where(up.c.descendant == p("p_source"))
    )
    extend = dialect_insert(closure_table).from_select(["ancestor", "descendant", "depth"], pairs)
    extend = extend.on_conflict_do_update(
        index_elements=["ancestor", "descendant"],
        set_={"depth": extend.excluded.depth},
        where=extend.excluded.depth < closure_table.c.depth,
    )
    repack = dialect_insert(ancestry_table)
    repack = repack.on_conflict_do_update(index_elements=["descendant"], set_={"packed": repack.excluded.packed})
    raw = dialect_insert(events_table).on_conflict_do_nothing(index_elements=["dedup_key"])
    history = dialect_insert(edge_history_table)
    h = edge_history_table.c
    history = history.on_conflict_do_update(
        index_elements=["source", "target"],
        set_={
            "first_seen": case(
                (history.excluded.first_seen < h.first_seen, history.excluded.first_seen), else_=h.first_seen
            ),
            "last_seen": case(
                (history.excluded.last_seen > h.last_seen, history.excluded.last_seen), else_=h.last_seen
            ),
        },
        where=or_(history.excluded.first_seen < h.first_seen, history.excluded.last_seen > h.last_seen),
    )
    run_dataset = dialect_insert(run_datasets_table)
    run_dataset = run_dataset.on_conflict_do_update(
        index_elements=["run_id", "dataset_id", "direction"],
        set_={
            "dataset_version_id": func.coalesce(
                run_dataset.excluded.dataset_version_id, run_datasets_table.c.dataset_version_id
            ),
            "written_at": run_dataset.excluded.written_at,  # the run's times as they stand (``pending.written_at``)
        },
    )
    cursor = dialect_insert(file_cursors_table)
    cursor = cursor.on_conflict_do_update(
        index_elements=["path"],
        set_={
            "read_bytes": cursor.excluded.read_bytes,
            "head_sha256": cursor.excluded.head_sha256,
            "read_lines": cursor.excluded.read_lines,
        },
    )
    column_edge = dialect_insert(column_edges_table)
    column_edge = column_edge.on_conflict_do_update(
        index_elements=["dataset_id", "field", "input_dataset_id", "input_field"],
        set_={"transformations": column_edge.excluded.transformations},
        where=column_edges_table.c.transformations.is_distinct_from(column_edge.excluded.transformations),
    )
    rejected = (
        dialect_insert(rejected_lines_table)
        .on_conflict_do_nothing(index_elements=["path", "byte_offset", "line_sha256"])
        .returning(rejected_lines_table.c.byte_offset)
    )
    return {
        "upsert_file_cursor": cursor,
        "insert_rejected_line": rejected,
        "extend_closure": extend,
        "upsert_ancestry": repack,
        "insert_event": raw.returning(events_table.c.id),
        "insert_events": raw.returning(events_table.c.id, events_table.c.dedup_key),
        "upsert_run_dataset": run_dataset,
        "upsert_edge_history": history,
        "upsert_column_edge": column_edge,
    }
