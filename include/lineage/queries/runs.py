"""Runs: a run by its id (or a prefix), by what it did at an instant, its details, a job's runs, and run ids that hold
the events of more than one run."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Connection

from include.core.jsontext import loads
from include.lineage.errors import EmptyStoreError, LineageError, UnknownNodeError
from include.lineage.events import dag_run_identity
from include.lineage.queries.model import DONE
from include.lineage.queries.names import Node, resolve
from include.lineage.queries.sql import chunks, run_start
from include.lineage.store.packing import PayloadPacker
from include.lineage.store.schema import (
    dataset_versions_table,
    datasets_table,
    events_table,
    job_versions_table,
    jobs_table,
    nodes_table,
    run_datasets_table,
    runs_table,
)


class Row:
    """A mapping with attribute access, like a SQLAlchemy row."""

    def __init__(self, values: dict):
        self.__dict__.update(values)
        self._mapping = values


# ------------------------------------------------------------------------- a run by its id
def resolve_run(conn: Connection, ref: str, store_url: str):
    """The run row of a run id, or of an unambiguous prefix of 4 to 64 characters; UnknownNodeError with close ids,
    or EmptyStoreError (naming ``store_url``)."""
    r = runs_table
    row = conn.execute(select(r).where(r.c.id == ref)).first()
    if row is not None:
        return row
    prefix = r.c.id.startswith(ref, autoescape=True)  # % and _ of the prefix are literal
    rows = conn.execute(select(r).where(prefix).limit(3)).all() if 4 <= len(ref) <= 64 else []
    if len(rows) == 1:
        return rows[0]
    if len(rows) > 1:
        raise LineageError(f"run id prefix {ref!r} is ambiguous: " + ", ".join(row.id for row in rows) + ", …")
    if conn.execute(select(r.c.id).limit(1)).first() is None:
        raise EmptyStoreError(store_url)
    recent = conn.execute(select(r.c.id).order_by(r.c.state_time.desc()).limit(200)).scalars().all()
    raise UnknownNodeError(ref, difflib.get_close_matches(ref, recent, n=3, cutoff=0.6), what="run")


def with_job(conn: Connection, row) -> Row:
    """A run row with its job's ``namespace`` and ``name``, as ``details_of`` reads it."""
    job = conn.execute(select(jobs_table.c.namespace, jobs_table.c.name).where(jobs_table.c.id == row.job_id)).first()
    return Row(dict(row._mapping) | {"namespace": job.namespace, "name": job.name})


def descendant_runs(conn: Connection, run_ids: list[str]) -> list[str]:
    """The runs and their child runs, grandchildren and so on."""
    found = list(run_ids)
    frontier = list(run_ids)
    while frontier:
        children = []
        for chunk in chunks(frontier):
            children += (
                conn.execute(select(runs_table.c.id).where(runs_table.c.parent_run_id.in_(chunk))).scalars().all()
            )
        frontier = [c for c in children if c not in found]
        found += frontier
    return found


def child_runs(conn: Connection, run_id: str) -> list[tuple[str, str]]:
    """(run id, job name) of a run's child runs, by job name then id."""
    return [
        tuple(row)
        for row in conn.execute(
            select(runs_table.c.id, jobs_table.c.name)
            .join(jobs_table, jobs_table.c.id == runs_table.c.job_id)
            .where(runs_table.c.parent_run_id == run_id)
            .order_by(jobs_table.c.name, runs_table.c.id)
        )
    ]


