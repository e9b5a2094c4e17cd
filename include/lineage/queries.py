"""Questions asked of the lineage store: where did this come from, who is affected, what changed between two runs.

Every query resolves a node the way a user names it (``namespace:name``, a dataset's table name such as
``nyc_taxi.yellow_rides_hourly_forecast``, a URL, a job name, or Marquez's ``dataset:<ns>:<name>``). Three graphs:

- ``upstream``/``downstream``/``impact`` walk the current graph through the closure table (one indexed query for all
  ancestors or descendants); with ``as_of`` the graph as it was at an instant (each job as the version of its latest
  run started by then, datasets first seen by then), with ``all_history`` every edge ever seen, with when;
- ``marquez_lineage`` answers ``GET /api/v1/lineage`` the way Marquez 0.51 does (``LineageService.lineage``): the
  start job of the node, then every job whose *current version* shares a dataset with the jobs reached so far, from
  a replay of the stored events in Marquez's terms (``MarquezModel``), whatever the closure table holds;
- ``run_lineage`` answers ``GET /api/v1/runlineage/upstream`` (``LineageDao.getUpstreamRuns``): run -> dataset
  version read -> run that wrote it -> ..., the provenance that ``diff --upstream`` compares.

Graphs render as a readable tree or, for ``--json``, in Marquez's lineage response shape (``{"graph": [{"id",
"type", "data", "inEdges", "outEdges"}]}``).
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from sqlalchemy import bindparam, func, inspect, select, text
from sqlalchemy.engine import Connection

from include.lineage.errors import EmptyStoreError, LineageError, UnknownNodeError
from include.lineage.events import TimeOutOfRangeError, utc_time
from include.lineage.events import parse_node_id as parse_event_node_id
from include.lineage.store import LineageStore, ancestry
from include.lineage.store.schema import (
    aliases_table,
    column_edges_table,
    dataset_versions_table,
    datasets_table,
    edges_table,
    events_table,
    job_versions_table,
    jobs_table,
    nodes_table,
    run_datasets_table,
    runs_table,
)

DEFAULT_DEPTH = 20  # Marquez's default
_CHUNK = 500


class Node(NamedTuple):  # a tuple: thousands are made per answer, a frozen dataclass cost 1.6 µs each
    id: int
    key: str
    kind: str
    namespace: str
    name: str
    label: str


@dataclass
class Subgraph:
    focus: Node
    direction: str  # upstream | downstream | both
    nodes: dict[int, Node]
    depths: dict[int, int]
    edges: list[tuple[int, int]]
    as_of: str | None = None  # the graph as it was at this instant (UTC), not the current one
    # every edge ever seen: (source, target) -> (first seen, last seen); None for the current graph
    edge_times: dict[tuple[int, int], tuple[str | None, str | None]] | None = None

    def datasets(self) -> list[Node]:
        return sorted(
            (n for n in self.nodes.values() if n.kind == "dataset" and n.id != self.focus.id),
            key=lambda n: (self.depths[n.id], n.label),
        )

    def jobs(self) -> list[Node]:
        return sorted(
            (n for n in self.nodes.values() if n.kind == "job" and n.id != self.focus.id),
            key=lambda n: (self.depths[n.id], n.label),
        )


# ------------------------------------------------------------------------- the two ways of walking the graph
_NAMED_PARAMETER = re.compile(r"(?<![:\w]):(\w+)")


@functools.lru_cache(maxsize=64)
def _pyformat(sql: str) -> str:
    """``:name`` parameters as ``%(name)s`` (psycopg2's paramstyle), a literal ``%`` doubled."""
    return _NAMED_PARAMETER.sub(r"%(\1)s", sql.replace("%", "%%"))


def fetch_rows(conn: Connection, sql: str, params: dict) -> list[tuple]:
    """The rows of a read-only SQL text with ``:name`` parameters, as plain tuples from the driver's cursor.

    For answers of thousands of rows SQLAlchemy's result rows cost more than the query itself (2,220 ancestors: 1.5 ms
    through ``Connection.execute``, 0.85 ms here). Used alike by the closure table's queries and the recursive CTEs
    they are compared with, so the comparison is of the queries."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql if conn.dialect.name == "sqlite" else _pyformat(sql), params)  # sqlite3 takes :name
        return cursor.fetchall()
    finally:
        cursor.close()


_PACKED_ANCESTRY_SQL = "SELECT packed FROM lineage_ancestry WHERE descendant = :node"
_CLOSURE_SQL = {
    "upstream": "SELECT ancestor, depth FROM lineage_closure WHERE descendant = :node AND depth <= :depth",
    "downstream": "SELECT descendant, depth FROM lineage_closure WHERE ancestor = :node AND depth <= :depth",
}


def closure_upstream(conn: Connection, node_id: int, depth: int = DEFAULT_DEPTH) -> list[tuple[int, int]]:
    """(ancestor, distance) of every ancestor within ``depth`` edges, the node itself at 0: one indexed row, the
    node's closure packed (include/lineage/store/ancestry.py); an unknown node has none."""
    rows = fetch_rows(conn, _PACKED_ANCESTRY_SQL, {"node": node_id})
    return ancestry.unpack(rows[0][0], depth) if rows else []


def closure_upstream_rows(conn: Connection, node_id: int, depth: int = DEFAULT_DEPTH) -> list[tuple[int, int]]:
    """The same answer from the closure table's rows, one per ancestor (what the packed row is made from)."""
    return fetch_rows(conn, _CLOSURE_SQL["upstream"], {"node": node_id, "depth": depth})


def _child_runs(conn: Connection, run_id: str) -> list[tuple[str, str]]:
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


def closure_downstream(conn: Connection, node_id: int, depth: int = DEFAULT_DEPTH) -> list[tuple[int, int]]:
    return fetch_rows(conn, _CLOSURE_SQL["downstream"], {"node": node_id, "depth": depth})


def recursive_walk_sql(
    step: str,
    start: str = "CAST(:start AS INTEGER)",
    answer: str = "SELECT node, MIN(depth) FROM walk GROUP BY node",
) -> str:
    """A recursive CTE ``walk(node, depth)`` from ``start`` at 0, adding the rows ``step`` selects as ``(node,
    depth)`` from each row ``w`` of the walk (``w.depth < :max_depth``); ``answer`` reads the walk (by default each
    node at its shortest depth).

    How a store without a closure table walks lineage (Marquez's ``LineageDao`` is one such walk): the one shape of
    every baseline the closure table and the store's other walks are measured against (``bench/explorer.py``)."""
    return f"WITH RECURSIVE walk(node, depth) AS (SELECT {start}, 0 UNION {step}) {answer}"


_CTE = {
    "upstream": recursive_walk_sql(
        "SELECT e.source, w.depth + 1 FROM lineage_edges e JOIN walk w ON e.target = w.node WHERE w.depth < :max_depth"
    ),
    "downstream": recursive_walk_sql(
        "SELECT e.target, w.depth + 1 FROM lineage_edges e JOIN walk w ON e.source = w.node WHERE w.depth < :max_depth"
    ),
}


def cte_walk(conn: Connection, node_id: int, direction: str, depth: int = DEFAULT_DEPTH) -> list[tuple[int, int]]:
    """The same answer as the closure table, from a recursive CTE over the edge table (how Marquez walks lineage)."""
    return fetch_rows(conn, _CTE[direction], {"start": node_id, "max_depth": depth})


def _chunks(values: Iterable, size: int = _CHUNK):
    values = list(values)
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _short(value: str | None, width: int = 12) -> str:
    return "—" if value is None else (value if len(value) <= width else value[:width] + "…")


# ------------------------------------------------------------------------- instants and Marquez node ids
_OFFSET = re.compile(r"(?:[Zz]|[+-]\d\d(?::?\d\d)?)$")
_SPACE_FOR_PLUS = re.compile(r"^(.*T\d\d:\d\d(?::\d\d(?:\.\d+)?)?) (\d\d(?::?\d\d)?)$")


def parse_instant(value: str, what: str = "asOf") -> str:
    """An ISO-8601 instant *with* its UTC offset as the store's fixed-width UTC text; LineageError (CLI exit 2, HTTP
    400) for anything else: a time without an offset names no instant (whose midnight?)."""
    text_value = (value or "").strip()
    spaced = _SPACE_FOR_PLUS.match(text_value)
    if spaced:  # a "+" in a URL's query string arrives as a space: 2025-02-01T10:00:00 01:00
        text_value = f"{spaced.group(1)}+{spaced.group(2)}"
    example = "e.g. 2025-02-01T10:00:00+00:00 or 2025-02-01T10:00:00Z"
    if "T" not in text_value or not _OFFSET.search(text_value):
        raise LineageError(f"{what} {value!r} is not an ISO-8601 time with a UTC offset ({example})")
    try:
        return utc_time(text_value)
    except TimeOutOfRangeError as error:
        raise LineageError(f"{what} {error}") from None
    except ValueError:
        raise LineageError(f"{what} {value!r} is not an ISO-8601 time with a UTC offset ({example})") from None


def parse_node_id(value: str) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of a Marquez dataset or job id, split as Marquez's ``NodeId.parts`` does
    (``events.parse_node_id``: ``dataset:postgres://host:5432:db.schema.table`` -> ``("dataset",
    "postgres://host:5432", "db.schema.table")``); None if ``value`` is not one, so it may be another kind of name."""
    try:
        parsed = parse_event_node_id(value)
    except (ValueError, LineageError):
        return None
    if not parsed or parsed[0] not in ("dataset", "job") or not parsed[1] or not parsed[2]:
        return None  # not an id, or a datasetField's
    return parsed[0], parsed[1], parsed[2]


def node_id(kind: str, namespace: str, name: str) -> str:
    return f"{kind}:{namespace}:{name}"


def _run_start():
    """When a run started: its START event, else its earliest event (``first_event_time``, where the store keeps
    it), else its latest state change."""
    r = runs_table
    first = r.c.get("first_event_time")
    return (
        func.coalesce(r.c.started_at, first, r.c.state_time)
        if first is not None
        else func.coalesce(r.c.started_at, r.c.state_time)
    )


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


# The as-of walk's queries (``LineageQueries._as_of_walk``), prepared once: building a statement per level cost more
# than running it.
_RUN_START_SQL = "COALESCE(r.started_at, r.first_event_time, r.state_time)"
_WALK_RUNS_OF_JOBS = text(
    f"SELECT r.id, j.node_id, {_RUN_START_SQL} FROM lineage_runs r JOIN lineage_jobs j ON j.id = r.job_id"
    f" WHERE j.node_id IN :jobs AND {_RUN_START_SQL} <= :as_of"
).bindparams(bindparam("jobs", expanding=True))
_WALK_DATASET_ROWS = text("SELECT node_id, id, created_at FROM lineage_datasets WHERE node_id IN :nodes").bindparams(
    bindparam("nodes", expanding=True)
)
_WALK_DATASETS_OF_RUNS = text(
    "SELECT rd.run_id, d.node_id, d.created_at FROM lineage_run_datasets rd JOIN lineage_datasets d"
    " ON d.id = rd.dataset_id WHERE rd.run_id IN :runs AND rd.direction = :direction"
).bindparams(bindparam("runs", expanding=True))
_WALK_JOBS_OF_DATASETS = text(
    "SELECT DISTINCT j.node_id, rd.dataset_id FROM lineage_run_datasets rd JOIN lineage_runs r ON r.id = rd.run_id"
    " JOIN lineage_jobs j ON j.id = r.job_id WHERE rd.dataset_id IN :datasets AND rd.direction = :direction"
).bindparams(bindparam("datasets", expanding=True))
_WALK_ROWS_OF_RUNS = text(
    "SELECT run_id, dataset_id FROM lineage_run_datasets WHERE run_id IN :runs AND direction = :direction"
).bindparams(bindparam("runs", expanding=True))

# Run provenance (``LineageQueries.run_lineage``). The run that wrote the version an input row ``rd`` of run ``u`` read:
# the version's creator when the input carried a version facet, else the latest write of that dataset by another
# run that had ended by the time ``u`` started.
_WRITTEN_AT = "COALESCE({w}.ended_at, {w}.state_time, {w}.started_at)"
_LATEST_WRITE = (
    "(SELECT lw.run_id FROM lineage_run_datasets lw JOIN lineage_runs wr ON wr.id = lw.run_id"
    " WHERE lw.dataset_id = rd.dataset_id AND lw.direction = 'output' AND lw.run_id <> rd.run_id"
    f" AND {_WRITTEN_AT.format(w='wr')} <= COALESCE(u.started_at, u.first_event_time, u.state_time, '')"
    f" ORDER BY {_WRITTEN_AT.format(w='wr')} DESC, lw.run_id DESC LIMIT 1)"
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
    " SELECT u.id, j.namespace, j.name, jv.version, u.started_at, u.ended_at, u.state, u.state_time,"
    " u.job_version_id, u.facets, d.namespace, d.name, n.label, rd.dataset_version_id, dv.version,"
    f" dv.created_by_run_id, dv.created_at, lw.run_id, lwv.version, {_WRITTEN_AT.format(w='wr')}"
    " FROM reached p JOIN lineage_runs u ON u.id = p.run JOIN lineage_jobs j ON j.id = u.job_id"
    " LEFT JOIN lineage_job_versions jv ON jv.id = u.job_version_id"
    " LEFT JOIN lineage_run_datasets rd ON rd.run_id = u.id AND rd.direction = 'input'"
    " LEFT JOIN lineage_datasets d ON d.id = rd.dataset_id LEFT JOIN lineage_nodes n ON n.id = d.node_id"
    " LEFT JOIN lineage_dataset_versions dv ON dv.id = rd.dataset_version_id"
    " LEFT JOIN lineage_run_datasets lw ON rd.dataset_version_id IS NULL AND lw.dataset_id = rd.dataset_id"
    # CASE: the latest write is looked up for an input without a version only (a join on it alone ran it for all)
    f" AND lw.direction = 'output' AND lw.run_id = CASE WHEN rd.dataset_version_id IS NULL THEN {_LATEST_WRITE} END"
    " LEFT JOIN lineage_runs wr ON wr.id = lw.run_id"
    " LEFT JOIN lineage_dataset_versions lwv ON lwv.id = lw.dataset_version_id"
    " WHERE p.run IS NOT NULL"
)


def _as_of_walk_sql(upstream: bool) -> str:
    """The as-of walk (``LineageQueries._as_of_walk``) as one recursive query of SQLite: ``walk(node, ref, kind,
    via)``, ``ref`` the node's job or dataset row, ``via`` the node it was reached from, so each row is an edge.

    A job steps to the datasets its latest run started by ``:as_of`` read (upstream; wrote, downstream) that were first
    seen by then; a dataset to the jobs whose latest run then wrote (read) it. Rows are unique per edge, not per
    (node, depth): a node is walked once per edge that reaches it, never once per path length, which in graphs with
    diamonds is what makes a walk that carries its depth (the bench's baseline) revisit a node many times. The depths
    are then a breadth-first walk of these edges in Python."""
    started = "COALESCE(x.started_at, x.first_event_time, x.state_time)"
    latest = (
        f"(SELECT x.id FROM lineage_runs x WHERE x.job_id = {{job}} AND {started} <= :as_of"
        f" ORDER BY {started} DESC, x.id DESC LIMIT 1)"
    )
    side, other = ("input", "output") if upstream else ("output", "input")
    return (
        "WITH RECURSIVE walk(node, ref, kind, via) AS (SELECT :start, :ref, :kind, NULL"
        " UNION SELECT d.node_id, d.id, 'dataset', w.node FROM walk w"
        f" JOIN lineage_run_datasets rd ON rd.run_id = {latest.format(job='w.ref')} AND rd.direction = '{side}'"
        " JOIN lineage_datasets d ON d.id = rd.dataset_id"
        " WHERE w.kind = 'job' AND (d.created_at IS NULL OR d.created_at <= :as_of)"
        " UNION SELECT j.node_id, j.id, 'job', w.node FROM walk w"
        f" JOIN lineage_run_datasets rd ON rd.dataset_id = w.ref AND rd.direction = '{other}'"
        " JOIN lineage_runs r ON r.id = rd.run_id JOIN lineage_jobs j ON j.id = r.job_id"
        f" WHERE w.kind = 'dataset' AND r.id = {latest.format(job='r.job_id')})"
        " SELECT w.node, w.via, n.key, n.kind, n.namespace, n.name, n.label FROM walk w"
        " JOIN lineage_nodes n ON n.id = w.node WHERE w.via IS NOT NULL"
    )


_AS_OF_WALK_SQL = {"upstream": _as_of_walk_sql(True), "downstream": _as_of_walk_sql(False)}


_NODE_COLUMNS = "id, key, kind, namespace, name, label"  # Node's fields, in order
_NODE_BY_IDENTITY = (
    f"SELECT {_NODE_COLUMNS} FROM lineage_nodes WHERE kind = :kind AND namespace = :namespace AND name = :name"
)
_NODE_BY_KEY = f"SELECT {_NODE_COLUMNS} FROM lineage_nodes WHERE key = :ref"
_NODE_BY_ALIAS = (
    "SELECT DISTINCT n.id, n.key, n.kind, n.namespace, n.name, n.label FROM lineage_nodes n"
    " JOIN lineage_node_aliases a ON a.node_id = n.id WHERE a.alias = :ref"
)


def _node_of(row) -> Node:
    return Node(**{name: row._mapping[name] for name in ("id", "key", "kind", "namespace", "name", "label")})


# ------------------------------------------------------------------------- Marquez's model of the events
Ref = tuple[str, str]  # (namespace, name) of a dataset or a job

_DONE = frozenset({"COMPLETE", "FAIL", "ABORT"})  # OpenLineageDao.getRunState(...).isDone()
_TERMINAL = frozenset({"COMPLETE", "FAIL"})  # LineageEvent.isTerminalEvent()


@dataclass(frozen=True)
class _CompactEvent:
    """What Marquez's model keeps of one event: the job, run, type, datasets (with their symlinks)."""

    time: str
    id: int
    job: Ref | None
    run: str | None
    event_type: str
    streaming: bool
    location: str | None
    inputs: tuple[tuple[str, str, tuple[Ref, ...]], ...]
    outputs: tuple[tuple[str, str, tuple[Ref, ...]], ...]
    dataset: tuple[str, str, tuple[Ref, ...]] | None

    @classmethod
    def of(cls, event_id: int, time: str, payload: str) -> _CompactEvent:
        event = json.loads(payload)

        def dataset(item) -> tuple[str, str, tuple[Ref, ...]]:
            identifiers = ((item.get("facets") or {}).get("symlinks") or {}).get("identifiers") or []
            links = tuple(
                (i["namespace"], i["name"])
                for i in identifiers
                if isinstance(i, dict) and i.get("namespace") and i.get("name")
            )
            return item["namespace"], item["name"], links

        job = event.get("job") if isinstance(event.get("job"), dict) else None
        facets = (job or {}).get("facets") or {}
        run = event.get("run") if isinstance(event.get("run"), dict) else None
        return cls(
            time=time,
            id=event_id,
            job=(job["namespace"], job["name"]) if job else None,
            run=run.get("runId") if run else None,
            event_type=(event.get("eventType") or "").upper(),
            streaming=((facets.get("jobType") or {}).get("processingType") or "").upper() == "STREAMING",
            location=(facets.get("sourceCodeLocation") or {}).get("url"),
            inputs=tuple(dataset(d) for d in event.get("inputs") or []),
            outputs=tuple(dataset(d) for d in event.get("outputs") or []),
            dataset=dataset(event["dataset"]) if isinstance(event.get("dataset"), dict) else None,
        )


@dataclass
class MarquezModel:
    """The part of Marquez's database its lineage graph reads, rebuilt by replaying the stored events in event-time
    order the way ``OpenLineageDao.updateMarquezModel`` processes them (Marquez 0.51):

    - datasets: a dataset's own name is registered first-come (``dataset_symlinks`` is_primary), then the names of
      its ``symlinks`` facet point to the same dataset unless already taken (``ON CONFLICT DO NOTHING``): a later
      event that names a symlink lands on that dataset (``upsertLineageDataset``, ``DatasetSymlinkDao``);
    - job versions exist only once a run is done (COMPLETE, FAIL, ABORT; ``updateMarquezOnComplete``), from the
      run's inputs and outputs over all its events; a streaming job's at each event with a new version;
    - current inputs/outputs (``job_versions_io_mapping.is_current_job_version``): a new version's inputs replace
      the job's current inputs if it has any, likewise outputs (``upsertInputDatasetFor``); any event of the job
      without inputs (without outputs) clears them (``markInputOrOutputDatasetAsPreviousFor`` in
      ``updateBaseMarquezModel``), except a streaming job's terminal event with no datasets at all.
    """

    registry: dict[Ref, Ref] = field(default_factory=dict)  # any name of a dataset -> its primary name
    inputs: dict[Ref, frozenset[Ref]] = field(default_factory=dict)  # job -> current INPUT datasets
    outputs: dict[Ref, frozenset[Ref]] = field(default_factory=dict)
    # dataset -> (created_at, order, job) of the newest job version having it as OUTPUT (INPUT)
    writer: dict[Ref, tuple[str, int, Ref]] = field(default_factory=dict)
    reader: dict[Ref, tuple[str, int, Ref]] = field(default_factory=dict)
    jobs: set[Ref] = field(default_factory=set)

    @classmethod
    def replay(cls, compact_events: Iterable[_CompactEvent]) -> MarquezModel:
        model = cls()
        run_io: dict[str, tuple[set[Ref], set[Ref]]] = {}
        versions: dict[tuple, tuple[str, int]] = {}

        def register(namespace: str, name: str, links: tuple[Ref, ...]) -> Ref:
            primary = model.registry.setdefault((namespace, name), (namespace, name))
            for link in links:
                model.registry.setdefault(link, primary)
            return primary

        def new_version(job: Ref, ins: set[Ref], outs: set[Ref], location, time: str, order: int) -> None:
            key = (job, frozenset(ins), frozenset(outs), location)
            created = versions.setdefault(key, (time, order))  # upsertJobVersion: ON CONFLICT keeps created_at
            for dataset in ins:
                if dataset not in model.reader or created > model.reader[dataset][:2]:
                    model.reader[dataset] = (*created, job)
            for dataset in outs:
                if dataset not in model.writer or created > model.writer[dataset][:2]:
                    model.writer[dataset] = (*created, job)
            if ins:
                model.inputs[job] = frozenset(ins)
            if outs:
                model.outputs[job] = frozenset(outs)

        for order, event in enumerate(compact_events):
            ins = {register(*d) for d in event.inputs}
            outs = {register(*d) for d in event.outputs}
            if event.dataset:
                register(*event.dataset)
            job = event.job
            if job is None:
                continue
            model.jobs.add(job)
            if event.run is None:  # a JobEvent: upsertRunlessJobVersion
                new_version(job, ins, outs, event.location, event.time, order)
                continue
            io = run_io.setdefault(event.run, (set(), set()))
            io[0].update(ins)
            io[1].update(outs)
            quiet = event.streaming and event.event_type in _TERMINAL and not ins and not outs
            if not ins and not quiet:
                model.inputs.pop(job, None)
            if not outs and not quiet:
                model.outputs.pop(job, None)
            if event.streaming:
                key = (job, frozenset(io[0]), frozenset(io[1]), event.location)
                if not quiet and key not in versions:
                    new_version(job, io[0], io[1], event.location, event.time, order)
            elif event.event_type in _DONE:
                new_version(job, io[0], io[1], event.location, event.time, order)
        return model

    def job_io(self) -> dict[Ref, tuple[frozenset[Ref], frozenset[Ref]]]:
        """Jobs with current inputs or outputs (``job_io`` of ``LineageDao.getLineage``) and those datasets."""
        return {
            job: (self.inputs.get(job, frozenset()), self.outputs.get(job, frozenset()))
            for job in set(self.inputs) | set(self.outputs)
        }

    def start_job(self, dataset: Ref) -> Ref | None:
        """``LineageDao.getJobFromInputOrOutput``: of every job version ever (current or not), the newest that
        writes the dataset, else the newest that reads it (``ORDER BY io_type DESC, jv.created_at DESC``)."""
        found = self.writer.get(dataset) or self.reader.get(dataset)
        return found[2] if found else None


def marquez_walk(job_io: dict[Ref, tuple[frozenset[Ref], frozenset[Ref]]], start: Ref, depth: int) -> set[Ref]:
    """``LineageDao.getLineage``: the start job, then level by level every job with inputs or outputs sharing any
    dataset (in either role) with a job of the level before, ``depth`` levels; a start job with no datasets is
    returned alone (``lineage_outside_job_io``)."""
    if start not in job_io:
        return {start}
    by_dataset: dict[Ref, set[Ref]] = {}
    for job, (ins, outs) in job_io.items():
        for dataset in ins | outs:
            by_dataset.setdefault(dataset, set()).add(job)
    reached, frontier = {start}, {start}
    for _ in range(depth):
        following = set()
        for job in frontier:
            ins, outs = job_io[job]
            for dataset in ins | outs:
                following |= by_dataset[dataset]
        frontier = following - reached
        if not frontier:
            break
        reached |= frontier
    return reached


def _earliest(a: str | None, b: str | None) -> str | None:
    return min(x for x in (a, b) if x is not None) if a is not None or b is not None else None


def _latest(a: str | None, b: str | None) -> str | None:
    return max(x for x in (a, b) if x is not None) if a is not None or b is not None else None


def _directed_depths(edges: Iterable[tuple[int, int]], start: int, forward: bool, depth: int) -> dict[int, int]:
    """Shortest distance in edges from ``start`` along (forward) or against the edges, at most ``depth``."""
    adjacent: dict[int, list[int]] = {}
    for source, target in edges:
        if forward:
            adjacent.setdefault(source, []).append(target)
        else:
            adjacent.setdefault(target, []).append(source)
    depths = {start: 0}
    frontier = [start]
    for distance in range(1, depth + 1):
        following = []
        for node in frontier:
            for other in adjacent.get(node, ()):
                if other not in depths:
                    depths[other] = distance
                    following.append(other)
        frontier = following
        if not frontier:
            break
    return depths


class NotYetSeenError(UnknownNodeError):
    """The node exists, but was first seen after the instant asked about: not in that graph (exit 2, HTTP 404)."""

    def __init__(self, ref: str, as_of: str, first_seen: str):
        LineageError.__init__(
            self, f"{ref!r} was first seen at {first_seen}, after {as_of}: it is not in the graph as of then"
        )
        self.ref, self.suggestions = ref, []


class LineageQueries:
    def __init__(self, store: LineageStore):
        self.store = store
        self._model_lock = threading.Lock()
        self._model_key: tuple | None = None
        self._model: MarquezModel | None = None
        self._compact: dict[int, _CompactEvent] = {}

    # ------------------------------------------------------------------------- names
    def resolve(self, ref: str, conn: Connection | None = None) -> Node:
        """The node a user means by ``ref``; UnknownNodeError with close names, or EmptyStoreError.

        A Marquez id (``dataset:<ns>:<name>``, ``job:<ns>:<name>``) is parsed into (kind, namespace, name) and looked
        up by those three: the namespace may itself hold colons (``postgres://host:5432``)."""
        if conn is None:
            with self.store.engine.connect() as own:
                return self.resolve(ref, own)
        n = nodes_table
        rows = []
        parsed = parse_node_id(ref)
        if parsed:
            kind, namespace, name = parsed
            rows = fetch_rows(conn, _NODE_BY_IDENTITY, {"kind": kind, "namespace": namespace, "name": name})
        if not rows:
            rows = fetch_rows(conn, _NODE_BY_KEY, {"ref": ref})
        if not rows:
            rows = fetch_rows(conn, _NODE_BY_ALIAS, {"ref": ref})
        if len(rows) == 1:
            return Node(*rows[0])
        if len(rows) > 1:
            raise LineageError(
                f"{ref!r} names {len(rows)} nodes; use one of: " + ", ".join(sorted(Node(*r).key for r in rows))
            )
        if conn.execute(select(n.c.id).limit(1)).first() is None:
            raise EmptyStoreError(self.store.url)
        raise UnknownNodeError(ref, self._suggest(conn, ref))

    def _suggest(self, conn: Connection, ref: str, limit: int = 5) -> list[str]:
        a = aliases_table
        last = ref.replace(":", "/").rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[-1]
        like = [
            r
            for r in conn.execute(
                select(a.c.alias)
                .where(func.lower(a.c.alias).contains(last.lower()[:200], autoescape=True))  # % and _ literal
                .where(~a.c.alias.like("dataset:%"), ~a.c.alias.like("job:%"))
                .limit(200)
            ).scalars()
        ]
        candidates = like or list(
            conn.execute(select(a.c.alias).where(~a.c.alias.like("dataset:%"), ~a.c.alias.like("job:%"))).scalars()
        )
        close = difflib.get_close_matches(ref, candidates, n=limit, cutoff=0.5)
        for alias in sorted(like, key=len):
            if len(close) >= limit:
                break
            if alias not in close:
                close.append(alias)
        return close

    def _nodes(self, conn: Connection, ids: Iterable[int]) -> dict[int, Node]:
        out = {}
        for chunk in _chunks(ids):
            placeholders = ", ".join(f":n{index}" for index in range(len(chunk)))
            for row in fetch_rows(
                conn,
                f"SELECT {_NODE_COLUMNS} FROM lineage_nodes WHERE id IN ({placeholders})",
                {f"n{index}": node for index, node in enumerate(chunk)},
            ):
                out[row[0]] = Node(*row)
        return out

    def _edges_among(self, conn: Connection, ids: set[int]) -> list[tuple[int, int]]:
        edges = []
        for chunk in _chunks(ids):
            for source, target in conn.execute(
                select(edges_table.c.source, edges_table.c.target).where(edges_table.c.target.in_(chunk))
            ):
                if source in ids:
                    edges.append((source, target))
        return sorted(edges)

    # ------------------------------------------------------------------------- graph queries
    def upstream(
        self, ref: str, depth: int = DEFAULT_DEPTH, *, as_of: str | None = None, all_history: bool = False
    ) -> Subgraph:
        return self._walk(ref, "upstream", depth, as_of, all_history)

    def downstream(
        self, ref: str, depth: int = DEFAULT_DEPTH, *, as_of: str | None = None, all_history: bool = False
    ) -> Subgraph:
        return self._walk(ref, "downstream", depth, as_of, all_history)

    def neighbourhood(
        self, ref: str, depth: int = DEFAULT_DEPTH, *, as_of: str | None = None, all_history: bool = False
    ) -> Subgraph:
        """Upstream and downstream together (the CLI's directed walks; Marquez's own graph is ``marquez_lineage``)."""
        return self._walk(ref, "both", depth, as_of, all_history)

    def _walk(self, ref: str, direction: str, depth: int, as_of: str | None = None, all_history: bool = False):
        as_of = parse_instant(as_of) if as_of is not None else None
        with self.store.engine.connect() as conn:
            focus = self.resolve(ref, conn)
            if as_of is None and not all_history and direction != "both":
                depths, nodes, among = self._closure_subgraph(conn, focus, direction, depth)
                return Subgraph(focus, direction, nodes, depths, among)
            if as_of is None and not all_history:
                depths: dict[int, int] = {}
                if direction in ("upstream", "both"):
                    depths.update(closure_upstream(conn, focus.id, depth))
                if direction in ("downstream", "both"):
                    for node, distance in closure_downstream(conn, focus.id, depth):
                        depths[node] = min(distance, depths.get(node, distance))
                depths[focus.id] = 0
                nodes = self._nodes(conn, depths)
                return Subgraph(focus, direction, nodes, depths, self._edges_among(conn, set(depths)))
            ref = self._check_existed(conn, focus, as_of) if as_of is not None else None
            if as_of is not None and not all_history and direction != "both":
                nodes: dict[int, Node] = {}
                depths, among = self._as_of_walk(conn, focus, direction, depth, as_of, nodes, ref)
                if len(nodes) != len(depths):  # the level-by-level walk does not give them
                    nodes = self._nodes(conn, depths)
                return Subgraph(focus, direction, nodes, depths, among, as_of=as_of)
            edges = self._history_edges(conn, as_of) if all_history else self._as_of_edges(conn, as_of)[0]
            depths = {}
            if direction in ("upstream", "both"):
                depths.update(_directed_depths(edges, focus.id, False, depth))
            if direction in ("downstream", "both"):
                for node, distance in _directed_depths(edges, focus.id, True, depth).items():
                    depths[node] = min(distance, depths.get(node, distance))
            nodes = self._nodes(conn, depths)
            among = sorted(edge for edge in edges if edge[0] in depths and edge[1] in depths)
            times = {edge: edges[edge] for edge in among} if all_history else None
            return Subgraph(focus, direction, nodes, depths, among, as_of=as_of, edge_times=times)

    def _closure_subgraph(
        self, conn: Connection, focus: Node, direction: str, depth: int
    ) -> tuple[dict[int, int], dict[int, Node], list[tuple[int, int]]]:
        """The current graph's upstream (downstream) of ``focus`` from the closure table: the nodes with their
        distances, and the edges among them, in two indexed queries joined to the closure (no list of ids sent)."""
        near, far = ("descendant", "ancestor") if direction == "upstream" else ("ancestor", "descendant")
        params = {"focus": focus.id, "depth": depth}
        depths: dict[int, int] = {focus.id: 0}
        nodes: dict[int, Node] = {focus.id: focus}
        for node_id, key, kind, namespace, name, label, distance in fetch_rows(
            conn,
            "SELECT n.id, n.key, n.kind, n.namespace, n.name, n.label, c.depth FROM lineage_closure c"
            f" JOIN lineage_nodes n ON n.id = c.{far} WHERE c.{near} = :focus AND c.depth <= :depth",
            params,
        ):
            depths[node_id] = distance
            nodes[node_id] = Node(node_id, key, kind, namespace, name, label)
        # The edges reaching each node (upstream: into it; downstream: out of it) whose other end is in the answer too.
        end = "target" if direction == "upstream" else "source"
        among = sorted(
            (source, target)
            for source, target in fetch_rows(  # CROSS JOIN: SQLite keeps this order (closure rows, then their edges)
                conn,
                "SELECT e.source, e.target FROM lineage_closure a CROSS JOIN lineage_edges e"
                f" WHERE a.{near} = :focus AND a.depth <= :depth AND e.{end} = a.{far}",
                params,
            )
            if (source if direction == "upstream" else target) in depths
        )
        return depths, nodes, among

    def _check_existed(self, conn: Connection, node: Node, as_of: str) -> int | None:
        """NotYetSeenError if the node was first seen after ``as_of``; else the id of its job or dataset row."""
        table = "lineage_datasets" if node.kind == "dataset" else "lineage_jobs"
        rows = fetch_rows(conn, f"SELECT id, created_at FROM {table} WHERE node_id = :node", {"node": node.id})
        row_id, first_seen = rows[0] if rows else (None, None)
        if first_seen is not None and first_seen > as_of:
            raise NotYetSeenError(node.label, as_of, first_seen)
        return row_id

    # ------------------------------------------------------------------------- the graph at an instant, and ever
    def _as_of_edges(self, conn: Connection, as_of: str) -> tuple[dict[tuple[int, int], None], dict[int, tuple]]:
        """The graph at ``as_of``: each job as the version of its latest run started at or before it (the run's inputs
        and outputs, which are what its job version records), datasets first seen at or before it. Also returns,
        per job node, (start, run id) of that run."""
        r, rd, d, j = runs_table, run_datasets_table, datasets_table, jobs_table
        started = _run_start()
        latest: dict[int, tuple[str, str]] = {}
        for run_id, job_id, time in conn.execute(select(r.c.id, r.c.job_id, started).where(started <= as_of)):
            if job_id not in latest or (time, run_id) > latest[job_id]:
                latest[job_id] = (time, run_id)
        job_nodes = dict(conn.execute(select(j.c.id, j.c.node_id)).all())
        run_job = {run_id: job_nodes[job_id] for job_id, (_, run_id) in latest.items()}
        edges: dict[tuple[int, int], None] = {}
        for chunk in _chunks(run_job):
            for run_id, direction, dataset_node, created in conn.execute(
                select(rd.c.run_id, rd.c.direction, d.c.node_id, d.c.created_at)
                .join(d, d.c.id == rd.c.dataset_id)
                .where(rd.c.run_id.in_(chunk))
            ):
                if created is not None and created > as_of:
                    continue
                job_node = run_job[run_id]
                edges[(dataset_node, job_node) if direction == "input" else (job_node, dataset_node)] = None
        return edges, {job_nodes[job_id]: value for job_id, value in latest.items()}

    def _as_of_walk(
        self,
        conn: Connection,
        focus: Node,
        direction: str,
        depth: int,
        as_of: str,
        nodes: dict | None = None,
        ref: int | None = None,
    ) -> tuple[dict[int, int], list[tuple[int, int]]]:
        """The upstream or downstream of ``focus`` in the graph at ``as_of`` (the rule of ``_as_of_edges``): on SQLite
        one recursive query (``_as_of_walk_sql``), elsewhere level by level (``_as_of_walk_by_levels``: PostgreSQL
        refuses a recursive term that names the walk twice). Returns (node -> distance, the edges among them)."""
        if conn.dialect.name != "sqlite":
            return self._as_of_walk_by_levels(conn, focus, direction, depth, as_of)
        if ref is None:  # not given by _check_existed
            refs = fetch_rows(  # a dataset first seen after the instant has no edges then
                conn,
                "SELECT id FROM lineage_jobs WHERE node_id = :node"
                if focus.kind == "job"
                else "SELECT id FROM lineage_datasets WHERE node_id = :node"
                " AND (created_at IS NULL OR created_at <= :as_of)",
                {"node": focus.id, "as_of": as_of},
            )
            ref = refs[0][0] if refs else None
        params = {"start": focus.id, "ref": ref, "kind": focus.kind, "as_of": as_of}
        upstream = direction == "upstream"
        reached = {focus.id: focus}
        following: dict[int, list[int]] = {}  # node -> the nodes the walk reached from it (one per edge)
        for node, via, *columns in fetch_rows(conn, _AS_OF_WALK_SQL[direction], params):
            following.setdefault(via, []).append(node)
            if node not in reached:
                reached[node] = Node(node, *columns)
        depths = {focus.id: 0}
        frontier = [focus.id]
        for distance in range(1, depth + 1):
            next_frontier = []
            for near in frontier:
                for node in following.get(near, ()):
                    if node not in depths:
                        depths[node] = distance
                        next_frontier.append(node)
            frontier = next_frontier
            if not frontier:
                break
        if nodes is not None:  # the nodes of the answer, as the walk found them
            nodes.update((node, reached[node]) for node in depths)
        among = [
            (node, near) if upstream else (near, node)
            for near, ends in following.items()
            if near in depths
            for node in ends
            if node in depths
        ]
        among.sort()
        return depths, among

    def _as_of_walk_by_levels(
        self, conn: Connection, focus: Node, direction: str, depth: int, as_of: str
    ) -> tuple[dict[int, int], list[tuple[int, int]]]:
        """The upstream or downstream of ``focus`` in the graph at ``as_of`` (the rule of ``_as_of_edges``), walked
        from the node level by level with indexed queries instead of building the whole graph of then: per level,
        the jobs that ever wrote (read) the frontier's datasets, each job's latest run started by then, and that
        run's datasets first seen by then. Returns (node -> distance, the edges of that graph among the nodes)."""
        upstream = direction == "upstream"
        kinds: dict[int, str] = {focus.id: focus.kind}
        latest_run: dict[int, str | None] = {}  # job node -> its latest run started by then
        dataset_ids: dict[int, int] = {}  # dataset node -> dataset row id (of datasets first seen by then)

        def latest_runs(job_nodes: list[int]) -> None:
            wanted = [node for node in job_nodes if node not in latest_run]
            for chunk in _chunks(wanted):
                best: dict[int, tuple] = {}
                for run_id, job_node, time in conn.execute(_WALK_RUNS_OF_JOBS, {"jobs": chunk, "as_of": as_of}):
                    if job_node not in best or (time, run_id) > best[job_node]:
                        best[job_node] = (time, run_id)
                for node in chunk:
                    latest_run[node] = best[node][1] if node in best else None

        def row_ids(dataset_nodes: list[int]) -> None:
            wanted = [node for node in dataset_nodes if node not in dataset_ids]
            for chunk in _chunks(wanted):
                for node, row_id, created in conn.execute(_WALK_DATASET_ROWS, {"nodes": chunk}):
                    if created is None or created <= as_of:  # a dataset first seen later has no edges then
                        dataset_ids[node] = row_id

        def neighbours(nodes: list[int]) -> list[tuple[int, int]]:
            """The edges of the graph then that reach ``nodes`` (upstream: ending at them; downstream: leaving them)."""
            found: list[tuple[int, int]] = []
            jobs_ = [n for n in nodes if kinds[n] == "job"]
            datasets_ = [n for n in nodes if kinds[n] == "dataset"]
            latest_runs(jobs_)
            runs_of = {latest_run[n]: n for n in jobs_ if latest_run[n] is not None}
            side = "input" if upstream else "output"
            for chunk in _chunks(runs_of):
                for run_id, dataset_node, created in conn.execute(
                    _WALK_DATASETS_OF_RUNS, {"runs": chunk, "direction": side}
                ):
                    if created is None or created <= as_of:
                        kinds[dataset_node] = "dataset"
                        job_node = runs_of[run_id]
                        found.append((dataset_node, job_node) if upstream else (job_node, dataset_node))
            row_ids(datasets_)
            by_row = {dataset_ids[n]: n for n in datasets_ if n in dataset_ids}
            other = "output" if upstream else "input"
            candidates: dict[int, set[int]] = {}  # job node -> datasets of the frontier it ever wrote (read)
            for chunk in _chunks(by_row):
                for job_node, dataset_row in conn.execute(
                    _WALK_JOBS_OF_DATASETS, {"datasets": chunk, "direction": other}
                ):
                    candidates.setdefault(job_node, set()).add(by_row[dataset_row])
            latest_runs(list(candidates))
            current = {latest_run[n]: n for n in candidates if latest_run[n] is not None}
            for chunk in _chunks(current):
                for run_id, dataset_row in conn.execute(_WALK_ROWS_OF_RUNS, {"runs": chunk, "direction": other}):
                    job_node = current[run_id]
                    dataset_node = by_row.get(dataset_row)
                    if dataset_node is not None and dataset_node in candidates[job_node]:
                        kinds[job_node] = "job"
                        found.append((job_node, dataset_node) if upstream else (dataset_node, job_node))
            return found

        depths = {focus.id: 0}
        edges: set[tuple[int, int]] = set()
        frontier = [focus.id]
        level = 0
        while frontier:
            found = neighbours(frontier)
            edges.update(found)
            level += 1
            following = []
            for edge in found:
                other_end = edge[0] if upstream else edge[1]
                if other_end not in depths and level <= depth:
                    depths[other_end] = level
                    following.append(other_end)
            frontier = following
        among = sorted(edge for edge in edges if edge[0] in depths and edge[1] in depths)
        return depths, among

    def _history_edges(self, conn: Connection, as_of: str | None = None) -> dict[tuple[int, int], tuple]:
        """Every edge ever seen, (source, target) -> (first seen, last seen): the store's ``lineage_edge_history``
        when it has one, else derived from runs x their datasets x the runs' times (plus the current edges)."""
        if inspect(conn).has_table("lineage_edge_history"):
            rows = conn.execute(text("SELECT source, target, first_seen, last_seen FROM lineage_edge_history")).all()
            found = {(source, target): (first, last) for source, target, first, last in rows}
        else:
            r, rd, d, j = runs_table, run_datasets_table, datasets_table, jobs_table
            started = _run_start()
            ended = func.coalesce(r.c.ended_at, r.c.state_time, r.c.started_at)
            found = {}
            for direction, dataset_node, job_node, first, last in conn.execute(
                select(rd.c.direction, d.c.node_id, j.c.node_id, func.min(started), func.max(ended))
                .select_from(rd)
                .join(r, r.c.id == rd.c.run_id)
                .join(j, j.c.id == r.c.job_id)
                .join(d, d.c.id == rd.c.dataset_id)
                .group_by(rd.c.direction, d.c.node_id, j.c.node_id)
            ):
                found[(dataset_node, job_node) if direction == "input" else (job_node, dataset_node)] = (first, last)
            for source, target in conn.execute(select(edges_table.c.source, edges_table.c.target)):
                found.setdefault((source, target), (None, None))
        if as_of is not None:
            found = {edge: when for edge, when in found.items() if when[0] is None or when[0] <= as_of}
        return found

    # ------------------------------------------------------------------------- Marquez's GET /api/v1/lineage
    def marquez_model(self) -> MarquezModel:
        with self.store.engine.connect() as conn:
            return self._marquez_model(conn)

    def _marquez_model(self, conn: Connection) -> MarquezModel:
        """The events replayed into ``MarquezModel``; kept until the store has other events."""
        e = events_table
        key = tuple(conn.execute(select(func.count(), func.max(e.c.id))).one())
        with self._model_lock:
            if self._model is not None and self._model_key == key:
                return self._model
            known = self._compact
            query = select(e.c.id, e.c.event_time, e.c.payload)
            since = max(known) if known else 0
            for row in conn.execute(query.where(e.c.id > since)):
                known[row.id] = _CompactEvent.of(row.id, row.event_time or "", row.payload)
            if len(known) != key[0]:  # not only new rows: read them all again
                known.clear()
                for row in conn.execute(query):
                    known[row.id] = _CompactEvent.of(row.id, row.event_time or "", row.payload)
            self._model = MarquezModel.replay(sorted(known.values(), key=lambda c: (c.time, c.id)))
            self._model_key = key
            return self._model

    def marquez_lineage(
        self, ref: str, depth: int = DEFAULT_DEPTH, *, as_of: str | None = None, history: str | None = None
    ) -> dict:
        """``GET /api/v1/lineage?nodeId=&depth=`` as Marquez 0.51 answers it (``LineageService.lineage``): the start
        job of the node (a job itself; for a dataset ``getJobFromInputOrOutput``), the jobs ``getLineage`` reaches
        from it through the datasets of their current versions, and those datasets, with Marquez's edges.

        Beyond Marquez: ``as_of`` (the graph at that instant: each job as the version of its latest run started by
        then, datasets first seen by then) and ``history="all"`` (every edge ever seen, each with ``firstSeen`` and
        ``lastSeen``)."""
        as_of = parse_instant(as_of) if as_of is not None else None
        if history not in (None, "", "current", "all"):
            raise LineageError(f"history={history!r}: use history=all (every edge ever seen) or leave it out")
        all_history = history == "all"
        with self.store.engine.connect() as conn:
            model = self._marquez_model(conn)
            kind, focus = self._marquez_focus(conn, ref, model)
            times = None
            if as_of is None and not all_history:
                job_io = model.job_io()
                start = model.start_job(focus) if kind == "dataset" else focus
            else:
                job_io, start_of, times = self._marquez_io(conn, model, as_of, all_history)
                focus_node = self._nodes_by_ref(conn, {(kind, *focus)}).get((kind, *focus))
                if as_of is not None and focus_node is not None:
                    self._check_existed(conn, focus_node, as_of)
                start = start_of(focus) if kind == "dataset" else focus
            if start is None:  # a dataset no job version reads or writes: the dataset alone
                return self._marquez_orphan(conn, focus)
            jobs = marquez_walk(job_io, start, depth)
            return self._marquez_graph_of(conn, jobs, job_io, focus if kind == "dataset" else None, times)

    def _marquez_focus(self, conn: Connection, ref: str, model: MarquezModel) -> tuple[str, Ref]:
        """(kind, (namespace, name)) of the node: a dataset by its primary name, whichever of its names ``ref`` used
        (Marquez finds a dataset by any of its symlinks: ``datasets_view.dataset_symlinks``)."""
        parsed = parse_node_id(ref)
        if parsed:
            kind, namespace, name = parsed
            if kind == "dataset" and (namespace, name) in model.registry:
                return kind, model.registry[(namespace, name)]
            if kind == "job" and (namespace, name) in model.jobs:
                return kind, (namespace, name)
        node = self.resolve(ref, conn)
        if node.kind == "dataset":
            return "dataset", model.registry.get((node.namespace, node.name), (node.namespace, node.name))
        return "job", (node.namespace, node.name)

    def _marquez_io(self, conn: Connection, model: MarquezModel, as_of: str | None, all_history: bool):
        """Job -> (inputs, outputs) of the graph at ``as_of`` or of every edge ever seen, in Marquez's terms (datasets by
        primary name), the start-job rule of that graph and, for history, the edges' times by node id."""
        if all_history:
            edges = self._history_edges(conn, as_of)
            rank: dict[int, tuple] = {}
        else:
            edges, rank = self._as_of_edges(conn, as_of)
        refs = self._refs(conn, {node for edge in edges for node in edge})
        inputs: dict[Ref, set[Ref]] = {}
        outputs: dict[Ref, set[Ref]] = {}
        best: dict[tuple[str, Ref], tuple] = {}  # (direction, dataset) -> (rank, job)
        times: dict[tuple[str, str], tuple] = {}
        for (source, target), when in edges.items():
            if source not in refs or target not in refs:
                continue
            source_ref, target_ref = refs[source], refs[target]
            if source_ref[0] == "dataset":
                direction, dataset, job, job_node = "input", source_ref[1:], target_ref[1:], target
            else:
                direction, dataset, job, job_node = "output", target_ref[1:], source_ref[1:], source
            dataset = model.registry.get(dataset, dataset)
            (inputs if direction == "input" else outputs).setdefault(job, set()).add(dataset)
            order = (when[1] or "", when[0] or "") if all_history else rank.get(job_node, ("", ""))
            if (direction, dataset) not in best or (order, job) > best[(direction, dataset)]:
                best[(direction, dataset)] = (order, job)
            if all_history:
                job_id, dataset_id = node_id("job", *job), node_id("dataset", *dataset)
                pair = (dataset_id, job_id) if direction == "input" else (job_id, dataset_id)
                first, last = times.get(pair, (None, None))
                times[pair] = (_earliest(first, when[0]), _latest(last, when[1]))
        job_io = {
            job: (frozenset(inputs.get(job, ())), frozenset(outputs.get(job, ()))) for job in set(inputs) | set(outputs)
        }

        def start_of(dataset: Ref) -> Ref | None:
            found = best.get(("output", dataset)) or best.get(("input", dataset))
            return found[1] if found else None

        return job_io, start_of, (times if all_history else None)

    def _refs(self, conn: Connection, ids: Iterable[int]) -> dict[int, tuple[str, str, str]]:
        out = {}
        for chunk in _chunks(ids):
            for row in conn.execute(
                select(nodes_table.c.id, nodes_table.c.kind, nodes_table.c.namespace, nodes_table.c.name).where(
                    nodes_table.c.id.in_(chunk)
                )
            ):
                out[row.id] = (row.kind, row.namespace, row.name)
        return out

    def _nodes_by_ref(self, conn: Connection, refs: set[tuple[str, str, str]]) -> dict[tuple[str, str, str], Node]:
        out = {}
        for chunk in _chunks({ref[2] for ref in refs}):
            for row in conn.execute(select(nodes_table).where(nodes_table.c.name.in_(chunk))):
                ref = (row.kind, row.namespace, row.name)
                if ref in refs:
                    out[ref] = _node_of(row)
        return out

    def _marquez_orphan(self, conn: Connection, dataset: Ref) -> dict:
        """``LineageService.toLineageWithOrphanDataset``: the dataset alone, no edges."""
        node = self._nodes_by_ref(conn, {("dataset", *dataset)}).get(("dataset", *dataset))
        data = self._node_data(conn, [node]).get(node.id) if node else None
        return {
            "graph": [
                {"id": node_id("dataset", *dataset), "type": "DATASET", "data": data, "inEdges": [], "outEdges": []}
            ]
        }

    def _marquez_graph_of(
        self,
        conn: Connection,
        jobs: set[Ref],
        job_io: dict[Ref, tuple[frozenset[Ref], frozenset[Ref]]],
        focus_dataset: Ref | None,
        times: dict[tuple[str, str], tuple] | None = None,
    ) -> dict:
        """``LineageService.toLineage``: a node per job reached (in-edges from its current inputs, out-edges to its
        current outputs) and per dataset of theirs (in-edges from the reached jobs writing it, out-edges to those
        reading it); nodes sorted by id, edges by (origin, destination). A dataset node no reached job touches any
        more gives the dataset alone ("no longer share lineage")."""
        empty: tuple[frozenset[Ref], frozenset[Ref]] = (frozenset(), frozenset())
        io = {job: job_io.get(job, empty) for job in jobs}
        writers: dict[Ref, set[Ref]] = {}
        readers: dict[Ref, set[Ref]] = {}
        for job, (ins, outs) in io.items():
            for dataset in ins:
                readers.setdefault(dataset, set()).add(job)
            for dataset in outs:
                writers.setdefault(dataset, set()).add(job)
        datasets = set(readers) | set(writers)
        if focus_dataset is not None and focus_dataset not in datasets:
            return self._marquez_orphan(conn, focus_dataset)
        refs = {("job", *job) for job in jobs} | {("dataset", *dataset) for dataset in datasets}
        nodes = self._nodes_by_ref(conn, refs)
        data = self._node_data(conn, list(nodes.values()))

        def edge(origin: str, destination: str) -> dict:
            item = {"origin": origin, "destination": destination}
            if times is not None:
                item["firstSeen"], item["lastSeen"] = times.get((origin, destination), (None, None))
            return item

        def ids(kind: str, refs_: Iterable[Ref]) -> list[str]:
            return sorted(node_id(kind, *ref) for ref in refs_)

        graph = []
        for job in jobs:
            this = node_id("job", *job)
            ins, outs = io[job]
            node = nodes.get(("job", *job))
            item = dict(data.get(node.id) or {}) if node else {}
            if item:
                item["inputs"] = [{"namespace": ns, "name": name} for ns, name in sorted(ins)]
                item["outputs"] = [{"namespace": ns, "name": name} for ns, name in sorted(outs)]
            graph.append(
                {
                    "id": this,
                    "type": "JOB",
                    "data": item or None,
                    "inEdges": [edge(origin, this) for origin in ids("dataset", ins)],
                    "outEdges": [edge(this, destination) for destination in ids("dataset", outs)],
                }
            )
        for dataset in datasets:
            this = node_id("dataset", *dataset)
            node = nodes.get(("dataset", *dataset))
            graph.append(
                {
                    "id": this,
                    "type": "DATASET",
                    "data": data.get(node.id) if node else None,
                    "inEdges": [edge(origin, this) for origin in ids("job", writers.get(dataset, ()))],
                    "outEdges": [edge(this, destination) for destination in ids("job", readers.get(dataset, ()))],
                }
            )
        graph.sort(key=lambda n: n["id"])
        return {"graph": graph}

    # ------------------------------------------------------------------------- the CLI's graphs in Marquez's shape
    def marquez_graph(self, subgraph: Subgraph) -> dict:
        """A subgraph in Marquez's lineage response shape: ``{"graph": [{"id", "type", "data", "inEdges",
        "outEdges"}]}``; edges of a history subgraph carry ``firstSeen``/``lastSeen``."""
        in_edges: dict[int, list] = {}
        out_edges: dict[int, list] = {}
        for source, target in subgraph.edges:
            edge = {"origin": subgraph.nodes[source].key, "destination": subgraph.nodes[target].key}
            if subgraph.edge_times is not None:
                edge["firstSeen"], edge["lastSeen"] = subgraph.edge_times.get((source, target), (None, None))
            out_edges.setdefault(source, []).append(edge)
            in_edges.setdefault(target, []).append(edge)
        io = None
        if subgraph.as_of is not None or subgraph.edge_times is not None:  # the jobs' datasets of *that* graph
            io = {}
            for source, target in subgraph.edges:
                a, b = subgraph.nodes[source], subgraph.nodes[target]
                if b.kind == "job":
                    io.setdefault(b.id, {"inputs": [], "outputs": []})["inputs"].append(
                        {"namespace": a.namespace, "name": a.name}
                    )
                else:
                    io.setdefault(a.id, {"inputs": [], "outputs": []})["outputs"].append(
                        {"namespace": b.namespace, "name": b.name}
                    )
        with self.store.engine.connect() as conn:
            data = self._node_data(conn, list(subgraph.nodes.values()), io)
        graph = []
        for node in sorted(subgraph.nodes.values(), key=lambda n: n.key):
            graph.append(
                {
                    "id": node.key,
                    "type": "DATASET" if node.kind == "dataset" else "JOB",
                    "data": data.get(node.id),
                    "inEdges": sorted(in_edges.get(node.id, []), key=lambda e: (e["origin"], e["destination"])),
                    "outEdges": sorted(out_edges.get(node.id, []), key=lambda e: (e["origin"], e["destination"])),
                }
            )
        return {"graph": graph}

    def _node_data(self, conn: Connection, nodes: list[Node], io: dict[int, dict] | None = None) -> dict[int, dict]:
        """Marquez's ``DatasetData`` and ``JobData`` of each node (plus ``currentVersion``, and a dataset's
        ``symlinks``); a job's inputs and outputs are those of the current graph unless ``io`` gives them."""
        data: dict[int, dict] = {}
        dataset_ids = [n.id for n in nodes if n.kind == "dataset"]
        job_ids = [n.id for n in nodes if n.kind == "job"]
        d, dv = datasets_table, dataset_versions_table
        for chunk in _chunks(dataset_ids):
            rows = conn.execute(
                select(d, dv.c.version, dv.c.schema)
                .outerjoin(dv, dv.c.id == d.c.current_version_id)
                .where(d.c.node_id.in_(chunk))
            ).all()
            for row in rows:
                facets = json.loads(row.facets or "{}")
                schema = (
                    json.loads(row.schema)
                    if row.schema
                    else [[f.get("name"), f.get("type")] for f in (facets.get("schema") or {}).get("fields") or []]
                )
                data[row.node_id] = {
                    "id": {"namespace": row.namespace, "name": row.name},
                    "type": "DB_TABLE",
                    "name": row.name,
                    "physicalName": row.name,
                    "createdAt": row.created_at,
                    "updatedAt": row.updated_at,
                    "namespace": row.namespace,
                    "sourceName": row.namespace,
                    "fields": [{"name": name, "type": kind, "tags": [], "description": None} for name, kind in schema],
                    "tags": [],
                    "lastModifiedAt": row.updated_at,
                    "description": None,
                    "lastLifecycleState": (facets.get("lifecycleStateChange") or {}).get("lifecycleStateChange"),
                    "currentVersion": row.version,
                    "symlinks": [i.get("name") for i in (facets.get("symlinks") or {}).get("identifiers") or []],
                }
        j, r, jv = jobs_table, runs_table, job_versions_table
        for chunk in _chunks(job_ids):
            rows = conn.execute(
                select(j, jv.c.version).outerjoin(jv, jv.c.id == j.c.current_version_id).where(j.c.node_id.in_(chunk))
            ).all()
            latest_ids = [row.latest_run_id for row in rows if row.latest_run_id]
            latest = (
                {run.id: run for run in conn.execute(select(r).where(r.c.id.in_(latest_ids)))} if latest_ids else {}
            )
            current: dict[int, dict[str, list]] = {}
            # The jobs' inputs (edges into them) and outputs (edges out of them), each from the edges' index (CROSS
            # JOIN keeps SQLite's order: one query on "source or target", or one led by the nodes' (kind, ...)
            # index, scanned every edge or every dataset: 0.6 s, 11 s for 1,531 nodes).
            placeholders = ", ".join(f":j{index}" for index in range(len(chunk)))
            params = {f"j{index}": node for index, node in enumerate(chunk)}
            for side, job_end, dataset_end in (("inputs", "target", "source"), ("outputs", "source", "target")):
                if io is not None:
                    break
                for job_node, ns, name in fetch_rows(
                    conn,
                    f"SELECT e.{job_end}, n.namespace, n.name FROM lineage_edges e CROSS JOIN lineage_nodes n"
                    f" WHERE e.{job_end} IN ({placeholders}) AND n.id = e.{dataset_end} AND n.kind = 'dataset'",
                    params,
                ):
                    current.setdefault(job_node, {"inputs": [], "outputs": []})[side].append(
                        {"namespace": ns, "name": name}
                    )
            job_io = io if io is not None else current
            for row in rows:
                facets = json.loads(row.facets or "{}")
                run = latest.get(row.latest_run_id)
                processing = ((facets.get("jobType") or {}).get("processingType") or "").upper()
                data[row.node_id] = {
                    "id": {"namespace": row.namespace, "name": row.name},
                    "type": "STREAM" if processing == "STREAMING" else "BATCH",
                    "name": row.name,
                    "simpleName": row.name.rsplit(".", 1)[-1],
                    "parentJobName": row.name.rsplit(".", 1)[0] if "." in row.name else None,
                    "parentJobUuid": None,  # Marquez's job UUIDs: the store has none
                    "currentRunUuid": row.latest_run_id,
                    "createdAt": row.created_at,
                    "updatedAt": row.updated_at,
                    "namespace": row.namespace,
                    "inputs": sorted(
                        job_io.get(row.node_id, {}).get("inputs", []), key=lambda x: (x["namespace"], x["name"])
                    ),
                    "outputs": sorted(
                        job_io.get(row.node_id, {}).get("outputs", []), key=lambda x: (x["namespace"], x["name"])
                    ),
                    "location": (facets.get("sourceCodeLocation") or {}).get("url"),
                    "description": (facets.get("documentation") or {}).get("description"),
                    "latestRun": _marquez_run(run) if run is not None else None,
                    "currentVersion": row.version,
                }
        return data

    # ------------------------------------------------------------------------- impact
    def impact(
        self, ref: str, depth: int = DEFAULT_DEPTH, *, as_of: str | None = None, all_history: bool = False
    ) -> dict:
        """Every dataset, job and run downstream of a node: what to recompute, re-run or roll back. ``as_of``: in the
        graph of that instant, and only runs started by then; ``all_history``: along every edge ever seen."""
        sub = self.downstream(ref, depth, as_of=as_of, all_history=all_history)
        dataset_node_ids = [n.id for n in sub.nodes.values() if n.kind == "dataset"]
        job_node_ids = [n.id for n in sub.jobs()]
        runs: list[dict] = []
        with self.store.engine.connect() as conn:
            if job_node_ids:
                d, rd, r, j = datasets_table, run_datasets_table, runs_table, jobs_table
                dataset_ids = [
                    row
                    for chunk in _chunks(dataset_node_ids)
                    for row in conn.execute(select(d.c.id).where(d.c.node_id.in_(chunk))).scalars()
                ]
                seen = set()
                for chunk in _chunks(job_node_ids):
                    query = (
                        select(r, j.c.namespace, j.c.name)
                        .join(j, j.c.id == r.c.job_id)
                        .join(rd, rd.c.run_id == r.c.id)
                        .where(
                            j.c.node_id.in_(chunk), rd.c.direction == "input", rd.c.dataset_id.in_(dataset_ids or [-1])
                        )
                    )
                    if sub.as_of is not None:
                        query = query.where(_run_start() <= sub.as_of)
                    for row in conn.execute(query):
                        if row.id not in seen:
                            seen.add(row.id)
                            runs.append(_run_summary(row))
        runs.sort(key=lambda run: run["startedAt"] or run["endedAt"] or "", reverse=True)
        return {"subgraph": sub, "runs": runs}

    def impact_of_run(self, run_ref: str) -> dict:
        """What a run (and its child runs) wrote, every later run that read it, transitively, and what lies
        downstream of it in the graph."""
        with self.store.engine.connect() as conn:
            run = self._resolve_run(conn, run_ref)
            r, rd, d, dv, j = runs_table, run_datasets_table, datasets_table, dataset_versions_table, jobs_table
            family = self._descendant_runs(conn, [run.id])
            touched_runs = dict.fromkeys(family)
            written: dict[tuple[int, int | None], str] = {}
            frontier = list(family)
            since = run.started_at or run.state_time or ""
            while frontier:
                outputs = []
                for chunk in _chunks(frontier):
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
            run_rows = []
            for chunk in _chunks(touched_runs):
                run_rows += conn.execute(
                    select(r, j.c.namespace, j.c.name).join(j, j.c.id == r.c.job_id).where(r.c.id.in_(chunk))
                ).all()
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
            node_ids: dict[int, int] = {}
            for version in versions:
                for node_id, distance in closure_downstream(conn, version["nodeId"]):
                    node_ids[node_id] = min(distance, node_ids.get(node_id, distance))
            nodes = self._nodes(conn, node_ids)
        labels = {n.id: n.label for n in nodes.values()}
        for version in versions:
            version["label"] = labels.get(version.pop("nodeId"))
        focus = Node(-1, f"run:{run.id}", "run", "", run.id, run.id)
        sub = Subgraph(focus, "downstream", nodes, node_ids, [])
        with self.store.engine.connect() as conn:
            sub.edges = self._edges_among(conn, set(node_ids))
        summaries = sorted(
            (_run_summary(row) for row in run_rows),
            key=lambda s: (s["id"] != run.id, s["startedAt"] or s["endedAt"] or ""),
        )
        return {
            "run": _run_summary(next(row for row in run_rows if row.id == run.id)),
            "runs": summaries,
            "family": list(family),  # the run and its child runs, whatever their times
            "datasetVersions": sorted(versions, key=lambda v: (v["label"] or "", v["version"] or "")),
            "subgraph": sub,
        }

    # ------------------------------------------------------------------------- runs
    def _resolve_run(self, conn: Connection, ref: str):
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
            raise EmptyStoreError(self.store.url)
        recent = conn.execute(select(r.c.id).order_by(r.c.state_time.desc()).limit(200)).scalars().all()
        raise UnknownNodeError(ref, difflib.get_close_matches(ref, recent, n=3, cutoff=0.6), what="run")

    def _descendant_runs(self, conn: Connection, run_ids: list[str]) -> list[str]:
        found = list(run_ids)
        frontier = list(run_ids)
        while frontier:
            children = []
            for chunk in _chunks(frontier):
                children += (
                    conn.execute(select(runs_table.c.id).where(runs_table.c.parent_run_id.in_(chunk))).scalars().all()
                )
            frontier = [c for c in children if c not in found]
            found += frontier
        return found

    def runs(self, ref: str, limit: int = 20) -> dict:
        """Runs of a job, newest first (for a dataset: the runs that wrote it)."""
        with self.store.engine.connect() as conn:
            node = self.resolve(ref, conn)
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
            return {"node": node, "runs": [self._run_details(conn, row) for row in rows]}

    def run_details(self, run_ref: str) -> dict:
        with self.store.engine.connect() as conn:
            row = self._resolve_run(conn, run_ref)
            job = conn.execute(
                select(jobs_table.c.namespace, jobs_table.c.name).where(jobs_table.c.id == row.job_id)
            ).first()
            merged = dict(row._mapping) | {"namespace": job.namespace, "name": job.name}
            return self._run_details(conn, _Row(merged))

    def _run_details(self, conn: Connection, row) -> dict:
        rd, d, dv, n, jv = run_datasets_table, datasets_table, dataset_versions_table, nodes_table, job_versions_table
        io = conn.execute(
            select(rd.c.direction, d.c.namespace, d.c.name, n.c.label, dv.c.version, dv.c.schema, dv.c.schema_producer)
            .join(d, d.c.id == rd.c.dataset_id)
            .join(n, n.c.id == d.c.node_id)
            .outerjoin(dv, dv.c.id == rd.c.dataset_version_id)
            .where(rd.c.run_id == row.id)
        ).all()
        version = (
            conn.execute(select(jv.c.version).where(jv.c.id == row.job_version_id)).scalar()
            if row.job_version_id
            else None
        )
        facets = json.loads(row.facets or "{}")
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
                    "schema": json.loads(schema) if schema else None,
                    "schemaProducer": producer,
                }
                for dirn, ns, name, label, ver, schema, producer in sorted(io, key=lambda x: x[3])
                if dirn == direction
            ]

        return {
            **_run_summary(row),
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

    # ------------------------------------------------------------------------- a run by what it did, at an instant
    def run_at(self, ref: str, as_of: str | None = None) -> str:
        """The run ``ref`` names: a run id (or a prefix of 4+ characters), else the run of a job or dataset as it was
        at ``as_of`` (default: now): of a job, its latest run started by then; of a dataset, the run that wrote the
        version current then (the latest write that had ended by then; of a writer and its parent run that both
        report the write, the parent: a task rather than its Spark job). ``as_of`` with a run id is a usage error: a
        run's provenance does not change with time."""
        as_of = parse_instant(as_of, "--as-of") if as_of is not None else None
        with self.store.engine.connect() as conn:
            r = runs_table
            exact = conn.execute(select(r.c.id).where(r.c.id == ref)).scalar()
            node = None
            if exact is None:
                try:
                    node = self.resolve(ref, conn)
                except (UnknownNodeError, EmptyStoreError):
                    node = None
            if node is None:
                run_id = exact if exact is not None else self._resolve_run(conn, ref).id
                if as_of is not None:
                    raise LineageError(
                        f"{ref!r} is a run: its provenance does not change with time. --as-of picks the run of a job "
                        "or of a dataset's version current then (e.g. --run nyc_taxi.yellow_rides_hourly_forecast "
                        "--as-of 2025-02-01T10:00:00Z)"
                    )
                return run_id
            when = as_of or "9999-12-31T23:59:59.999999Z"
            if node.kind == "job":
                started = _run_start()
                found = conn.execute(
                    select(r.c.id)
                    .join(jobs_table, jobs_table.c.id == r.c.job_id)
                    .where(jobs_table.c.node_id == node.id, started <= when)
                    .order_by(started.desc(), r.c.id.desc())
                    .limit(1)
                ).scalar()
                if found is None:
                    raise UnknownNodeError(f"{node.label} (a run started by {as_of or 'now'})", [], what="run")
                return found
            rd, d = run_datasets_table, datasets_table
            written = func.coalesce(r.c.ended_at, r.c.state_time, r.c.started_at)
            writers = conn.execute(
                select(r.c.id, r.c.parent_run_id)
                .join(rd, rd.c.run_id == r.c.id)
                .join(d, d.c.id == rd.c.dataset_id)
                .where(d.c.node_id == node.id, rd.c.direction == "output", written <= when)
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
    def merged_runs(self, run_ids: Iterable[str] | None = None) -> list[dict]:
        """Run ids that hold the events of more than one run, each with why: a START after the run had finished
        (COMPLETE, FAIL or ABORT earlier), or Airflow facets of two DAG runs (other logical dates, clear numbers or
        Airflow run ids: the provider derives an OpenLineage run id from the DAG, logical date and clear number, so
        a DAG re-run at the same logical date reuses it). ``run_ids``: only these."""
        e = events_table
        wanted = None if run_ids is None else set(run_ids)
        found: dict[str, list[str]] = {}
        with self.store.engine.connect() as conn:
            done = (
                select(e.c.run_id, func.min(e.c.event_time).label("first_end"))
                .where(e.c.event_type.in_(sorted(_DONE)))
                .group_by(e.c.run_id)
                .subquery()
            )
            restarted = conn.execute(
                select(e.c.run_id, func.max(e.c.event_time), done.c.first_end)
                .join(done, done.c.run_id == e.c.run_id)
                .where(e.c.event_type == "START", e.c.event_time > done.c.first_end)
                .group_by(e.c.run_id, done.c.first_end)
            ).all()
            for run_id, start, first_end in restarted:
                if wanted is None or run_id in wanted:
                    found.setdefault(run_id, []).append(f"a START at {start} after the run had finished at {first_end}")
            dag_runs: dict[str, set[tuple]] = {}
            for run_id, payload in conn.execute(select(e.c.run_id, e.c.payload).where(e.c.payload.like('%"dagRun"%'))):
                if wanted is not None and run_id not in wanted:
                    continue
                facets = (json.loads(payload).get("run") or {}).get("facets") or {}
                for facet in ("airflowDagRun", "airflow"):
                    dag_run = (facets.get(facet) or {}).get("dagRun") or {}
                    if dag_run:
                        identity = tuple(
                            (key, str(dag_run[key]))
                            for key in ("dag_id", "logical_date", "clear_number", "run_id")
                            if dag_run.get(key) is not None
                        )
                        dag_runs.setdefault(run_id, set()).add(identity)
                        break
            for run_id, identities in dag_runs.items():
                distinct = _distinct_identities(identities)
                if len(distinct) > 1:
                    described = "; ".join(", ".join(f"{k} {v}" for k, v in identity) for identity in distinct)
                    found.setdefault(run_id, []).append(f"events of {len(distinct)} Airflow DAG runs ({described})")
            jobs = {}
            for chunk in _chunks(found):
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

    # ------------------------------------------------------------------------- run provenance
    def run_lineage(self, run_ref: str, depth: int = DEFAULT_DEPTH) -> dict:
        """``GET /api/v1/runlineage/upstream`` (Marquez's ``LineageDao.getUpstreamRuns``): the run, the dataset
        versions it read and the run that wrote each (``producedByRunId``), those runs' inputs and writers, and so on,
        ``depth`` levels (the run itself is level 0; a level-``depth`` run is listed, its writers are not). Runs come
        by level, then job name (``ORDER BY depth ASC, job_name ASC``), each once at its first level.

        A version comes from the input's ``version`` facet (the Iceberg snapshot id) and was written by the run that
        reported it as an output; an input without one is the latest write of that dataset before the reading run
        (whose version, if the writer reported one). Entries carry, besides Marquez's fields, ``depth``, the job
        version's row id and the run's parameters, and each input its ``label`` (``run_lineage_json`` drops them)."""
        with self.store.engine.connect() as conn:
            entries = self._run_lineage(conn, run_ref, depth)  # a whole run id: no lookup before
            return {"runs": entries or self._run_lineage(conn, self._resolve_run(conn, run_ref).id, depth)}

    def _run_lineage(self, conn: Connection, root_id: str, depth: int) -> list[dict]:
        """The provenance entries of a run: one query for every run upstream with its inputs and their writers
        (``_RUN_PROVENANCE``), then each run's level by a breadth-first walk of those writers."""
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
                    "parameters": _parameters_of(facets),
                }
            )
        return entries

    def _version_change(self, conn: Connection, version_a: int | None, version_b: int | None) -> dict | None:
        """How two job versions differ: inputs and outputs added or removed, source code changed; None if the same."""
        if version_a == version_b:
            return None
        jv = job_versions_table
        rows = {
            row.id: row
            for row in conn.execute(select(jv).where(jv.c.id.in_([v for v in (version_a, version_b) if v is not None])))
        }
        a, b = rows.get(version_a), rows.get(version_b)

        def names(row, column: str) -> set[str]:
            return set(json.loads(getattr(row, column) or "[]")) if row is not None else set()

        labels = self._labels_of_keys(
            conn, names(a, "inputs") | names(b, "inputs") | names(a, "outputs") | names(b, "outputs")
        )

        def listed(values: set[str]) -> list[str]:
            return sorted(labels.get(value, value) for value in values)

        return {
            "from": a.version if a is not None else None,
            "to": b.version if b is not None else None,
            "inputsAdded": listed(names(b, "inputs") - names(a, "inputs")),
            "inputsRemoved": listed(names(a, "inputs") - names(b, "inputs")),
            "outputsAdded": listed(names(b, "outputs") - names(a, "outputs")),
            "outputsRemoved": listed(names(a, "outputs") - names(b, "outputs")),
            "codeChanged": (a is not None and b is not None)
            and ((a.code_hash, a.code_version) != (b.code_hash, b.code_version)),
        }

    def _labels_of_keys(self, conn: Connection, keys: set[str]) -> dict[str, str]:
        """``namespace:name`` (how a job version lists its datasets) -> the dataset's label."""
        d, n = datasets_table, nodes_table
        out = {}
        for chunk in _chunks(keys):
            for namespace, name, label in conn.execute(
                select(d.c.namespace, d.c.name, n.c.label)
                .join(n, n.c.id == d.c.node_id)
                .where((d.c.namespace + ":" + d.c.name).in_(chunk))
            ):
                out[f"{namespace}:{name}"] = label
        return out

    def child_runs(self, run_id: str) -> list[tuple[str, str]]:
        """(run id, job name) of a run's child runs (a DAG run's task runs), by job name."""
        with self.store.engine.connect() as conn:
            return _child_runs(conn, run_id)

    def _provenance_through_children(self, conn: Connection, run_id: str) -> tuple[str | None, list[dict]]:
        """(the run's job name, its provenance entries); a run that read nothing itself (a DAG run) has its child
        runs' entries instead, each child at level 0, as ``diff`` compares such a run through its child runs. A run
        reached several ways keeps its lowest level."""
        entries = self._run_lineage(conn, run_id, DEFAULT_DEPTH)
        root_job = entries[0]["job"]["name"] if entries else None
        if not entries or entries[0]["inputs"]:
            return root_job, entries
        merged: dict[str, dict] = {}
        for child, _ in _child_runs(conn, run_id):
            for entry in self._run_lineage(conn, child, DEFAULT_DEPTH):
                known = merged.get(entry["run"]["id"])
                if known is None or entry["depth"] < known["depth"]:
                    merged[entry["run"]["id"]] = entry
        return root_job, sorted(
            merged.values(), key=lambda e: (e["depth"], e["job"]["name"], e["run"]["id"])
        ) or entries

    def _upstream_changes(self, conn: Connection, run_a, run_b) -> dict:
        """What differs between the provenance of two runs: the upstream runs of each job (re-run, only on one side),
        their job versions (inputs added or removed, code changed), parameters and states, the dataset versions read
        at every level, and the two runs' own job versions."""
        sides = [self._provenance_through_children(conn, row.id) for row in (run_a, run_b)]
        by_job: list[dict[str, list[dict]]] = []
        reads: list[dict[tuple, set]] = []
        for root_job, entries in sides:
            jobs: dict[str, list[dict]] = {}
            read: dict[tuple, set] = {}
            for entry in entries:
                # the run itself is "(the run)"; a DAG run's task runs are jobs of their own, compared like upstream ones
                itself = entry["depth"] == 0 and entry["job"]["name"] == root_job
                if not itself:
                    jobs.setdefault(entry["job"]["name"], []).append(entry)
                reader = "(the run)" if itself else entry["job"]["name"]
                for item in entry["inputs"]:
                    read.setdefault((reader, item["label"], item["namespace"], item["name"]), set()).add(
                        (item["version"], item["producedByRunId"])
                    )
            by_job.append(jobs)
            reads.append(read)
        first, second = by_job
        level = {
            name: min(e["depth"] for e in first.get(name, []) + second.get(name, [])) for name in {*first, *second}
        }
        jobs_changed = []
        for name in sorted(level, key=lambda k: (level[k], k)):
            a, b = first.get(name, []), second.get(name, [])
            item: dict = {
                "job": name,
                "depth": level[name],
                "runs": [[e["run"]["id"] for e in a], [e["run"]["id"] for e in b]],
            }
            if not a or not b:
                item["change"] = "only in B" if not a else "only in A"
            elif {e["run"]["id"] for e in a} == {e["run"]["id"] for e in b}:
                item["change"] = "same runs"
            else:
                item["change"] = "other runs"
                newest_a = max(a, key=lambda e: (e["run"]["start"] or "", e["run"]["id"]))
                newest_b = max(b, key=lambda e: (e["run"]["start"] or "", e["run"]["id"]))
                item["jobVersion"] = self._version_change(conn, newest_a["jobVersionId"], newest_b["jobVersionId"])
                params = {
                    k: [newest_a["parameters"].get(k), newest_b["parameters"].get(k)]
                    for k in sorted(set(newest_a["parameters"]) | set(newest_b["parameters"]))
                    if newest_a["parameters"].get(k) != newest_b["parameters"].get(k)
                }
                if params:
                    item["parameters"] = params
                if newest_a["run"]["status"] != newest_b["run"]["status"]:
                    item["state"] = [newest_a["run"]["status"], newest_b["run"]["status"]]
            jobs_changed.append(item)
        versions_changed = []
        for key in sorted(set(reads[0]) | set(reads[1])):
            a, b = reads[0].get(key, set()), reads[1].get(key, set())
            if a == b:
                continue
            reader, label, namespace, name = key

            def listed(values):
                return [
                    {"version": v, "producedByRunId": w}
                    for v, w in sorted(values, key=lambda x: (str(x[0]), str(x[1])))
                ]

            versions_changed.append(
                {
                    "reader": reader,
                    "dataset": label,
                    "namespace": namespace,
                    "name": name,
                    "A": listed(a),
                    "B": listed(b),
                }
            )
        return {
            "jobVersion": self._version_change(conn, run_a.job_version_id, run_b.job_version_id),
            "jobs": jobs_changed,
            "datasetVersions": versions_changed,
            "provenance": [
                [{k: v for k, v in entry.items() if k != "jobVersionId"} for entry in entries] for _, entries in sides
            ],
        }

    # ------------------------------------------------------------------------- diff
    def diff(self, run_a: str, run_b: str, upstream: bool = False) -> dict:
        """Two runs side by side: job and code version, parameters, state, error, input and output versions, schema
        changes. A run without datasets of its own (a DAG run) is compared through its child runs. ``upstream``:
        also their provenance (``run_lineage``) compared, under ``"upstream"`` (see ``_upstream_changes``)."""
        with self.store.engine.connect() as conn:
            a, b = (self._resolve_run(conn, ref) for ref in (run_a, run_b))
            upstream_changes = self._upstream_changes(conn, a, b) if upstream else None
            details = []
            for row in (a, b):
                job = conn.execute(
                    select(jobs_table.c.namespace, jobs_table.c.name).where(jobs_table.c.id == row.job_id)
                ).first()
                info = self._run_details(
                    conn, _Row(dict(row._mapping) | {"namespace": job.namespace, "name": job.name})
                )
                info["tasks"] = {}
                if not info["inputs"] and not info["outputs"]:  # a DAG run: its task runs (not their Spark jobs)
                    children = conn.execute(
                        select(runs_table, jobs_table.c.namespace, jobs_table.c.name)
                        .join(jobs_table, jobs_table.c.id == runs_table.c.job_id)
                        .where(runs_table.c.parent_run_id == row.id)
                    ).all()
                    for child in children:
                        child_info = self._run_details(conn, child)
                        info["tasks"][child_info["job"]["name"]] = child_info
                        info["inputs"] += child_info["inputs"]
                        info["outputs"] += child_info["outputs"]
                details.append(info)
        first, second = details
        changes: dict = {}
        for label, keyname in (
            ("job", "job"),
            ("jobVersion", "jobVersion"),
            ("codeHash", "codeHash"),
            ("codeVersion", "codeVersion"),
            ("state", "state"),
            ("errorMessage", "errorMessage"),
        ):
            if first[keyname] != second[keyname]:
                changes[label] = [first[keyname], second[keyname]]
        params = {
            k: [first["parameters"].get(k), second["parameters"].get(k)]
            for k in sorted(set(first["parameters"]) | set(second["parameters"]))
            if first["parameters"].get(k) != second["parameters"].get(k)
        }
        if params:
            changes["parameters"] = params
        schema_changes: dict = {}
        for direction in ("inputs", "outputs"):
            changes[direction] = _compare_datasets(first[direction], second[direction], schema_changes)
        if schema_changes:
            changes["schema"] = schema_changes
        tasks = {}
        for name in sorted(set(first["tasks"]) | set(second["tasks"])):
            x, y = first["tasks"].get(name), second["tasks"].get(name)
            if x is None or y is None or x["jobVersion"] != y["jobVersion"] or x["state"] != y["state"]:
                tasks[name] = {
                    "jobVersion": [x and x["jobVersion"], y and y["jobVersion"]],
                    "codeHash": [x and x["codeHash"], y and y["codeHash"]],
                    "state": [x and x["state"], y and y["state"]],
                }
        if tasks:
            changes["tasks"] = tasks
        for info in details:
            info["tasks"] = sorted(info["tasks"])
        result = {"runs": details, "changes": changes}
        if upstream_changes is not None:
            result["upstream"] = upstream_changes
        return result

    # ------------------------------------------------------------------------- columns
    def columns(self, ref: str, depth: int = DEFAULT_DEPTH) -> dict:
        """Column-level upstream of ``DATASET.COLUMN`` from the columnLineage facets."""
        with self.store.engine.connect() as conn:
            dataset_node, column = self._resolve_column(conn, ref)
            d, ce = datasets_table, column_edges_table
            dataset_id = conn.execute(select(d.c.id).where(d.c.node_id == dataset_node.id)).scalar()
            start = (dataset_id, column)
            levels = {start: 0}
            edges: list[tuple[tuple[int, str], tuple[int, str], list]] = []
            frontier = [start]
            while frontier:
                next_frontier = []
                for ds, col in frontier:
                    if levels[(ds, col)] >= depth:
                        continue
                    for row in conn.execute(
                        select(ce.c.input_dataset_id, ce.c.input_field, ce.c.transformations).where(
                            ce.c.dataset_id == ds, ce.c.field == col
                        )
                    ):
                        source = (row.input_dataset_id, row.input_field)
                        if source == (ds, col):
                            continue  # a table rewritten from itself (MERGE): not an origin of the column
                        edges.append((source, (ds, col), json.loads(row.transformations or "[]")))
                        if source not in levels:
                            levels[source] = levels[(ds, col)] + 1
                            next_frontier.append(source)
                frontier = next_frontier
            info = {}
            for chunk in _chunks({ds for ds, _ in levels}):
                for row in conn.execute(
                    select(d.c.id, d.c.namespace, d.c.name, d.c.facets, nodes_table.c.label)
                    .join(nodes_table, nodes_table.c.id == d.c.node_id)
                    .where(d.c.id.in_(chunk))
                ):
                    facets = json.loads(row.facets or "{}")
                    types = {f.get("name"): f.get("type") for f in (facets.get("schema") or {}).get("fields") or []}
                    info[row.id] = (row.namespace, row.name, row.label, types)
        return {"focus": start, "levels": levels, "edges": edges, "datasets": info}

    def _resolve_column(self, conn: Connection, ref: str) -> tuple[Node, str]:
        if "." not in ref:
            raise LineageError(
                f"{ref!r}: give a column as DATASET.COLUMN, e.g. nyc_taxi.yellow_rides_hourly_forecast.forecasted_total_rides"
            )
        dataset_ref, column = ref.rsplit(".", 1)
        node = self.resolve(dataset_ref, conn)
        if node.kind != "dataset":
            raise LineageError(f"{dataset_ref!r} is a job, not a dataset")
        d, ce = datasets_table, column_edges_table
        row = conn.execute(select(d.c.id, d.c.facets).where(d.c.node_id == node.id)).first()
        known = {f.get("name") for f in (json.loads(row.facets or "{}").get("schema") or {}).get("fields") or []}
        known |= set(conn.execute(select(ce.c.field).where(ce.c.dataset_id == row.id).distinct()).scalars())
        known |= set(conn.execute(select(ce.c.input_field).where(ce.c.input_dataset_id == row.id).distinct()).scalars())
        if column not in known:
            raise UnknownNodeError(
                ref,
                [f"{dataset_ref}.{c}" for c in difflib.get_close_matches(column, sorted(known), n=5, cutoff=0.4)],
                what="column",
            )
        return node, column

    def column_graph(self, result: dict) -> dict:
        """Marquez's column-lineage response shape (``DATASET_FIELD`` nodes)."""
        datasets = result["datasets"]

        def node_id(key):
            ns, name, _, _ = datasets[key[0]]
            return f"datasetField:{ns}:{name}:{key[1]}"

        in_edges: dict = {}
        out_edges: dict = {}
        inputs: dict = {}
        for source, target, transformations in result["edges"]:
            edge = {"origin": node_id(source), "destination": node_id(target)}
            out_edges.setdefault(source, []).append(edge)
            in_edges.setdefault(target, []).append(edge)
            ns, name, _, _ = datasets[source[0]]
            first = transformations[0] if transformations else {}
            inputs.setdefault(target, []).append(
                {
                    "namespace": ns,
                    "dataset": name,
                    "field": source[1],
                    "transformationDescription": first.get("description"),
                    "transformationType": first.get("type"),
                    "transformations": transformations,
                }
            )
        graph = []
        for key in sorted(result["levels"], key=lambda k: (result["levels"][k], node_id(k))):
            ns, name, _, types = datasets[key[0]]
            graph.append(
                {
                    "id": node_id(key),
                    "type": "DATASET_FIELD",
                    "data": {
                        "namespace": ns,
                        "dataset": name,
                        "field": key[1],
                        "fieldType": types.get(key[1]),
                        "inputFields": inputs.get(key, []),
                    },
                    "inEdges": in_edges.get(key, []),
                    "outEdges": out_edges.get(key, []),
                }
            )
        return {"graph": graph}


