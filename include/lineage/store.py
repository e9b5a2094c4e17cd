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
from datetime import datetime, timezone
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
    create_engine,
    event,
    func,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine

from include import config

STORE_URL_ENV = "LINEAGE_STORE_URL"

metadata = MetaData()

events_table = Table(
    "lineage_events", metadata,
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
    "lineage_nodes", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key", String(2048), nullable=False, unique=True),  # Marquez node id: dataset:<ns>:<name> | job:<ns>:<name>
    Column("kind", String(8), nullable=False),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(2048), nullable=False),
    Column("label", String(2048), nullable=False),
)

aliases_table = Table(
    "lineage_node_aliases", metadata,
    Column("alias", String(2048), nullable=False),
    Column("node_id", Integer, nullable=False),
    PrimaryKeyConstraint("alias", "node_id"),
)

edges_table = Table(
    "lineage_edges", metadata,
    Column("source", Integer, nullable=False),
    Column("target", Integer, nullable=False),
    PrimaryKeyConstraint("source", "target"),
    Index("ix_lineage_edges_target", "target", "source"),
)

closure_table = Table(
    "lineage_closure", metadata,
    Column("ancestor", Integer, nullable=False),
    Column("descendant", Integer, nullable=False),
    Column("depth", Integer, nullable=False),
    PrimaryKeyConstraint("ancestor", "descendant"),
    Index("ix_lineage_closure_upstream", "descendant", "depth", "ancestor"),
    Index("ix_lineage_closure_downstream", "ancestor", "depth", "descendant"),
)

jobs_table = Table(
    "lineage_jobs", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node_id", Integer, nullable=False, unique=True),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(1024), nullable=False),
    Column("created_at", String(32)),
    Column("updated_at", String(32)),
    Column("facets", Text),
    Column("current_version_id", Integer),
    Column("latest_run_id", String(64)),
    UniqueConstraint("namespace", "name"),
)

job_versions_table = Table(
    "lineage_job_versions", metadata,
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
    "lineage_datasets", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("node_id", Integer, nullable=False, unique=True),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(2048), nullable=False),
    Column("created_at", String(32)),
    Column("updated_at", String(32)),
    Column("facets", Text),
    Column("current_version_id", Integer),
    UniqueConstraint("namespace", "name"),
)

dataset_versions_table = Table(
    "lineage_dataset_versions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("dataset_id", Integer, nullable=False),
    Column("version", String(255), nullable=False),
    Column("schema", Text),
    Column("created_by_run_id", String(64)),
    Column("created_at", String(32)),
    UniqueConstraint("dataset_id", "version"),
)

runs_table = Table(
    "lineage_runs", metadata,
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
    "lineage_run_datasets", metadata,
    Column("run_id", String(64), nullable=False),
    Column("dataset_id", Integer, nullable=False),
    Column("direction", String(6), nullable=False),  # input | output
    Column("dataset_version_id", Integer),
    PrimaryKeyConstraint("run_id", "dataset_id", "direction"),
    Index("ix_lineage_run_datasets_dataset", "dataset_id", "direction"),
    Index("ix_lineage_run_datasets_version", "dataset_version_id"),
)

