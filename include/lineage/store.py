"""The lineage store: OpenLineage events kept and indexed in SQL (SQLite under ``var/lineage/`` or PostgreSQL by URL).

What ingesting an event keeps:

- the raw event, once: a duplicate (same run id, event type and event time) is recognised and skipped;
- the run, its state robust to order (a COMPLETE that arrives before its START still leaves the run COMPLETED),
  its parent and root run (DAG run -> task run -> Spark application -> Spark job), nominal times, error, facets;
- the job and its versions (a new version when the run's inputs, outputs or source code differ);
- datasets, their aliases (the Iceberg table name of a ``symlinks`` facet) and versions (the ``version`` facet: the
  Iceberg snapshot id), with the schema of each version;
- run -> dataset (version) edges for inputs and outputs;
- column-level edges from ``columnLineage`` facets;
- the job/dataset graph (input dataset -> job -> output dataset) and its closure table ``(ancestor, descendant,
  depth)``, maintained incrementally: a new edge a -> b adds every (ancestor of a, descendant of b) pair, so every
  ancestor or descendant of a node comes from one indexed query. ``depth`` is the shortest distance in edges.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import (
    Column,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    case,
    create_engine,
    event,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine

from include import config

STORE_URL_ENV = "LINEAGE_STORE_URL"

metadata = MetaData()

events_table = Table(
    "lineage_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dedup_key", String(255), nullable=False, unique=True),
    Column("run_id", String(64), index=True),
    Column("event_type", String(16)),
    Column("event_time", String(32)),
    Column("job_namespace", String(255)),
    Column("job_name", String(1024)),
    Column("source", String(1024)),
    Column("payload", Text, nullable=False),
)

nodes_table = Table(
    "lineage_nodes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key", String(2048), nullable=False, unique=True),  # Marquez node id: dataset:<ns>:<name> | job:<ns>:<name>
    Column("kind", String(8), nullable=False),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(2048), nullable=False),
    Column("label", String(2048), nullable=False),
)

aliases_table = Table(
    "lineage_node_aliases",
    metadata,
    Column("alias", String(2048), nullable=False),
    Column("node_id", Integer, nullable=False),
    PrimaryKeyConstraint("alias", "node_id"),
)

edges_table = Table(
    "lineage_edges",
    metadata,
    Column("source", Integer, nullable=False),
    Column("target", Integer, nullable=False),
    PrimaryKeyConstraint("source", "target"),
    Index("ix_lineage_edges_target", "target", "source"),
)

closure_table = Table(
    "lineage_closure",
    metadata,
    Column("ancestor", Integer, nullable=False),
    Column("descendant", Integer, nullable=False),
    Column("depth", Integer, nullable=False),
    PrimaryKeyConstraint("ancestor", "descendant"),
    Index("ix_lineage_closure_upstream", "descendant", "depth", "ancestor"),
    Index("ix_lineage_closure_downstream", "ancestor", "depth", "descendant"),
)

jobs_table = Table(
    "lineage_jobs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node_id", Integer, nullable=False, unique=True),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(1024), nullable=False),
    Column("created_at", String(32)),
    Column("updated_at", String(32)),
    Column("facets", Text),
    Column("current_version_id", Integer),
    Column("latest_run_id", String(64)),
    Column("latest_run_time", String(32)),
    UniqueConstraint("namespace", "name"),
)

job_versions_table = Table(
    "lineage_job_versions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", Integer, nullable=False),
    Column("version", String(64), nullable=False),
    Column("inputs", Text),
    Column("outputs", Text),
    Column("code_hash", String(64)),
    Column("code_version", String(255)),
    Column("created_at", String(32)),
    UniqueConstraint("job_id", "version"),
)

datasets_table = Table(
    "lineage_datasets",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node_id", Integer, nullable=False, unique=True),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(2048), nullable=False),
    Column("created_at", String(32)),
    Column("updated_at", String(32)),
    Column("facets", Text),
    Column("current_version_id", Integer),
    Column("current_version_time", String(32)),
    UniqueConstraint("namespace", "name"),
)

dataset_versions_table = Table(
    "lineage_dataset_versions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dataset_id", Integer, nullable=False),
    Column("version", String(255), nullable=False),
    Column("schema", Text),
    Column("schema_producer", String(1024)),  # schemas are compared only between the same producer's reports
    Column("created_by_run_id", String(64)),
    Column("created_at", String(32)),
    UniqueConstraint("dataset_id", "version"),
)

runs_table = Table(
    "lineage_runs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("job_id", Integer, nullable=False, index=True),
    Column("job_version_id", Integer),
    Column("state", String(16)),
    Column("state_rank", Integer, nullable=False, default=0),
    Column("state_time", String(32)),
    Column("started_at", String(32)),
    Column("ended_at", String(32)),
    Column("nominal_start", String(64)),
    Column("nominal_end", String(64)),
    Column("parent_run_id", String(64), index=True),
    Column("root_run_id", String(64)),
    Column("error_message", Text),
    Column("code_hash", String(64)),
    Column("code_version", String(255)),
    Column("facets", Text),
    Column("facets_time", String(32)),
)

run_datasets_table = Table(
    "lineage_run_datasets",
    metadata,
    Column("run_id", String(64), nullable=False),
    Column("dataset_id", Integer, nullable=False),
    Column("direction", String(6), nullable=False),  # input | output
    Column("dataset_version_id", Integer),
    PrimaryKeyConstraint("run_id", "dataset_id", "direction"),
    Index("ix_lineage_run_datasets_dataset", "dataset_id", "direction"),
    Index("ix_lineage_run_datasets_version", "dataset_version_id"),
)

column_edges_table = Table(
    "lineage_column_edges",
    metadata,
    Column("dataset_id", Integer, nullable=False),
    Column("field", String(512), nullable=False),
    Column("input_dataset_id", Integer, nullable=False),
    Column("input_field", String(512), nullable=False),
    Column("transformations", Text),
    PrimaryKeyConstraint("dataset_id", "field", "input_dataset_id", "input_field"),
    Index("ix_lineage_column_edges_input", "input_dataset_id", "input_field"),
)

# OpenLineage event type -> (run state as Marquez names it, rank). A state is replaced only by one of higher rank, or
# of equal rank and a later event time: a COMPLETE that arrives before its START is never undone by the START.
RUN_STATES = {
    "START": ("RUNNING", 1),
    "RUNNING": ("RUNNING", 2),
    "COMPLETE": ("COMPLETED", 3),
    "FAIL": ("FAILED", 3),
    "ABORT": ("ABORTED", 3),
}


class LineageError(Exception):
    """A problem the user can fix: unknown node, empty store, unreadable event file. The CLI exits 2."""


class InvalidEventError(LineageError):
    pass


class UnreadableEventFileError(LineageError):
    def __init__(self, file: str, line: int | None, reason: str):
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {reason}")
        self.file, self.line, self.reason = file, line, reason


def default_store_url(paths: config.Paths | None = None) -> str:
    """``$LINEAGE_STORE_URL`` (any SQLAlchemy URL, e.g. ``postgresql+psycopg2://user:pw@host/lineage``), else SQLite
    at ``var/lineage/store.db``."""
    if os.environ.get(STORE_URL_ENV, "").strip():
        return os.environ[STORE_URL_ENV].strip()
    paths = paths or config.Paths.current()
    return f"sqlite:///{paths.lineage / 'store.db'}"


def utc_time(value: str) -> str:
    """An ISO-8601 time as fixed-width UTC (``2025-01-01T00:00:00.000000Z``): string order is time order."""
    text = value.strip()
    if "." in text:  # Python parses at most 6 fractional digits; Java emits up to 9
        head, _, tail = text.partition(".")
        digits = len(tail) - len(tail.lstrip("0123456789"))
        text = f"{head}.{tail[: min(digits, 6)]}{tail[digits:]}"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def dataset_key(namespace: str, name: str) -> str:
    return f"dataset:{namespace}:{name}"


def job_key(namespace: str, name: str) -> str:
    return f"job:{namespace}:{name}"


def dataset_aliases(namespace: str, name: str, facets: dict) -> set[str]:
    """Names a user may type for a dataset: ``namespace:name``, a URL as one string, its symlinked table names."""
    aliases = {f"{namespace}:{name}"}
    if "://" in namespace and name.startswith("/"):
        aliases.add(namespace + name)
    if namespace == "file":
        aliases.add(name)
    for identifier in (facets.get("symlinks") or {}).get("identifiers") or []:
        if identifier.get("name"):
            aliases.add(identifier["name"])
    return aliases


def dataset_label(namespace: str, name: str, facets: dict) -> str:
    for identifier in (facets.get("symlinks") or {}).get("identifiers") or []:
        if identifier.get("type", "TABLE") == "TABLE" and identifier.get("name"):
            return identifier["name"]
    if "://" in namespace and name.startswith("/"):
        return namespace + name
    return name if namespace == "file" else f"{namespace}:{name}"


def _merge_facets(stored: str | None, stored_time: str | None, new: dict, new_time: str) -> tuple[str, str]:
    """Facets of several events: the later event's facets win, an earlier one only fills in what is missing."""
    facets = json.loads(stored) if stored else {}
    if stored_time is None or new_time >= stored_time:
        facets.update(new)
        stored_time = new_time
    else:
        for key, value in new.items():
            facets.setdefault(key, value)
    return json.dumps(facets, sort_keys=True), stored_time


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def event_dedup_key(lineage_event: dict) -> str:
    run_id = (lineage_event.get("run") or {}).get("runId")
    if run_id:
        return f"{run_id}|{lineage_event.get('eventType', '')}|{utc_time(lineage_event['eventTime'])}"
    return "sha256:" + _digest(lineage_event)


def check_event(lineage_event) -> None:
    """Raise InvalidEventError unless this looks like an OpenLineage run, job or dataset event."""
    if not isinstance(lineage_event, dict):
        raise InvalidEventError(f"an OpenLineage event is a JSON object, not {type(lineage_event).__name__}")
    if not isinstance(lineage_event.get("eventTime"), str):
        raise InvalidEventError("no eventTime")
    try:
        utc_time(lineage_event["eventTime"])
    except ValueError:
        raise InvalidEventError(f"eventTime {lineage_event['eventTime']!r} is not an ISO-8601 time") from None
    if "run" in lineage_event:
        run = lineage_event.get("run")
        if not isinstance(run, dict) or not isinstance(run.get("runId"), str) or not run["runId"]:
            raise InvalidEventError("run without a runId")
        if not isinstance(lineage_event.get("job"), dict):
            raise InvalidEventError("run event without a job")
    if "job" not in lineage_event and "dataset" not in lineage_event:
        raise InvalidEventError("neither a run, a job nor a dataset: not an OpenLineage event")
    job = lineage_event.get("job")
    if job is not None and not (isinstance(job, dict) and job.get("namespace") and job.get("name")):
        raise InvalidEventError("job without a namespace and name")
    for side in ("inputs", "outputs"):
        datasets = lineage_event.get(side) or []
        if not isinstance(datasets, list):
            raise InvalidEventError(f"{side} is not a list")
        for dataset in datasets:
            if not (isinstance(dataset, dict) and dataset.get("namespace") and dataset.get("name")):
                raise InvalidEventError(f"an entry of {side} has no namespace and name")


@dataclass
class IngestResult:
    read: int = 0
    new: int = 0
    new_run_ids: set[str] = field(default_factory=set)

    @property
    def duplicates(self) -> int:
        return self.read - self.new

    def __iadd__(self, other: IngestResult) -> IngestResult:
        self.read += other.read
        self.new += other.new
        self.new_run_ids |= other.new_run_ids
        return self


@dataclass(frozen=True)
class SourcedEvent:
    event: dict
    source: str  # file:line, or where it came from


def read_event_file(path: Path | str) -> list[SourcedEvent]:
    """Events of a JSON-lines file (``-`` is stdin), or of a file holding one JSON event or a list of them.

    Every line is checked before anything is stored; a bad one raises UnreadableEventFileError naming file and line."""
    name = str(path)
    try:
        text = sys.stdin.read() if name == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UnreadableEventFileError(name, None, f"cannot read: {error}") from None
    label = "<stdin>" if name == "-" else name
    stripped = text.strip()
    if stripped.startswith("[") or (stripped.startswith("{") and "\n" in stripped and _whole_json(stripped)):
        try:
            document = json.loads(stripped)
        except ValueError as error:
            raise UnreadableEventFileError(label, error.lineno, f"not valid JSON ({error.msg})") from None
        items = document if isinstance(document, list) else [document]
        out = []
        for index, item in enumerate(items, start=1):
            try:
                check_event(item)
            except InvalidEventError as error:
                raise UnreadableEventFileError(label, None, f"event {index}: {error}") from None
            out.append(SourcedEvent(item, f"{label}#{index}"))
        return out
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as error:
            raise UnreadableEventFileError(
                label, number, f"not valid JSON ({error.msg} at column {error.colno})"
            ) from None
        try:
            check_event(item)
        except InvalidEventError as error:
            raise UnreadableEventFileError(label, number, str(error)) from None
        out.append(SourcedEvent(item, f"{label}:{number}"))
    return out


def _whole_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def discover_event_files(paths: config.Paths | None = None) -> list[Path]:
    """Every event file under ``var/lineage/``: the Airflow events, the Spark listener's, and spooled events."""
    paths = paths or config.Paths.current()
    if not paths.lineage.exists():
        return []
    files = sorted(p for p in paths.lineage.rglob("*.jsonl") if paths.job_reports not in p.parents)
    if paths.lineage_spool.exists():
        files += sorted(p for p in paths.lineage_spool.glob("*.json"))
    return files


def _p(name: str):
    return bindparam(name)


# Statements of the ingest path, built once: an event costs a handful of executions of already-compiled SQL.
_SELECT_NODE = select(nodes_table.c.id).where(nodes_table.c.key == _p("p_key"))
_SELECT_ALIASES = select(aliases_table.c.alias).where(aliases_table.c.node_id == _p("p_node"))
_SELECT_EDGE = select(edges_table.c.source).where(
    edges_table.c.source == _p("p_source"), edges_table.c.target == _p("p_target")
)
_SELECT_JOB = select(jobs_table.c.id, jobs_table.c.facets, jobs_table.c.updated_at).where(
    jobs_table.c.namespace == _p("p_ns"), jobs_table.c.name == _p("p_name")
)
_UPDATE_JOB_FACETS = (
    update(jobs_table).where(jobs_table.c.id == _p("p_id")).values(facets=_p("p_facets"), updated_at=_p("p_time"))
)
_UPDATE_JOB_LATEST = (
    update(jobs_table)
    .where(
        jobs_table.c.id == _p("p_id"),
        or_(
            jobs_table.c.latest_run_time.is_(None),
            jobs_table.c.latest_run_time <= _p("p_time"),
            jobs_table.c.latest_run_id == _p("p_run"),
        ),
    )
    .values(latest_run_id=_p("p_run"), latest_run_time=_p("p_time"), current_version_id=_p("p_version"))
)
_SELECT_DATASET = select(datasets_table.c.id, datasets_table.c.facets, datasets_table.c.updated_at).where(
    datasets_table.c.namespace == _p("p_ns"), datasets_table.c.name == _p("p_name")
)
_UPDATE_DATASET_FACETS = (
    update(datasets_table)
    .where(datasets_table.c.id == _p("p_id"))
    .values(facets=_p("p_facets"), updated_at=_p("p_time"))
)
_UPDATE_NODE_LABEL = update(nodes_table).where(nodes_table.c.id == _p("p_id")).values(label=_p("p_label"))
_SELECT_VERSION = select(
    dataset_versions_table.c.id, dataset_versions_table.c.schema, dataset_versions_table.c.created_by_run_id
).where(dataset_versions_table.c.dataset_id == _p("p_dataset"), dataset_versions_table.c.version == _p("p_version"))
_UPDATE_VERSION = (
    update(dataset_versions_table)
    .where(dataset_versions_table.c.id == _p("p_id"))
    .values(
        schema=func.coalesce(dataset_versions_table.c.schema, _p("p_schema")),
        schema_producer=case(
            (dataset_versions_table.c.schema.is_(None), _p("p_producer")),
            else_=dataset_versions_table.c.schema_producer,
        ),
        created_by_run_id=func.coalesce(dataset_versions_table.c.created_by_run_id, _p("p_run")),
    )
)
_UPDATE_CURRENT_VERSION = (
    update(datasets_table)
    .where(
        datasets_table.c.id == _p("p_id"),
        or_(datasets_table.c.current_version_time.is_(None), datasets_table.c.current_version_time <= _p("p_time")),
    )
    .values(current_version_id=_p("p_version"), current_version_time=_p("p_time"))
)
_UPDATE_FIRST_VERSION = (
    update(datasets_table)
    .where(datasets_table.c.id == _p("p_id"), datasets_table.c.current_version_id.is_(None))
    .values(current_version_id=_p("p_version"))
)
_SELECT_RUN = select(runs_table).where(runs_table.c.id == _p("p_run"))
_SELECT_RUN_IO = (
    select(run_datasets_table.c.direction, datasets_table.c.namespace, datasets_table.c.name)
    .join(datasets_table, datasets_table.c.id == run_datasets_table.c.dataset_id)
    .where(run_datasets_table.c.run_id == _p("p_run"))
)
_SELECT_JOB_VERSION = select(job_versions_table.c.id).where(
    job_versions_table.c.job_id == _p("p_job"), job_versions_table.c.version == _p("p_version")
)
_UPDATE_RUN_VERSION = update(runs_table).where(runs_table.c.id == _p("p_run")).values(job_version_id=_p("p_version"))
_RUN_USING_VERSION = select(runs_table.c.id).where(runs_table.c.job_version_id == _p("p_version")).limit(1)
_DELETE_JOB_VERSION = job_versions_table.delete().where(job_versions_table.c.id == _p("p_version"))
_SELECT_COLUMN_EDGE = select(column_edges_table.c.transformations).where(
    column_edges_table.c.dataset_id == _p("p_dataset"),
    column_edges_table.c.field == _p("p_field"),
    column_edges_table.c.input_dataset_id == _p("p_input"),
    column_edges_table.c.input_field == _p("p_input_field"),
)
_UPDATE_COLUMN_EDGE = (
    update(column_edges_table)
    .where(
        column_edges_table.c.dataset_id == _p("p_dataset"),
        column_edges_table.c.field == _p("p_field"),
        column_edges_table.c.input_dataset_id == _p("p_input"),
        column_edges_table.c.input_field == _p("p_input_field"),
    )
    .values(transformations=_p("p_transformations"))
)


def _dialect_statements(dialect: str) -> dict:
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
        .join(down, down.c.ancestor == _p("p_target"))
        .where(up.c.descendant == _p("p_source"))
    )
    extend = dialect_insert(closure_table).from_select(["ancestor", "descendant", "depth"], pairs)
    extend = extend.on_conflict_do_update(
        index_elements=["ancestor", "descendant"],
        set_={"depth": extend.excluded.depth},
        where=extend.excluded.depth < closure_table.c.depth,
    )
    raw = dialect_insert(events_table).on_conflict_do_nothing(index_elements=["dedup_key"])
    run_dataset = dialect_insert(run_datasets_table)
    run_dataset = run_dataset.on_conflict_do_update(
        index_elements=["run_id", "dataset_id", "direction"],
        set_={
            "dataset_version_id": func.coalesce(
                run_dataset.excluded.dataset_version_id, run_datasets_table.c.dataset_version_id
            )
        },
    )
    return {"extend_closure": extend, "insert_event": raw, "upsert_run_dataset": run_dataset}