# ------------------------------------------------------------------------- what a run did
def runs_of(conn: Connection, node: Node, limit: int) -> list[dict]:
    """Runs of a job, newest first (for a dataset: the runs that wrote it), with their details."""
    r, j, rd, d = runs_table, jobs_table, run_datasets_table, datasets_table
    query = select(r, j.c.namespace, j.c.name).join(j, j.c.id == r.c.job_id)
    if node.kind == "job":
        query = query.where(j.c.node_id == node.id)
    else:
        query = (
            query.join(rd, rd.c.run_id == r.c.id)
            .join(d, d.c.id == rd.c.dataset_id)
            .where(d.c.node_id == node.id, rd.c.direction == "output")
        )
    rows = conn.execute(query.order_by(func.coalesce(r.c.started_at, r.c.state_time).desc()).limit(limit)).all()
    return [details_of(conn, row) for row in rows]


def details_of(conn: Connection, row) -> dict:
    """A run row (with its job's ``namespace`` and ``name``) as ``run_details`` answers: its job version, code,
    parent, parameters, the dataset versions it read and wrote with their schemas, and how many child runs it has."""
    rd, d, dv, n, jv = run_datasets_table, datasets_table, dataset_versions_table, nodes_table, job_versions_table
    io = conn.execute(
        select(rd.c.direction, d.c.namespace, d.c.name, n.c.label, dv.c.version, dv.c.schema, dv.c.schema_producer)
        .join(d, d.c.id == rd.c.dataset_id)
        .join(n, n.c.id == d.c.node_id)
        .outerjoin(dv, dv.c.id == rd.c.dataset_version_id)
        .where(rd.c.run_id == row.id)
    ).all()
    version = (
        conn.execute(select(jv.c.version).where(jv.c.id == row.job_version_id)).scalar() if row.job_version_id else None
    )
    facets = loads(row.facets or "{}")
    children = conn.execute(
        select(func.count()).select_from(runs_table).where(runs_table.c.parent_run_id == row.id)
    ).scalar()

    def side(direction):
        return [
            {
                "namespace": ns,
                "name": name,
                "label": label,
                "version": ver,
                "schema": loads(schema) if schema else None,
                "schemaProducer": producer,
            }
            for dirn, ns, name, label, ver, schema, producer in sorted(io, key=lambda x: x[3])
            if dirn == direction
        ]

    return {
        **run_summary(row),
        "jobVersion": version,
        "codeHash": row.code_hash,
        "codeVersion": row.code_version,
        "parentRunId": row.parent_run_id,
        "rootRunId": row.root_run_id,
        "errorMessage": row.error_message,
        "nominalStartTime": row.nominal_start,
        "nominalEndTime": row.nominal_end,
        "parameters": _parameters(facets),
        "inputs": side("input"),
        "outputs": side("output"),
        "childRuns": children,
    }


def run_summary(row) -> dict:
    return {
        "id": row.id,
        "job": {"namespace": row.namespace, "name": row.name},
        "state": row.state,
        "startedAt": row.started_at,
        "endedAt": row.ended_at,
    }


def parameters_of(facets: str | None) -> dict:
    """``_parameters`` of a run's facets as stored (JSON), parsed only when one of the facets it reads is there."""
    if not facets or ('"airflow' not in facets and '"nominalTime"' not in facets):
        return {}
    return _parameters(loads(facets))


def _parameters(facets: dict) -> dict:
    """What a run was asked to do: the DAG run's conf and logical date, a Spark job's application arguments."""
    params: dict = {}
    for facet in ("airflow", "airflowDagRun"):
        dag_run = (facets.get(facet) or {}).get("dagRun") or {}
        for key, value in (dag_run.get("conf") or {}).items():
            params[f"conf.{key}"] = value
        if dag_run.get("logical_date"):
            params["logical_date"] = dag_run["logical_date"]
    nominal = facets.get("nominalTime") or {}
    if nominal.get("nominalStartTime"):
        params["nominal_start"] = nominal["nominalStartTime"]
    return params


