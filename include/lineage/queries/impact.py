"""Impact: who is affected by a node (what to recompute, re-run or roll back) or by a run (every later run that read
what it wrote, transitively)."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from include.core.jsontext import loads
from include.lineage.queries.names import Node, Subgraph, edges_among, nodes_of
from include.lineage.queries.runs import descendant_runs, resolve_run, run_summary
from include.lineage.queries.sql import chunks, closure_downstream, fetch_rows, in_list, newest_runs_counted, run_start
from include.lineage.store.schema import (
    dataset_versions_table,
    datasets_table,
    run_datasets_table,
    runs_table,
)

# How many of the runs that read a node's downstream an impact answer lists, newest first, when not told: the rest
# are counted, not listed (a hub of a year of history was read by a million runs; Marquez pages its run lists too).
RUNS_LISTED = 100


def runs_reading(
    conn: Connection, sub: Subgraph, since: str | None = None, limit: int | None = RUNS_LISTED
) -> tuple[list[dict], int]:
    """The newest ``limit`` runs (every one with ``limit=None``) of the downstream subgraph's jobs that read any of
    its datasets, newest first by when they started (``run_start``), and how many such runs there are in all. With
    ``sub.as_of``, only runs started by then; with ``since``, only those started at or after it."""
    versions, job_names = _versions_reading(conn, sub)
    r, start = runs_table, run_start()
    window = ([start <= sub.as_of] if sub.as_of is not None else []) + ([start >= since] if since is not None else [])
    if limit is None:  # every one: read, then counted as read
        newest = sorted(
            (
                (row.start or "", row.id)
                for chunk in chunks(versions)
                for row in conn.execute(
                    select(r.c.id, start.label("start")).where(r.c.job_version_id.in_(chunk), *window)
                )
            ),
            reverse=True,
        )
        return _summaries(conn, [run_id for _, run_id in newest]), len(newest)
    newest, total = newest_runs_counted(conn, r.c.job_version_id, versions, limit, window)
    # each run listed with its summary, read with the pages (``sql._with_listed``), its job's name with the versions
    return [
        run_summary(_Summary(run.id, run.state, run.started_at, run.ended_at, *job_names[run.job_id])) for run in newest
    ], total


def _versions_reading(conn: Connection, sub: Subgraph) -> tuple[list[int], dict[int, tuple[str, str]]]:
    """The ids of the versions of the subgraph's jobs that read one of its datasets, and those jobs' names by their
    ids (job id -> namespace, name). A run's job version is the inputs and outputs of all its events and its code
    (``store.ingest``), so the runs that read a dataset are those of the versions that list it: found from the
    versions (thousands), never run by run (a hub of a year's store: a million runs, each with its own input rows).
    Names compare as the versions spell them (``namespace:name``)."""
    # a dataset node is named as its dataset's row (the store finds one by the other's namespace and name)
    names = {f"{n.namespace}:{n.name}" for n in sub.nodes.values() if n.kind == "dataset"}
    versions, job_names = [], {}
    for chunk in chunks([n.id for n in sub.jobs()]):
        placeholders, params = in_list(chunk)
        for version, inputs, job_id, namespace, name in fetch_rows(
            conn, _VERSIONS_OF_JOB_NODES.format(placeholders), params
        ):
            if names.intersection(loads(inputs or "[]")):
                versions.append(version)
                job_names[job_id] = (namespace, name)
    return versions, job_names


_VERSIONS_OF_JOB_NODES = (
    "SELECT v.id, v.inputs, j.id, j.namespace, j.name FROM lineage_job_versions v JOIN lineage_jobs j"
    " ON j.id = v.job_id WHERE j.node_id IN ({})"
)


def _summaries(conn: Connection, run_ids: list[str]) -> list[dict]:
    """The runs' summaries (the columns ``run_summary`` reads, never a run's facets), in the order given."""
    found = {}
    for chunk in chunks(run_ids):
        placeholders, params = in_list(chunk)
        found.update(
            (row[0], run_summary(_Summary(*row))) for row in fetch_rows(conn, _SUMMARIES.format(placeholders), params)
        )
    return [found[run_id] for run_id in run_ids if run_id in found]


class _Summary(NamedTuple):  # a row of ``_SUMMARIES``, as ``run_summary`` reads it
    id: str
    state: str | None
    started_at: str | None
    ended_at: str | None
    namespace: str
    name: str


_SUMMARIES = (
    "SELECT r.id, r.state, r.started_at, r.ended_at, j.namespace, j.name"
    " FROM lineage_runs r JOIN lineage_jobs j ON j.id = r.job_id WHERE r.id IN ({})"
)


def impact_of_run(conn: Connection, run_ref: str, store_url: str) -> dict:
    """The answer of ``LineageQueries.impact_of_run``."""
    run = resolve_run(conn, run_ref, store_url)
    family = descendant_runs(conn, [run.id])
    written, touched_runs = _written_and_read(conn, family, run.started_at or run.state_time or "")
    touched = _summaries(conn, list(touched_runs))
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
    summaries = sorted(touched, key=lambda s: (s["id"] != run.id, s["startedAt"] or s["endedAt"] or ""))
    return {
        "run": next(summary for summary in touched if summary["id"] == run.id),
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