class _Row:
    """A mapping with attribute access, like a SQLAlchemy row."""

    def __init__(self, values: dict):
        self.__dict__.update(values)
        self._mapping = values


def _marquez_run(row) -> dict:
    return {
        "id": row.id,
        "state": row.state,
        "startedAt": row.started_at,
        "endedAt": row.ended_at,
        "nominalStartTime": row.nominal_start,
        "nominalEndTime": row.nominal_end,
    }


def _run_summary(row) -> dict:
    return {
        "id": row.id,
        "job": {"namespace": row.namespace, "name": row.name},
        "state": row.state,
        "startedAt": row.started_at,
        "endedAt": row.ended_at,
    }


def _parameters_of(facets: str | None) -> dict:
    """``_parameters`` of a run's facets as stored (JSON), parsed only when one of the facets it reads is there."""
    if not facets or ('"airflow' not in facets and '"nominalTime"' not in facets):
        return {}
    return _parameters(json.loads(facets))


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


def _compare_datasets(first: list[dict], second: list[dict], schema_changes: dict) -> dict:
    def by_key(items):
        out: dict = {}
        for item in items:
            out[(item["namespace"], item["name"])] = item
        return out

    a, b = by_key(first), by_key(second)
    result: dict = {"added": [], "removed": [], "changed": [], "same": []}
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x is None:
            result["added"].append(
                {"dataset": y["label"], "namespace": key[0], "name": key[1], "version": y["version"]}
            )
        elif y is None:
            result["removed"].append(
                {"dataset": x["label"], "namespace": key[0], "name": key[1], "version": x["version"]}
            )
        elif x["version"] and y["version"] and x["version"] != y["version"]:  # unknown on one side is no change
            result["changed"].append(
                {"dataset": x["label"], "namespace": key[0], "name": key[1], "from": x["version"], "to": y["version"]}
            )
        else:
            result["same"].append(
                {"dataset": x["label"], "namespace": key[0], "name": key[1], "version": x["version"] or y["version"]}
            )
        comparable = x is not None and y is not None and x["schema"] and y["schema"]
        if comparable and x["schemaProducer"] == y["schemaProducer"] and x["schema"] != y["schema"]:
            old, new = dict(map(tuple, x["schema"])), dict(map(tuple, y["schema"]))
            schema_changes[x["label"]] = {
                "added": [f"{c} {t}" for c, t in new.items() if c not in old],
                "removed": [f"{c} {t}" for c, t in old.items() if c not in new],
                "changed": [f"{c} {old[c]} -> {new[c]}" for c in new if c in old and old[c] != new[c]],
            }
    return result


# ----------------------------------------------------------------------------- rendering