# ------------------------------------------------------------------------- a run by what it did, at an instant
def run_at(conn: Connection, ref: str, as_of: str | None, store_url: str) -> str:
    """The answer of ``LineageQueries.run_at``, ``as_of`` already parsed."""
    exact = conn.execute(select(runs_table.c.id).where(runs_table.c.id == ref)).scalar()
    node = None
    if exact is None:
        try:
            node = resolve(conn, ref, store_url)
        except (UnknownNodeError, EmptyStoreError):
            node = None
    if node is None:
        run_id = exact if exact is not None else resolve_run(conn, ref, store_url).id
        if as_of is not None:
            raise LineageError(
                f"{ref!r} is a run: its provenance does not change with time. --as-of picks the run of a job "
                "or of a dataset's version current then (e.g. --run nyc_taxi.yellow_rides_hourly_forecast "
                "--as-of 2025-02-01T10:00:00Z)"
            )
        return run_id
    if node.kind == "job":
        return _run_of_job(conn, node, as_of)
    return _run_of_dataset(conn, node, as_of)


_END_OF_TIME = "9999-12-31T23:59:59.999999Z"


def _run_of_job(conn: Connection, node: Node, as_of: str | None) -> str:
    """The job's latest run started by ``as_of`` (default: now)."""
    r = runs_table
    started = run_start()
    found = conn.execute(
        select(r.c.id)
        .join(jobs_table, jobs_table.c.id == r.c.job_id)
        .where(jobs_table.c.node_id == node.id, started <= (as_of or _END_OF_TIME))
        .order_by(started.desc(), r.c.id.desc())
        .limit(1)
    ).scalar()
    if found is None:
        raise UnknownNodeError(f"{node.label} (a run started by {as_of or 'now'})", [], what="run")
    return found


def _run_of_dataset(conn: Connection, node: Node, as_of: str | None) -> str:
    """The run that wrote the dataset's version current at ``as_of`` (default: now): the latest write that had ended
    by then; of a writer and its parent run that both report the write, the parent (a task, not its Spark job). When
    a run wrote is its output link's ``written_at`` (its run's end, else its state's time, else its start)."""
    r, rd, d = runs_table, run_datasets_table, datasets_table
    written = rd.c.written_at
    writers = conn.execute(
        select(r.c.id, r.c.parent_run_id)
        .join(rd, rd.c.run_id == r.c.id)
        .join(d, d.c.id == rd.c.dataset_id)
        .where(d.c.node_id == node.id, rd.c.direction == "output", written <= (as_of or _END_OF_TIME))
        .order_by(written.desc(), r.c.id.desc())
    ).all()
    if not writers:
        raise UnknownNodeError(f"{node.label} (a run that wrote it by {as_of or 'now'})", [], what="run")
    parents = {row.id: row.parent_run_id for row in writers}
    chosen = writers[0].id
    while parents.get(chosen) in parents and parents[chosen] != chosen:
        chosen = parents[chosen]
    return chosen


# ------------------------------------------------------------------------- runs that hold two runs' events
def merged_runs(
    conn: Connection,
    packer: PayloadPacker,
    run_ids: Iterable[str] | None = None,
    in_hand: dict[str, list[tuple]] | None = None,
) -> list[dict]:
    """The answer of ``LineageQueries.merged_runs``: the runs of ``run_ids`` (None: every run) judged from their
    stored events, and those of ``in_hand`` (run id -> each of its events' (type, time, DAG run identity), all its
    events: ``IngestResult.created_runs``) from these, by the same rules, without reading the store."""
    wanted = None if run_ids is None else set(run_ids)
    restarted = _restarted_runs(conn, wanted) if wanted is None or wanted else []
    identities = _dag_run_identities(conn, packer, wanted) if wanted is None or wanted else {}
    for run_id, facts in (in_hand or {}).items():
        starts = [time for kind, time, _ in facts if kind == "START"]
        ends = [time for kind, time, _ in facts if kind in DONE]
        if starts and ends and max(starts) > min(ends):
            restarted.append((run_id, max(starts), min(ends)))
        named = {identity for _, _, identity in facts if identity}
        if named:
            identities[run_id] = named
    found: dict[str, list[str]] = {}
    for run_id, start, first_end in restarted:
        found.setdefault(run_id, []).append(f"a START at {start} after the run had finished at {first_end}")
    for run_id, named in identities.items():
        distinct = _distinct_identities(named)
        if len(distinct) > 1:
            described = "; ".join(", ".join(f"{k} {v}" for k, v in identity) for identity in distinct)
            found.setdefault(run_id, []).append(f"events of {len(distinct)} Airflow DAG runs ({described})")
    jobs = {}
    for chunk in chunks(found):
        for run_id, name in conn.execute(
            select(runs_table.c.id, jobs_table.c.name)
            .join(jobs_table, jobs_table.c.id == runs_table.c.job_id)
            .where(runs_table.c.id.in_(chunk))
        ):
            jobs[run_id] = name
    return [
        {"runId": run_id, "job": jobs.get(run_id), "reasons": reasons}
        for run_id, reasons in sorted(found.items(), key=lambda item: (jobs.get(item[0]) or "", item[0]))
    ]


