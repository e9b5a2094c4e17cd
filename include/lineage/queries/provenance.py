"""Run provenance: ``GET /api/v1/runlineage/upstream`` (Marquez's ``LineageDao.getUpstreamRuns``), run -> dataset
version read -> run that wrote it -> ..., the provenance that ``diff --upstream`` compares."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from include.lineage.queries.runs import child_runs, parameters_of
from include.lineage.queries.sql import DEFAULT_DEPTH, fetch_rows

# The run that wrote the version an input row ``rd`` of run ``u`` read: the version's creator when the input carried a
# version facet, else the latest write of that dataset by another run that had ended by the time ``u`` started. An
# output link's ``written_at`` is its run's ``coalesce(ended_at, state_time, started_at)``, kept so as the run's events
# arrive: the latest write is one entry of ``ix_lineage_run_datasets_dataset`` (dataset, direction, written_at, run),
# not every write of the dataset joined to its run and sorted.
_LATEST_WRITE = (
    "(SELECT lw.run_id FROM lineage_run_datasets lw"
    " WHERE lw.dataset_id = rd.dataset_id AND lw.direction = 'output' AND lw.run_id <> rd.run_id"
    " AND lw.written_at <= COALESCE(u.started_at, u.first_event_time, u.state_time, '')"
    " ORDER BY lw.written_at DESC, lw.run_id DESC LIMIT 1)"
)
# Every run upstream of :run, each once (a set of runs, not of paths), with its inputs: one row per (run, input), a
# run without inputs once; each input with the version read and the run that wrote it (the version's creator, or
# the latest write, ``_LATEST_WRITE``). Those writers are the provenance's edges: levels are a breadth-first walk of
# them in Python.
_RUN_PROVENANCE = (
    "WITH RECURSIVE reached(run) AS (SELECT CAST(:run AS TEXT)"
    " UNION SELECT CAST(CASE WHEN rd.dataset_version_id IS NOT NULL THEN dv.created_by_run_id"
    f" ELSE {_LATEST_WRITE} END AS TEXT)"
    " FROM reached p JOIN lineage_run_datasets rd ON rd.run_id = p.run AND rd.direction = 'input'"
    " JOIN lineage_runs u ON u.id = rd.run_id"
    " LEFT JOIN lineage_dataset_versions dv ON dv.id = rd.dataset_version_id)"
    # The latest write is looked up once per input without a version, as a column of a derived table: in a join's
    # condition PostgreSQL ran it once per output row of the dataset (a dataset written daily for a year: 365
    # times the lookup, each reading those 365 writes).
    " SELECT x.run, j.namespace, j.name, jv.version, u.started_at, u.ended_at, u.state, u.state_time,"
    " u.job_version_id, u.facets, d.namespace, d.name, n.label, x.dataset_version_id, dv.version,"
    " dv.created_by_run_id, dv.created_at, lw.run_id, lwv.version, lw.written_at"
    " FROM (SELECT p.run, rd.dataset_id, rd.dataset_version_id,"
    f" CASE WHEN rd.dataset_version_id IS NULL AND rd.dataset_id IS NOT NULL THEN {_LATEST_WRITE} END AS latest"
    " FROM reached p JOIN lineage_runs u ON u.id = p.run"
    " LEFT JOIN lineage_run_datasets rd ON rd.run_id = u.id AND rd.direction = 'input'"
    " WHERE p.run IS NOT NULL) x"
    " JOIN lineage_runs u ON u.id = x.run JOIN lineage_jobs j ON j.id = u.job_id"
    " LEFT JOIN lineage_job_versions jv ON jv.id = u.job_version_id"
    " LEFT JOIN lineage_datasets d ON d.id = x.dataset_id LEFT JOIN lineage_nodes n ON n.id = d.node_id"
    " LEFT JOIN lineage_dataset_versions dv ON dv.id = x.dataset_version_id"
    " LEFT JOIN lineage_run_datasets lw ON lw.run_id = x.latest AND lw.dataset_id = x.dataset_id"
    " AND lw.direction = 'output'"
    " LEFT JOIN lineage_dataset_versions lwv ON lwv.id = lw.dataset_version_id"
)


def run_lineage(conn: Connection, root_id: str, depth: int) -> list[dict]:
    """The provenance entries of a run: one query for every run upstream with its inputs and their writers
    (``_RUN_PROVENANCE``), then each run's level by a breadth-first walk of those writers; none for an unknown run
    id (``LineageQueries.run_lineage`` then resolves a prefix)."""
    runs, inputs = _upstream_runs(conn, root_id)
    levels = _levels(runs, inputs, root_id, depth)
    entries = []
    for run_id in sorted(levels, key=lambda x: (levels[x], runs[x][2], runs[x][4] or runs[x][7] or "", x)):
        _, job_namespace, job_name, version, started, ended, state, _, job_version_id, facets = runs[run_id]
        items = sorted(inputs[run_id], key=lambda item: (item["namespace"], item["name"]))
        entries.append(
            {
                "job": {"namespace": job_namespace, "name": job_name, "version": version},
                "run": {"id": run_id, "start": started, "end": ended, "status": state},
                "inputs": items,
                "depth": levels[run_id],
                "jobVersionId": job_version_id,
                "parameters": parameters_of(facets),
            }
        )
    return entries


def _upstream_runs(conn: Connection, root_id: str) -> tuple[dict[str, tuple], dict[str, list[dict]]]:
    """(run id -> its columns, run id -> its inputs) of every run upstream of ``root_id``, itself included."""
    runs: dict[str, tuple] = {}
    inputs: dict[str, list[dict]] = {}
    for row in fetch_rows(conn, _RUN_PROVENANCE, {"run": root_id}):
        run_id = row[0]
        if run_id not in runs:
            runs[run_id], inputs[run_id] = row[:10], []
        namespace, name, label, version_id, version, creator, created, latest, latest_version, written = row[10:]
        if namespace is None:  # a run without inputs
            continue
        if version_id is not None:
            read = (version, creator, "version facet", created)
        elif latest is not None:
            read = (latest_version, latest, "latest write before the run", written)
        else:
            read = (None, None, None, None)
        inputs[run_id].append(
            {
                "namespace": namespace,
                "name": name,
                "version": read[0],
                "producedByRunId": read[1],
                "label": label,
                "resolvedBy": read[2],
                "versionTime": read[3],  # when that version was written (first reported)
            }
        )
    return runs, inputs


def _levels(runs: dict[str, tuple], inputs: dict[str, list[dict]], root_id: str, depth: int) -> dict[str, int]:
    """run id -> its level, each run at its first: the root 0, the writers of what a level-n run read n + 1."""
    levels = {root_id: 0} if root_id in runs else {}
    frontier = list(levels)
    for level in range(1, depth + 1):  # getUpstreamRuns: WHERE ... AND depth < :depth
        following = []
        for run_id in frontier:
            for item in inputs[run_id]:
                writer = item["producedByRunId"]
                if writer and writer in runs and writer not in levels:  # writer == run_id: no self loop
                    levels[writer] = level
                    following.append(writer)
        frontier = following
        if not frontier:
            break
    return levels


def provenance_through_children(conn: Connection, run_id: str) -> tuple[str | None, list[dict]]:
    """(the run's job name, its provenance entries); a run that read nothing itself (a DAG run) has its child
    runs' entries instead, each child at level 0, as ``diff`` compares such a run through its child runs. A run
    reached several ways keeps its lowest level."""
    entries = run_lineage(conn, run_id, DEFAULT_DEPTH)
    root_job = entries[0]["job"]["name"] if entries else None
    if not entries or entries[0]["inputs"]:
        return root_job, entries
    merged: dict[str, dict] = {}
    for child, _ in child_runs(conn, run_id):
        for entry in run_lineage(conn, child, DEFAULT_DEPTH):
            known = merged.get(entry["run"]["id"])
            if known is None or entry["depth"] < known["depth"]:
                merged[entry["run"]["id"]] = entry
    return root_job, sorted(merged.values(), key=lambda e: (e["depth"], e["job"]["name"], e["run"]["id"])) or entries