column_edges_table = Table(
    "lineage_column_edges", metadata,
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


class InvalidEvent(LineageError):
    pass


class UnreadableEventFile(LineageError):
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
        text = f"{head}.{tail[:min(digits, 6)]}{tail[digits:]}"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
    """Raise InvalidEvent unless this looks like an OpenLineage run, job or dataset event."""
    if not isinstance(lineage_event, dict):
        raise InvalidEvent(f"an OpenLineage event is a JSON object, not {type(lineage_event).__name__}")
    if not isinstance(lineage_event.get("eventTime"), str):
        raise InvalidEvent("no eventTime")
    try:
        utc_time(lineage_event["eventTime"])
    except ValueError:
        raise InvalidEvent(f"eventTime {lineage_event['eventTime']!r} is not an ISO-8601 time") from None
    if "run" in lineage_event:
        run = lineage_event.get("run")
        if not isinstance(run, dict) or not isinstance(run.get("runId"), str) or not run["runId"]:
            raise InvalidEvent("run without a runId")
        if not isinstance(lineage_event.get("job"), dict):
            raise InvalidEvent("run event without a job")
    if "job" not in lineage_event and "dataset" not in lineage_event:
        raise InvalidEvent("neither a run, a job nor a dataset: not an OpenLineage event")
    job = lineage_event.get("job")
    if job is not None and not (isinstance(job, dict) and job.get("namespace") and job.get("name")):
        raise InvalidEvent("job without a namespace and name")
    for side in ("inputs", "outputs"):
        datasets = lineage_event.get(side) or []
        if not isinstance(datasets, list):
            raise InvalidEvent(f"{side} is not a list")
        for dataset in datasets:
            if not (isinstance(dataset, dict) and dataset.get("namespace") and dataset.get("name")):
                raise InvalidEvent(f"an entry of {side} has no namespace and name")


@dataclass
class IngestResult:
    read: int = 0
    new: int = 0
    new_run_ids: set[str] = field(default_factory=set)

    @property
    def duplicates(self) -> int:
        return self.read - self.new

    def __iadd__(self, other: "IngestResult") -> "IngestResult":
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

    Every line is checked before anything is stored; a bad one raises UnreadableEventFile naming file and line."""
    name = str(path)
    try:
        text = sys.stdin.read() if name == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UnreadableEventFile(name, None, f"cannot read: {error}") from None
    label = "<stdin>" if name == "-" else name
    stripped = text.strip()
    if stripped.startswith("[") or (stripped.startswith("{") and "\n" in stripped and _whole_json(stripped)):
        try:
            document = json.loads(stripped)
        except ValueError as error:
            raise UnreadableEventFile(label, error.lineno, f"not valid JSON ({error.msg})") from None
        items = document if isinstance(document, list) else [document]
        out = []
        for index, item in enumerate(items, start=1):
            try:
                check_event(item)
            except InvalidEvent as error:
                raise UnreadableEventFile(label, None, f"event {index}: {error}") from None
            out.append(SourcedEvent(item, f"{label}#{index}"))
        return out
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as error:
            raise UnreadableEventFile(label, number, f"not valid JSON ({error.msg} at column {error.colno})") from None
        try:
            check_event(item)
        except InvalidEvent as error:
            raise UnreadableEventFile(label, number, str(error)) from None
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


class LineageStore:
    """One lineage store. Thread-safe for writers in one process (the HTTP endpoint); SQLite in WAL mode lets other
    processes read while it writes."""

    def __init__(self, url: str | None = None, echo: bool = False):
        self.url = url or default_store_url()
        if self.url.startswith("sqlite:///"):
            Path(self.url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.engine: Engine = create_engine(self.url, echo=echo, future=True)
        self.dialect = self.engine.dialect.name
        if self.dialect == "sqlite":
            _sqlite_pragmas(self.engine)
        elif self.dialect != "postgresql":
            raise LineageError(f"lineage store {self.url!r}: only SQLite and PostgreSQL are supported")
        metadata.create_all(self.engine)
        self._write_engine = self.engine.execution_options(lineage_write=True)
        self._lock = threading.Lock()
        self._ids: dict[tuple, int] = {}
        self._aliases: dict[int, set[str]] = {}
        self._edges: set[tuple[int, int]] = set()

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "LineageStore":
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
                with self._write_engine.begin() as conn:
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

    # ---------------------------------------------------------------- ids shared by ingest
    def _node_id(self, conn: Connection, kind: str, namespace: str, name: str, label: str) -> int:
        key = dataset_key(namespace, name) if kind == "dataset" else job_key(namespace, name)
        cached = self._ids.get(("node", key))
        if cached is not None:
            return cached
        node_id = conn.execute(select(nodes_table.c.id).where(nodes_table.c.key == key)).scalar()
        if node_id is None:
            node_id = conn.execute(nodes_table.insert().values(key=key, kind=kind, namespace=namespace, name=name, label=label)).inserted_primary_key[0]
            conn.execute(closure_table.insert().values(ancestor=node_id, descendant=node_id, depth=0))
            aliases = {key, f"{namespace}:{name}"} | ({name} if kind == "job" else set())
            conn.execute(aliases_table.insert(), [{"alias": alias, "node_id": node_id} for alias in sorted(aliases)])
            self._aliases[node_id] = aliases
        self._ids[("node", key)] = node_id
        return node_id

    def add_aliases(self, conn: Connection, node_id: int, aliases: set[str]) -> bool:
        """Record more names of a node; True if any was new."""
        known = self._aliases.get(node_id)
        if known is None:
            known = self._aliases[node_id] = set(
                conn.execute(select(aliases_table.c.alias).where(aliases_table.c.node_id == node_id)).scalars())
        missing = aliases - known
        if missing:
            conn.execute(aliases_table.insert(), [{"alias": alias, "node_id": node_id} for alias in sorted(missing)])
            known |= missing
        return bool(missing)

    def add_edge(self, conn: Connection, source: int, target: int) -> bool:
        """Add a graph edge and extend the closure table; False if the edge was known."""
        if (source, target) in self._edges:
            return False
        exists = conn.execute(select(edges_table.c.source).where(edges_table.c.source == source, edges_table.c.target == target)).first()
        self._edges.add((source, target))
        if exists:
            return False
        conn.execute(edges_table.insert().values(source=source, target=target))
        self._extend_closure(conn, source, target)
        return True

    def _extend_closure(self, conn: Connection, source: int, target: int) -> None:
        """Every ancestor of ``source`` (itself included) now reaches every descendant of ``target`` (itself
        included), at distance d(x, source) + 1 + d(target, y); an existing pair keeps the shorter distance."""
        up = closure_table.alias("up")
        down = closure_table.alias("down")
        pairs = (select(up.c.ancestor, down.c.descendant, (up.c.depth + 1 + down.c.depth).label("depth"))
                 .select_from(up).join(down, down.c.ancestor == target).where(up.c.descendant == source))
        if self.dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        else:
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        statement = dialect_insert(closure_table).from_select(["ancestor", "descendant", "depth"], pairs)
        statement = statement.on_conflict_do_update(
            index_elements=["ancestor", "descendant"],
            set_={"depth": statement.excluded.depth},
            where=statement.excluded.depth < closure_table.c.depth,
        )
        conn.execute(statement)

    # ---------------------------------------------------------------- small helpers for callers
    def count(self, table: Table) -> int:
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(table)).scalar_one()

    def is_empty(self) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(select(nodes_table.c.id).limit(1)).first() is None and \
                conn.execute(select(events_table.c.id).limit(1)).first() is None


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None  # let SQLAlchemy's BEGIN below take effect
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        # A writer takes the write lock at the start: two writers (CLI and endpoint) then wait for each other instead
        # of failing to upgrade a read transaction. Readers never wait (WAL).
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("lineage_write") else "BEGIN")


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
        if "dataset" in self.event and isinstance(self.event["dataset"], dict):  # a DatasetEvent
            self._dataset(self.event["dataset"], None)
        if job_row is not None:
            job_id, job_node = job_row
            for dataset_id, dataset_node, _ in inputs:
                self.store.add_edge(self.conn, dataset_node, job_node)
            for dataset_id, dataset_node, _ in outputs:
                self.store.add_edge(self.conn, job_node, dataset_node)
            if self.run_id:
                self._run(job_id, inputs, outputs)
        for dataset, (dataset_id, _, _) in zip(self.event.get("outputs") or [], outputs):
            self._column_lineage(dataset, dataset_id)
        return True

    def _store_raw(self) -> bool:
        key = event_dedup_key(self.event)
        conn = self.conn
        if conn.execute(select(events_table.c.id).where(events_table.c.dedup_key == key)).first():
            return False
        job = self.event.get("job") or {}
        conn.execute(events_table.insert().values(
            dedup_key=key, run_id=self.run_id, event_type=self.event.get("eventType"), event_time=self.time,
            job_namespace=job.get("namespace"), job_name=job.get("name"), source=self.source[:1024],
            payload=json.dumps(self.event, sort_keys=True),
        ))
        return True

    def _job(self, job: dict) -> tuple[int, int]:
        namespace, name = job["namespace"], job["name"]
        conn, store = self.conn, self.store
        node_id = store._node_id(conn, "job", namespace, name, name)
        row = conn.execute(select(jobs_table.c.id, jobs_table.c.facets, jobs_table.c.updated_at)
                           .where(jobs_table.c.namespace == namespace, jobs_table.c.name == name)).first()
        facets = job.get("facets") or {}
        if row is None:
            job_id = conn.execute(jobs_table.insert().values(
                node_id=node_id, namespace=namespace, name=name, created_at=self.time, updated_at=self.time,
                facets=json.dumps(facets, sort_keys=True))).inserted_primary_key[0]
        else:
            job_id = row.id
            merged, updated = _merge_facets(row.facets, row.updated_at, facets, self.time)
            conn.execute(update(jobs_table).where(jobs_table.c.id == job_id).values(facets=merged, updated_at=updated))
        return job_id, node_id

    def _dataset(self, dataset: dict, direction: str | None) -> tuple[int, int, int | None]:
        namespace, name = dataset["namespace"], dataset["name"]
        facets = dataset.get("facets") or {}
        conn, store = self.conn, self.store
        node_id = store._node_id(conn, "dataset", namespace, name, dataset_label(namespace, name, facets))
        if store.add_aliases(conn, node_id, dataset_aliases(namespace, name, facets)) and facets.get("symlinks"):
            conn.execute(update(nodes_table).where(nodes_table.c.id == node_id).values(label=dataset_label(namespace, name, facets)))
        row = conn.execute(select(datasets_table.c.id, datasets_table.c.facets, datasets_table.c.updated_at)
                           .where(datasets_table.c.namespace == namespace, datasets_table.c.name == name)).first()
        if row is None:
            dataset_id = conn.execute(datasets_table.insert().values(
                node_id=node_id, namespace=namespace, name=name, created_at=self.time, updated_at=self.time,
                facets=json.dumps(facets, sort_keys=True))).inserted_primary_key[0]
        else:
            dataset_id = row.id
            if facets:
                merged, updated = _merge_facets(row.facets, row.updated_at, facets, self.time)
                conn.execute(update(datasets_table).where(datasets_table.c.id == dataset_id).values(facets=merged, updated_at=updated))
        version_id = self._dataset_version(dataset_id, facets, direction)
        if direction and self.run_id:
            self._run_dataset(dataset_id, direction, version_id)
        return dataset_id, node_id, version_id

    def _dataset_version(self, dataset_id: int, facets: dict, direction: str | None) -> int | None:
        version = (facets.get("version") or {}).get("datasetVersion")
        if version is None:
            return None
        version = str(version)
        conn = self.conn
        row = conn.execute(select(dataset_versions_table.c.id, dataset_versions_table.c.schema, dataset_versions_table.c.created_by_run_id)
                           .where(dataset_versions_table.c.dataset_id == dataset_id, dataset_versions_table.c.version == version)).first()
        schema = [[f.get("name"), f.get("type")] for f in (facets.get("schema") or {}).get("fields") or []] or None
        creator = self.run_id if direction == "output" else None
        if row is None:
            version_id = conn.execute(dataset_versions_table.insert().values(
                dataset_id=dataset_id, version=version, schema=json.dumps(schema) if schema else None,
                created_by_run_id=creator, created_at=self.time)).inserted_primary_key[0]
        else:
            version_id = row.id
            changes = {}
            if schema and not row.schema:
                changes["schema"] = json.dumps(schema)
            if creator and not row.created_by_run_id:
                changes["created_by_run_id"] = creator
            if changes:
                conn.execute(update(dataset_versions_table).where(dataset_versions_table.c.id == version_id).values(**changes))
        latest = conn.execute(select(datasets_table.c.current_version_id).where(datasets_table.c.id == dataset_id)).scalar()
        if direction == "output" or latest is None:
            newer = latest is None or conn.execute(select(dataset_versions_table.c.created_at)
                                                   .where(dataset_versions_table.c.id == latest)).scalar() <= self.time
            if newer:
                conn.execute(update(datasets_table).where(datasets_table.c.id == dataset_id).values(current_version_id=version_id))
        return version_id

    def _run_dataset(self, dataset_id: int, direction: str, version_id: int | None) -> None:
        conn = self.conn
        where = (run_datasets_table.c.run_id == self.run_id, run_datasets_table.c.dataset_id == dataset_id,
                 run_datasets_table.c.direction == direction)
        row = conn.execute(select(run_datasets_table.c.dataset_version_id).where(*where)).first()
        if row is None:
            conn.execute(run_datasets_table.insert().values(run_id=self.run_id, dataset_id=dataset_id, direction=direction,
                                                            dataset_version_id=version_id))
        elif version_id is not None and row.dataset_version_id != version_id:
            conn.execute(update(run_datasets_table).where(*where).values(dataset_version_id=version_id))

    def _run(self, job_id: int, inputs, outputs) -> None:
        conn = self.conn
        run_facets = (self.event.get("run") or {}).get("facets") or {}
        job_facets = (self.event.get("job") or {}).get("facets") or {}
        state, rank = RUN_STATES.get(self.event.get("eventType") or "", (None, 0))
        row = conn.execute(select(runs_table).where(runs_table.c.id == self.run_id)).first()
        values: dict = {}
        if row is None:
            values.update(id=self.run_id, job_id=job_id, state="NEW", state_rank=0, state_time=None, facets=None, facets_time=None)
            current = {"state_rank": 0, "state_time": None, "started_at": None, "ended_at": None, "facets": None, "facets_time": None,
                       "parent_run_id": None, "error_message": None, "code_hash": None, "code_version": None, "nominal_start": None}
        else:
            current = row._mapping
        if state and (rank, self.time) >= (current["state_rank"], current["state_time"] or ""):
            values.update(state=state, state_rank=rank, state_time=self.time)
        if self.event.get("eventType") == "START" and (current["started_at"] is None or self.time < current["started_at"]):
            values["started_at"] = self.time
        if rank == 3 and (current["ended_at"] is None or self.time > current["ended_at"]):
            values["ended_at"] = self.time
        if run_facets:
            values["facets"], values["facets_time"] = _merge_facets(current["facets"], current["facets_time"], run_facets, self.time)
        parent = run_facets.get("parent") or {}
        if parent.get("run", {}).get("runId") and not current["parent_run_id"]:
            values["parent_run_id"] = parent["run"]["runId"]
            values["root_run_id"] = (parent.get("root") or {}).get("run", {}).get("runId") or parent["run"]["runId"]
        error = (run_facets.get("errorMessage") or {}).get("message")
        if error:
            values["error_message"] = error
        nominal = run_facets.get("nominalTime") or {}
        if nominal.get("nominalStartTime") and not current["nominal_start"]:
            values["nominal_start"], values["nominal_end"] = nominal.get("nominalStartTime"), nominal.get("nominalEndTime")
        code = (job_facets.get("sourceCode") or {}).get("sourceCode")
        if code:
            values["code_hash"] = hashlib.sha256(code.encode()).hexdigest()
        location_version = (job_facets.get("sourceCodeLocation") or {}).get("version")
        if location_version:
            values["code_version"] = location_version
        if row is None:
            conn.execute(runs_table.insert().values(**values))
        elif values:
            conn.execute(update(runs_table).where(runs_table.c.id == self.run_id).values(**values))
        self._job_version(job_id, values.get("code_hash") or current["code_hash"], values.get("code_version") or current["code_version"],
                          row is None or bool(inputs or outputs or "code_hash" in values))

    def _job_version(self, job_id: int, code_hash: str | None, code_version: str | None, changed: bool) -> None:
        """The run's job version: its inputs and outputs (all events of the run so far) and its source code."""
        if not changed:
            return
        conn = self.conn
        rd, d = run_datasets_table, datasets_table
        io = conn.execute(select(rd.c.direction, d.c.namespace, d.c.name).join(d, d.c.id == rd.c.dataset_id)
                          .where(rd.c.run_id == self.run_id)).all()
        inputs = sorted(f"{ns}:{name}" for direction, ns, name in io if direction == "input")
        outputs = sorted(f"{ns}:{name}" for direction, ns, name in io if direction == "output")
        version = _digest({"inputs": inputs, "outputs": outputs, "code": code_hash or code_version})
        jv = job_versions_table
        version_id = conn.execute(select(jv.c.id).where(jv.c.job_id == job_id, jv.c.version == version)).scalar()
        if version_id is None:
            version_id = conn.execute(jv.insert().values(
                job_id=job_id, version=version, inputs=json.dumps(inputs), outputs=json.dumps(outputs),
                code_hash=code_hash, code_version=code_version, created_at=self.time)).inserted_primary_key[0]
        previous = conn.execute(select(runs_table.c.job_version_id).where(runs_table.c.id == self.run_id)).scalar()
        if previous != version_id:
            conn.execute(update(runs_table).where(runs_table.c.id == self.run_id).values(job_version_id=version_id))
            if previous is not None and conn.execute(select(runs_table.c.id).where(runs_table.c.job_version_id == previous).limit(1)).first() is None:
                conn.execute(jv.delete().where(jv.c.id == previous))  # a version only a partial event of this run had
        latest = conn.execute(select(jobs_table.c.latest_run_id).where(jobs_table.c.id == job_id)).scalar()
        mine = conn.execute(select(runs_table.c.started_at, runs_table.c.state_time).where(runs_table.c.id == self.run_id)).first()
        my_time = mine.started_at or mine.state_time or self.time
        if latest and latest != self.run_id:
            theirs = conn.execute(select(runs_table.c.started_at, runs_table.c.state_time).where(runs_table.c.id == latest)).first()
            if theirs is not None and (theirs.started_at or theirs.state_time or "") > my_time:
                return
        conn.execute(update(jobs_table).where(jobs_table.c.id == job_id).values(latest_run_id=self.run_id, current_version_id=version_id))

    def _column_lineage(self, dataset: dict, dataset_id: int) -> None:
        fields = ((dataset.get("facets") or {}).get("columnLineage") or {}).get("fields") or {}
        conn, store = self.conn, self.store
        ce = column_edges_table
        for field_name, spec in fields.items():
            for input_field in (spec or {}).get("inputFields") or []:
                if not (input_field.get("namespace") and input_field.get("name") and input_field.get("field")):
                    continue
                input_node = store._node_id(conn, "dataset", input_field["namespace"], input_field["name"],
                                            dataset_label(input_field["namespace"], input_field["name"], {}))
                input_id = self._dataset_id(input_field["namespace"], input_field["name"], input_node)
                transformations = json.dumps(input_field.get("transformations") or [], sort_keys=True)
                where = (ce.c.dataset_id == dataset_id, ce.c.field == field_name, ce.c.input_dataset_id == input_id,
                         ce.c.input_field == input_field["field"])
                existing = conn.execute(select(ce.c.transformations).where(*where)).first()
                if existing is None:
                    conn.execute(ce.insert().values(dataset_id=dataset_id, field=field_name, input_dataset_id=input_id,
                                                    input_field=input_field["field"], transformations=transformations))
                elif existing.transformations != transformations:
                    conn.execute(update(ce).where(*where).values(transformations=transformations))

    def _dataset_id(self, namespace: str, name: str, node_id: int) -> int:
        conn = self.conn
        dataset_id = conn.execute(select(datasets_table.c.id).where(datasets_table.c.namespace == namespace,
                                                                     datasets_table.c.name == name)).scalar()
        if dataset_id is None:
            dataset_id = conn.execute(datasets_table.insert().values(node_id=node_id, namespace=namespace, name=name,
                                                                     created_at=self.time, updated_at=self.time,
                                                                     facets="{}")).inserted_primary_key[0]
        return dataset_id


def iter_events(store: LineageStore, run_id: str | None = None) -> Iterator[dict]:
    """The raw events kept, in event-time order (all of them, or one run's)."""
    query = select(events_table.c.payload).order_by(events_table.c.event_time, events_table.c.id)
    if run_id:
        query = query.where(events_table.c.run_id == run_id)
    with store.engine.connect() as conn:
        for (payload,) in conn.execute(query):
            yield json.loads(payload)