def _restarted_runs(conn: Connection, wanted: set[str] | None) -> list[tuple]:
    """(run id, its latest START, its first end) of the runs (``wanted``: only those) with a START after they had
    finished."""
    e = events_table
    if wanted is None:
        return _restarted_among(conn, e, None)
    return [row for chunk in chunks(sorted(wanted)) for row in _restarted_among(conn, e, chunk)]


def _restarted_among(conn: Connection, e, run_ids: list[str] | None) -> list[tuple]:
    only = [e.c.run_id.in_(run_ids)] if run_ids is not None else []
    done = (
        select(e.c.run_id, func.min(e.c.event_time).label("first_end"))
        .where(e.c.event_type.in_(sorted(DONE)), *only)
        .group_by(e.c.run_id)
        .subquery()
    )
    return conn.execute(
        select(e.c.run_id, func.max(e.c.event_time), done.c.first_end)
        .join(done, done.c.run_id == e.c.run_id)
        .where(e.c.event_type == "START", e.c.event_time > done.c.first_end, *only)
        .group_by(e.c.run_id, done.c.first_end)
    ).all()


def _dag_run_identities(conn: Connection, packer: PayloadPacker, wanted: set[str] | None) -> dict[str, set[tuple]]:
    """run id -> the Airflow DAG run identities (dag id, logical date, clear number, run id) its events carry."""
    e = events_table
    # a packed payload cannot be searched by SQL: every packed row is unpacked, an old one only if it names a dagRun
    mentions = or_(e.c.packed.is_not(None), e.c.payload.like('%"dagRun"%'))
    queries = (
        [
            select(e.c.id, e.c.run_id, e.c.payload, e.c.packed).where(mentions, e.c.run_id.in_(chunk))
            for chunk in chunks(wanted)
        ]
        if wanted is not None
        else [select(e.c.id, e.c.run_id, e.c.payload, e.c.packed).where(mentions)]
    )
    dag_runs: dict[str, set[tuple]] = {}
    for event_id, run_id, payload, packed in (row for query in queries for row in conn.execute(query)):
        text = packer.text(conn, event_id, payload, packed)
        if '"dagRun"' not in text:
            continue
        identity = dag_run_identity((loads(text).get("run") or {}).get("facets") or {})
        if identity:
            dag_runs.setdefault(run_id, set()).add(identity)
    return dag_runs


def _distinct_identities(identities: set[tuple]) -> list[tuple]:
    """The DAG runs among the Airflow identities of one run id's events: two that disagree on a field both carry;
    one that only lacks a field another has is the same run."""
    ordered = sorted(identities, key=lambda identity: (-len(identity), identity))
    distinct: list[tuple] = []
    for identity in ordered:
        fields = dict(identity)
        if not any(all(dict(kept).get(k) == v for k, v in fields.items()) for kept in distinct):
            distinct.append(identity)
    return distinct