class LineageStore:
    """One lineage store. Thread-safe for writers in one process (the HTTP endpoint); SQLite in WAL mode lets other
    processes read while it writes."""

    def __init__(self, url: str | None = None, echo: bool = False):
        self.url = url or default_store_url()
        if self.url.startswith("sqlite:///"):
            Path(self.url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.engine: Engine = create_engine(self.url, echo=echo)
        self.dialect = self.engine.dialect.name
        if self.dialect == "sqlite":
            _sqlite_pragmas(self.engine)
        elif self.dialect != "postgresql":
            raise LineageError(f"lineage store {self.url!r}: only SQLite and PostgreSQL are supported")
        metadata.create_all(self.engine)
        self.statements = _dialect_statements(self.dialect)
        self._lock = threading.Lock()
        self._ids: dict[tuple, int] = {}  # ids of rows that never change once written: nodes, jobs, datasets, versions
        self._aliases: dict[int, set[str]] = {}
        self._edges: set[tuple[int, int]] = set()

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> LineageStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---------------------------------------------------------------- ingest
    def ingest(self, lineage_events: Iterable[dict | SourcedEvent], batch_size: int = 500) -> IngestResult:
        """Store events; returns how many were read and how many were new. Each batch is one transaction."""
        result = IngestResult()
        batch: list[SourcedEvent] = []
        for item in lineage_events:
            batch.append(item if isinstance(item, SourcedEvent) else SourcedEvent(item, ""))
            if len(batch) >= batch_size:
                result += self._ingest_batch(batch)
                batch = []
        if batch:
            result += self._ingest_batch(batch)
        return result

    def ingest_files(self, files: Iterable[Path | str]) -> IngestResult:
        """Read every file first (a bad line stops everything before anything is stored), then ingest."""
        sourced = [item for file in files for item in read_event_file(file)]
        return self.ingest(sourced)

    def _ingest_batch(self, batch: list[SourcedEvent]) -> IngestResult:
        result = IngestResult(read=len(batch))
        with self._lock:
            try:
                with self.engine.begin() as conn:
                    for item in batch:
                        check_event(item.event)
                        if _Ingest(self, conn, item.event, item.source).run():
                            result.new += 1
                            run_id = (item.event.get("run") or {}).get("runId")
                            if run_id:
                                result.new_run_ids.add(run_id)
            except BaseException:
                self._ids.clear()  # ids of rolled-back rows must not be reused
                self._aliases.clear()
                self._edges.clear()
                raise
        return result

    # ---------------------------------------------------------------- graph
    def _node_id(self, conn: Connection, kind: str, namespace: str, name: str, label: str) -> int:
        key = dataset_key(namespace, name) if kind == "dataset" else job_key(namespace, name)
        cached = self._ids.get(("node", key))
        if cached is not None:
            return cached
        node_id = conn.execute(_SELECT_NODE, {"p_key": key}).scalar()
        if node_id is None:
            node_id = conn.execute(
                nodes_table.insert(), {"key": key, "kind": kind, "namespace": namespace, "name": name, "label": label}
            ).inserted_primary_key[0]
            conn.execute(closure_table.insert(), {"ancestor": node_id, "descendant": node_id, "depth": 0})
            aliases = {key, f"{namespace}:{name}"} | ({name} if kind == "job" else set())
            conn.execute(aliases_table.insert(), [{"alias": alias, "node_id": node_id} for alias in sorted(aliases)])
            self._aliases[node_id] = aliases
        self._ids[("node", key)] = node_id
        return node_id

    def add_aliases(self, conn: Connection, node_id: int, aliases: set[str]) -> bool:
        """Record more names of a node; True if any was new."""
        known = self._aliases.get(node_id)
        if known is None:
            known = self._aliases[node_id] = set(conn.execute(_SELECT_ALIASES, {"p_node": node_id}).scalars())
        missing = aliases - known
        if missing:
            conn.execute(aliases_table.insert(), [{"alias": alias, "node_id": node_id} for alias in sorted(missing)])
            known |= missing
        return bool(missing)

    def add_edge(self, conn: Connection, source: int, target: int) -> bool:
        """Add a graph edge and extend the closure table; False if the edge was known."""
        if (source, target) in self._edges:
            return False
        exists = conn.execute(_SELECT_EDGE, {"p_source": source, "p_target": target}).first()
        self._edges.add((source, target))
        if exists:
            return False
        conn.execute(edges_table.insert(), {"source": source, "target": target})
        conn.execute(self.statements["extend_closure"], {"p_source": source, "p_target": target})
        return True

    # ---------------------------------------------------------------- small helpers for callers
    def count(self, table: Table) -> int:
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(table)).scalar_one()


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        # A transaction that writes takes the write lock at its first write (BEGIN IMMEDIATE): two writers (the CLI and
        # the endpoint) then wait for each other instead of failing to upgrade a read lock. Readers never wait (WAL).
        dbapi_connection.isolation_level = "IMMEDIATE"
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()


