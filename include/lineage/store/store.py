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

import json
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from sqlalchemy import (
    Table,
    create_engine,
    event,
    func,
    select,
)
from sqlalchemy.engine import Connection, Engine

from include.core import settings
from include.lineage.errors import LineageError
from include.lineage.events import SourcedEvent, check_event, dataset_key, job_key, read_event_file
from include.lineage.store import migrate
from include.lineage.store.ingest import (
    _SELECT_ALIASES,
    _SELECT_EDGE,
    _SELECT_NODE,
    IngestResult,
    _dialect_statements,
    _Ingest,
)
from include.lineage.store.schema import aliases_table, closure_table, edges_table, events_table, nodes_table


def default_store_url(paths: settings.Paths | None = None) -> str:
    """``$LINEAGE_STORE_URL`` (any SQLAlchemy URL, e.g. ``postgresql+psycopg2://user:pw@host/lineage``), else SQLite
    at ``var/lineage/store.db``."""
    if settings.LINEAGE_STORE_URL.raw():
        return settings.LINEAGE_STORE_URL.raw()
    paths = paths or settings.Paths.current()
    return f"sqlite:///{paths.lineage / 'store.db'}"


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
        try:
            migrate.open_at_head(self.engine)  # the tables at the code's revision: one query when they already are
        except BaseException:
            self.engine.dispose()
            raise
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


def iter_events(store: LineageStore, run_id: str | None = None) -> Iterator[dict]:
    """The raw events kept, in event-time order (all of them, or one run's)."""
    query = select(events_table.c.payload).order_by(events_table.c.event_time, events_table.c.id)
    if run_id:
        query = query.where(events_table.c.run_id == run_id)
    with store.engine.connect() as conn:
        for (payload,) in conn.execute(query):
            yield json.loads(payload)
