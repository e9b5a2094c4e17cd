"""Impact: who is affected by a node (what to recompute, re-run or roll back) or by a run (every later run that read
what it wrote, transitively)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from include.lineage.queries.names import Node, Subgraph, edges_among, nodes_of
from include.lineage.queries.runs import descendant_runs, resolve_run, run_summary
from include.lineage.queries.sql import chunks, closure_downstream, run_start
from include.lineage.store.schema import (
    dataset_versions_table,
    datasets_table,
    jobs_table,
    run_datasets_table,
    runs_table,
)


def runs_reading(conn: Connection, sub: Subgraph, since: str | None = None) -> list[dict]:
    """The runs of the downstream subgraph's jobs that read any of its datasets (with ``sub.as_of``, only runs
    started by then; with ``since``, only those started at or after it), newest first. Without ``since`` the answer
    grows with history: every run that ever read the data (228,323 for a hub of a 10^6-event store)."""
    job_node_ids = [n.id for n in sub.jobs()]
    if not job_node_ids:
        return []
    dataset_node_ids = [n.id for n in sub.nodes.values() if n.kind == "dataset"]
    d, rd, r, j = datasets_table, run_datasets_table, runs_table, jobs_table
    dataset_ids = [
        row
        for chunk in chunks(dataset_node_ids)
        for row in conn.execute(select(d.c.id).where(d.c.node_id.in_(chunk))).scalars()
    ]
    # Only the columns of a run's summary (a run's facets are a kilobyte), each run once: a run reading several of
    # the datasets was a row per dataset (a hub's impact at 10^6 events: 106,214 rows of full runs for 58,966 runs)
    read_them = select(rd.c.run_id).where(rd.c.direction == "input", rd.c.dataset_id.in_(dataset_ids or [-1]))
    runs: list[dict] = []
    for chunk in chunks(job_node_ids):
        query = (
            select(r.c.id, r.c.state, r.c.started_at, r.c.ended_at, j.c.namespace, j.c.name)
            .join(j, j.c.id == r.c.job_id)
            .where(j.c.node_id.in_(chunk), r.c.id.in_(read_them))
        )
        if sub.as_of is not None:
            query = query.where(run_start() <= sub.as_of)
        if since is not None:
            query = query.where(run_start() >= since)
        runs.extend(map(run_summary, conn.execute(query)))
    runs.sort(key=lambda run: (run["startedAt"] or run["endedAt"] or "", run["id"]), reverse=True)
    return runs


def impact_of_run(conn: Connection, run_ref: str, store_url: str) -> dict:
    """The answer of ``LineageQueries.impact_of_run``."""
    run = resolve_run(conn, run_ref, store_url)
    family = descendant_runs(conn, [run.id])
    written, touched_runs = _written_and_read(conn, family, run.started_at or run.state_time or "")
    run_rows = []
    for chunk in chunks(touched_runs):
        run_rows += conn.execute(
            select(runs_table, jobs_table.c.namespace, jobs_table.c.name)
            .join(jobs_table, jobs_table.c.id == runs_table.c.job_id)
            .where(runs_table.c.id.in_(chunk))
        ).all()
    versions = _versions_written(conn, written)
    depths: dict[int, int] = {}
    for version in versions:
        for node, distance in closure_downstream(conn, version["nodeId"]):
            depths[node] = min(distance, depths.get(node, distance))
    nodes = nodes_of(conn, depths)
    labels = {n.id: n.label for n in nodes.values()}
    for version in versions:
        version["label"] = labels.get(version.pop("nodeId"))
    focus = Node(-1, f"run:{run.id}", "run", "", run.id, run.id)
    sub = Subgraph(focus, "downstream", nodes, depths, edges_among(conn, set(depths)))
    summaries = sorted(
        (run_summary(row) for row in run_rows),
        key=lambda s: (s["id"] != run.id, s["startedAt"] or s["endedAt"] or ""),
    )
    return {
        "run": run_summary(next(row for row in run_rows if row.id == run.id)),
        "runs": summaries,
        "family": list(family),  # the run and its child runs, whatever their times
        "datasetVersions": sorted(versions, key=lambda v: (v["label"] or "", v["version"] or "")),
        "subgraph": sub,
    }


def _written_and_read(
    conn: Connection, family: list[str], since: str
) -> tuple[dict[tuple[int, int | None], str], dict[str, None]]:
    """(dataset id, version id) -> the run that wrote it, of the runs of ``family`` and of every run that read what
    one of them wrote, transitively (a version by its id; a dataset without versions read since ``since``); and
    all those runs, in the order met."""
    rd, r = run_datasets_table, runs_table
    touched_runs = dict.fromkeys(family)
    written: dict[tuple[int, int | None], str] = {}
    frontier = list(family)
    while frontier:
        outputs = []
        for chunk in chunks(frontier):
            outputs += conn.execute(
                select(rd.c.run_id, rd.c.dataset_id, rd.c.dataset_version_id).where(
                    rd.c.run_id.in_(chunk), rd.c.direction == "output"
                )
            ).all()
        frontier = []
        for writer, dataset_id, version_id in outputs:
            if (dataset_id, version_id) in written:
                continue
            written[(dataset_id, version_id)] = writer
            readers = (
                select(rd.c.run_id)
                .join(r, r.c.id == rd.c.run_id)
                .where(rd.c.dataset_id == dataset_id, rd.c.direction == "input")
            )
            if version_id is not None:
                readers = readers.where(rd.c.dataset_version_id == version_id)
            else:
                readers = readers.where(func.coalesce(r.c.started_at, r.c.state_time) >= since)
            for reader in conn.execute(readers).scalars():
                if reader not in touched_runs:
                    touched_runs[reader] = None
                    frontier.append(reader)
    return written, touched_runs


def _versions_written(conn: Connection, written: dict[tuple[int, int | None], str]) -> list[dict]:
    d, dv = datasets_table, dataset_versions_table
    versions = []
    for (dataset_id, version_id), writer in written.items():
        row = conn.execute(
            select(d.c.namespace, d.c.name, d.c.node_id, dv.c.version)
            .select_from(d)
            .outerjoin(dv, dv.c.id == version_id)
            .where(d.c.id == dataset_id)
        ).first()
        versions.append(
            {
                "namespace": row.namespace,
                "name": row.name,
                "nodeId": row.node_id,
                "version": row.version,
                "writtenBy": writer,
            }
        )
    return versions