class _Ingest:
    """Ingest of one event inside the batch's transaction."""

    def __init__(self, store: LineageStore, conn: Connection, lineage_event: dict, source: str):
        self.store, self.conn, self.event, self.source = store, conn, lineage_event, source
        self.time = utc_time(lineage_event["eventTime"])
        self.run_id: str | None = (lineage_event.get("run") or {}).get("runId")

    def run(self) -> bool:
        if not self._store_raw():
            return False
        job = self.event.get("job")
        job_row = self._job(job) if job else None
        inputs = [self._dataset(d, "input") for d in self.event.get("inputs") or []]
        outputs = [self._dataset(d, "output") for d in self.event.get("outputs") or []]
        if isinstance(self.event.get("dataset"), dict):  # a DatasetEvent
            self._dataset(self.event["dataset"], None)
        if job_row is not None:
            job_id, job_node = job_row
            for _, dataset_node in inputs:
                self.store.add_edge(self.conn, dataset_node, job_node)
            for _, dataset_node in outputs:
                self.store.add_edge(self.conn, job_node, dataset_node)
            if self.run_id:
                self._run(job_id, bool(inputs or outputs))
        for dataset, (dataset_id, _) in zip(self.event.get("outputs") or [], outputs, strict=True):
            self._column_lineage(dataset, dataset_id)
        return True

    def _store_raw(self) -> bool:
        job = self.event.get("job") or {}
        inserted = self.conn.execute(
            self.store.statements["insert_event"],
            {
                "dedup_key": event_dedup_key(self.event),
                "run_id": self.run_id,
                "event_type": self.event.get("eventType"),
                "event_time": self.time,
                "job_namespace": job.get("namespace"),
                "job_name": job.get("name"),
                "source": self.source[:1024],
                "payload": json.dumps(self.event, sort_keys=True),
            },
        )
        return inserted.rowcount == 1

    def _job(self, job: dict) -> tuple[int, int]:
        namespace, name = job["namespace"], job["name"]
        conn, store = self.conn, self.store
        node_id = store._node_id(conn, "job", namespace, name, name)
        facets = job.get("facets") or {}
        job_id = store._ids.get(("job", namespace, name))
        if job_id is not None and not facets:
            return job_id, node_id
        row = conn.execute(_SELECT_JOB, {"p_ns": namespace, "p_name": name}).first()
        if row is None:
            job_id = conn.execute(
                jobs_table.insert(),
                {
                    "node_id": node_id,
                    "namespace": namespace,
                    "name": name,
                    "created_at": self.time,
                    "updated_at": self.time,
                    "facets": json.dumps(facets, sort_keys=True),
                },
            ).inserted_primary_key[0]
        else:
            job_id = row.id
            if facets:
                merged, updated = _merge_facets(row.facets, row.updated_at, facets, self.time)
                conn.execute(_UPDATE_JOB_FACETS, {"p_id": job_id, "p_facets": merged, "p_time": updated})
        store._ids[("job", namespace, name)] = job_id
        return job_id, node_id

    def _dataset(self, dataset: dict, direction: str | None) -> tuple[int, int]:
        namespace, name = dataset["namespace"], dataset["name"]
        facets = dataset.get("facets") or {}
        conn, store = self.conn, self.store
        node_id = store._node_id(conn, "dataset", namespace, name, dataset_label(namespace, name, facets))
        if store.add_aliases(conn, node_id, dataset_aliases(namespace, name, facets)) and facets.get("symlinks"):
            conn.execute(_UPDATE_NODE_LABEL, {"p_id": node_id, "p_label": dataset_label(namespace, name, facets)})
        dataset_id = store._ids.get(("dataset", namespace, name))
        if dataset_id is None or facets:
            row = conn.execute(_SELECT_DATASET, {"p_ns": namespace, "p_name": name}).first()
            if row is None:
                dataset_id = conn.execute(
                    datasets_table.insert(),
                    {
                        "node_id": node_id,
                        "namespace": namespace,
                        "name": name,
                        "created_at": self.time,
                        "updated_at": self.time,
                        "facets": json.dumps(facets, sort_keys=True),
                    },
                ).inserted_primary_key[0]
            else:
                dataset_id = row.id
                if facets:
                    merged, updated = _merge_facets(row.facets, row.updated_at, facets, self.time)
                    conn.execute(_UPDATE_DATASET_FACETS, {"p_id": dataset_id, "p_facets": merged, "p_time": updated})
            store._ids[("dataset", namespace, name)] = dataset_id
        version_id = self._dataset_version(dataset_id, facets, direction)
        if direction and self.run_id:
            conn.execute(
                store.statements["upsert_run_dataset"],
                {
                    "run_id": self.run_id,
                    "dataset_id": dataset_id,
                    "direction": direction,
                    "dataset_version_id": version_id,
                },
            )
        return dataset_id, node_id

    def _dataset_version(self, dataset_id: int, facets: dict, direction: str | None) -> int | None:
        version = (facets.get("version") or {}).get("datasetVersion")
        if version is None:
            return None
        version = str(version)
        conn, store = self.conn, self.store
        fields = (facets.get("schema") or {}).get("fields") or []
        schema = json.dumps([[f.get("name"), f.get("type")] for f in fields]) if fields else None
        creator = self.run_id if direction == "output" else None
        cache_key = ("version", dataset_id, version)
        version_id = store._ids.get(cache_key)
        if version_id is None:
            version_id = conn.execute(_SELECT_VERSION, {"p_dataset": dataset_id, "p_version": version}).scalar()
        if version_id is None:
            version_id = conn.execute(
                dataset_versions_table.insert(),
                {
                    "dataset_id": dataset_id,
                    "version": version,
                    "schema": schema,
                    "schema_producer": self.event.get("producer") if schema else None,
                    "created_by_run_id": creator,
                    "created_at": self.time,
                },
            ).inserted_primary_key[0]
        elif (schema and ("version_schema", version_id) not in store._ids) or (
            creator and ("version_creator", version_id) not in store._ids
        ):
            conn.execute(
                _UPDATE_VERSION,
                {
                    "p_id": version_id,
                    "p_schema": schema,
                    "p_producer": self.event.get("producer") if schema else None,
                    "p_run": creator,
                },
            )
        store._ids[cache_key] = version_id
        if schema:
            store._ids[("version_schema", version_id)] = 1
        if creator:
            store._ids[("version_creator", version_id)] = 1
        if direction == "output":
            conn.execute(_UPDATE_CURRENT_VERSION, {"p_id": dataset_id, "p_version": version_id, "p_time": self.time})
            store._ids[("has_version", dataset_id)] = 1
        elif ("has_version", dataset_id) not in store._ids:
            conn.execute(_UPDATE_FIRST_VERSION, {"p_id": dataset_id, "p_version": version_id})
            store._ids[("has_version", dataset_id)] = 1
        return version_id

    def _run(self, job_id: int, has_datasets: bool) -> None:
        conn = self.conn
        run_facets = (self.event.get("run") or {}).get("facets") or {}
        job_facets = (self.event.get("job") or {}).get("facets") or {}
        state, rank = RUN_STATES.get(self.event.get("eventType") or "", (None, 0))
        row = conn.execute(_SELECT_RUN, {"p_run": self.run_id}).first()
        values: dict = {}
        if row is None:
            current = {
                "state_rank": 0,
                "state_time": None,
                "started_at": None,
                "ended_at": None,
                "facets": None,
                "facets_time": None,
                "parent_run_id": None,
                "nominal_start": None,
                "code_hash": None,
                "code_version": None,
                "job_version_id": None,
            }
            values.update(id=self.run_id, job_id=job_id, state="NEW", state_rank=0)
        else:
            current = row._mapping
        if state and (rank, self.time) >= (current["state_rank"], current["state_time"] or ""):
            values.update(state=state, state_rank=rank, state_time=self.time)
        if self.event.get("eventType") == "START" and (
            current["started_at"] is None or self.time < current["started_at"]
        ):
            values["started_at"] = self.time
        if rank == 3 and (current["ended_at"] is None or self.time > current["ended_at"]):
            values["ended_at"] = self.time
        if run_facets:
            values["facets"], values["facets_time"] = _merge_facets(
                current["facets"], current["facets_time"], run_facets, self.time
            )
        parent = run_facets.get("parent") or {}
        if parent.get("run", {}).get("runId") and not current["parent_run_id"]:
            values["parent_run_id"] = parent["run"]["runId"]
            values["root_run_id"] = (parent.get("root") or {}).get("run", {}).get("runId") or parent["run"]["runId"]
        error = (run_facets.get("errorMessage") or {}).get("message")
        if error:
            values["error_message"] = error
        nominal = run_facets.get("nominalTime") or {}
        if nominal.get("nominalStartTime") and not current["nominal_start"]:
            values["nominal_start"], values["nominal_end"] = (
                nominal.get("nominalStartTime"),
                nominal.get("nominalEndTime"),
            )
        code = (job_facets.get("sourceCode") or {}).get("sourceCode")
        code_hash = hashlib.sha256(code.encode()).hexdigest() if code else None
        if code_hash and code_hash != current["code_hash"]:
            values["code_hash"] = code_hash
        location_version = (job_facets.get("sourceCodeLocation") or {}).get("version")
        if location_version and location_version != current["code_version"]:
            values["code_version"] = location_version
        if row is None:
            conn.execute(runs_table.insert(), values)
        elif values:
            conn.execute(update(runs_table).where(runs_table.c.id == self.run_id).values(**values))
        if row is None or has_datasets or "code_hash" in values or "code_version" in values:
            self._job_version(
                job_id,
                values.get("code_hash") or current["code_hash"],
                values.get("code_version") or current["code_version"],
                current["job_version_id"],
                current["started_at"] or values.get("started_at") or self.time,
            )

    def _job_version(
        self, job_id: int, code_hash: str | None, code_version: str | None, previous: int | None, run_time: str
    ) -> None:
        """The run's job version: its inputs and outputs (all events of the run so far) and its source code."""
        conn, store = self.conn, self.store
        io = conn.execute(_SELECT_RUN_IO, {"p_run": self.run_id}).all()
        inputs = sorted(f"{ns}:{name}" for direction, ns, name in io if direction == "input")
        outputs = sorted(f"{ns}:{name}" for direction, ns, name in io if direction == "output")
        version = _digest({"inputs": inputs, "outputs": outputs, "code": code_hash or code_version})
        version_id = store._ids.get(("job_version", job_id, version))
        if version_id is None:
            version_id = conn.execute(_SELECT_JOB_VERSION, {"p_job": job_id, "p_version": version}).scalar()
        if version_id is None:
            version_id = conn.execute(
                job_versions_table.insert(),
                {
                    "job_id": job_id,
                    "version": version,
                    "inputs": json.dumps(inputs),
                    "outputs": json.dumps(outputs),
                    "code_hash": code_hash,
                    "code_version": code_version,
                    "created_at": self.time,
                },
            ).inserted_primary_key[0]
        store._ids[("job_version", job_id, version)] = version_id
        if previous != version_id:
            conn.execute(_UPDATE_RUN_VERSION, {"p_run": self.run_id, "p_version": version_id})
            if previous is not None and conn.execute(_RUN_USING_VERSION, {"p_version": previous}).first() is None:
                conn.execute(
                    _DELETE_JOB_VERSION, {"p_version": previous}
                )  # a version only a partial event of this run had
                store._ids = {k: v for k, v in store._ids.items() if not (k[0] == "job_version" and v == previous)}
        conn.execute(
            _UPDATE_JOB_LATEST, {"p_id": job_id, "p_run": self.run_id, "p_time": run_time, "p_version": version_id}
        )

    def _column_lineage(self, dataset: dict, dataset_id: int) -> None:
        fields = ((dataset.get("facets") or {}).get("columnLineage") or {}).get("fields") or {}
        conn, store = self.conn, self.store
        for field_name, spec in fields.items():
            for input_field in (spec or {}).get("inputFields") or []:
                if not (input_field.get("namespace") and input_field.get("name") and input_field.get("field")):
                    continue
                namespace, name = input_field["namespace"], input_field["name"]
                input_id = (
                    self._dataset(input_field | {"facets": {}}, None)[0]
                    if ("dataset", namespace, name) not in store._ids
                    else store._ids[("dataset", namespace, name)]
                )
                transformations = json.dumps(input_field.get("transformations") or [], sort_keys=True)
                keys = {
                    "p_dataset": dataset_id,
                    "p_field": field_name,
                    "p_input": input_id,
                    "p_input_field": input_field["field"],
                }
                existing = conn.execute(_SELECT_COLUMN_EDGE, keys).first()
                if existing is None:
                    conn.execute(
                        column_edges_table.insert(),
                        {
                            "dataset_id": dataset_id,
                            "field": field_name,
                            "input_dataset_id": input_id,
                            "input_field": input_field["field"],
                            "transformations": transformations,
                        },
                    )
                elif existing.transformations != transformations:
                    conn.execute(_UPDATE_COLUMN_EDGE, {**keys, "p_transformations": transformations})


def iter_events(store: LineageStore, run_id: str | None = None) -> Iterator[dict]:
    """The raw events kept, in event-time order (all of them, or one run's)."""
    query = select(events_table.c.payload).order_by(events_table.c.event_time, events_table.c.id)
    if run_id:
        query = query.where(events_table.c.run_id == run_id)
    with store.engine.connect() as conn:
        for (payload,) in conn.execute(query):
            yield json.loads(payload)
