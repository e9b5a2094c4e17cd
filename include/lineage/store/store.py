"""The lineage store: OpenLineage events kept and indexed in SQL (SQLite under ``var/lineage/`` or PostgreSQL by URL).

What ingesting an event keeps (the rules: ``ingest.py``):

- the raw event, once: the very same event again (same canonical JSON) is recognised and skipped; different events
  of one run, even with the same type and time, are all kept and merged into the run;
- the run, its state robust to order (a COMPLETE that arrives before its START still leaves the run COMPLETED),
  its parent and root run (DAG run -> task run -> Spark application -> Spark job), nominal times, error, facets;
- the job and its versions (a new version when the run's inputs, outputs or source code differ);
- datasets, their aliases (the Iceberg table name of a ``symlinks`` facet) and versions (the ``version`` facet: the
  Iceberg snapshot id), with the schema of each version;
- run -> dataset (version) edges for inputs and outputs;
- column-level edges from ``columnLineage`` facets;
- the job/dataset graph of each job's current version (input dataset -> job -> output dataset of its latest run)
  and its closure table ``(ancestor, descendant, depth)``, maintained incrementally: a new edge a -> b adds every
  (ancestor of a, descendant of b) pair; an edge that leaves (the job's latest run no longer has it) has the pairs
  that may have used it recomputed over the remaining edges. Every ancestor or descendant of a node comes from one
  indexed query; ``depth`` is the shortest distance in edges. Every edge ever seen is in ``lineage_edge_history``;
- each node's closure rows packed into one row of ``lineage_ancestry`` (``ancestry.py``), rebuilt in the transaction
  that changes them: the upstream read.

Nodes are ``(kind, namespace, name)``; ``key`` (Marquez's ``dataset:<namespace>:<name>``) is for display and may be
shared by two datasets.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Table, bindparam, create_engine, event, func, select, text, update
from sqlalchemy.engine import Connection, Engine

from include.core import settings
from include.core.collector import cyclic_gc_paused
from include.core.jsontext import loads
from include.lineage.errors import InvalidEventError, LineageError, UnreadableEventFileError
from include.lineage.events import SourcedEvent, check_event, dataset_key, job_key, read_event_file
from include.lineage.store import ancestry, migrate, prepared
from include.lineage.store.batch_reads import CHUNK, in_chunks, read_datasets, rows_of_pairs
from include.lineage.store.bulk import execute_many
from include.lineage.store.ingest import EventIngest, FacetRow
from include.lineage.store.ingest_result import IngestResult
from include.lineage.store.packing import PayloadPacker
from include.lineage.store.pending import REFUSED_VALUE_ERRORS, DeferredWriteRefusedError, PendingWrites
from include.lineage.store.schema import (
    aliases_table,
    closure_table,
    edges_table,
    events_table,
    job_versions_table,
    jobs_table,
    nodes_table,
)
from include.lineage.store.statements import (
    SELECT_ALIASES,
    SELECT_JOB_EDGES,
    SELECT_JOB_LATEST,
    SELECT_NODE,
    UPDATE_JOB_FACETS,
    dialect_statements,
)

INGEST_BATCH_SIZE = 500  # events of one transaction
# PostgreSQL advisory lock of the store's writers (8 bytes fit its bigint key); migrate.py's key is another.
WRITER_LOCK_KEY = int.from_bytes(b"lineagew", "big")


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
        options = {"executemany_mode": "values_plus_batch"} if self.url.startswith("postgresql+psycopg2") else {}
        self.engine: Engine = create_engine(self.url, echo=echo, **options)
        self.dialect = self.engine.dialect.name
        if self.dialect == "sqlite":
            _sqlite_pragmas(self.engine)
        elif self.dialect == "postgresql":
            _postgres_session(self.engine)
        else:
            raise LineageError(f"lineage store {self.url!r}: only SQLite and PostgreSQL are supported")
        try:
            migrate.open_at_head(self.engine)  # the tables at the code's revision: one query when they already are
        except BaseException:
            self.engine.dispose()
            raise
        self.statements = dialect_statements(self.dialect)
        self.packer = PayloadPacker(self.engine)
        self._lock = threading.Lock()
        self._ids: dict[tuple, int] = {}  # ids of rows that never change once written: nodes, jobs, datasets, versions
        self._aliases: dict[int, set[str]] = {}
        self._history: dict[tuple[int, int], tuple[str, str]] = {}  # edge -> a range its history row contains
        # What may change under another writer, kept for one transaction: a job's latest run, a job's graph edges.
        self._job_latest: dict[int, tuple[str | None, str | None, int | None]] = {}
        self._graph: dict[int, set[tuple[int, int]]] = {}
        self._stale_ancestry: set[int] = set()  # nodes whose closure rows changed in this transaction
        self._stale_below: set[int] = set()  # ... and the descendants of these
        # What one transaction writes once, at its end (ingest.py): jobs' and datasets' merged facets, edges' seen
        # times; and (pending.py) runs, run -> dataset links, jobs' latest runs, current versions, column edges.
        self._facet_rows: dict[tuple, FacetRow] = {}
        self._absent_rows: set[tuple] = set()  # keys of ``_ids`` read and not found: inserted without asking again
        self._seen_edges: dict[tuple[int, int], tuple[str, str]] = {}
        self.pending = PendingWrites(self.statements)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> LineageStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---------------------------------------------------------------- ingest
    def ingest(
        self, lineage_events: Iterable[dict | SourcedEvent], batch_size: int = INGEST_BATCH_SIZE
    ) -> IngestResult:
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

    def ingest_posts(self, posts: list[list[SourcedEvent]]) -> list[IngestResult]:
        """Several posts' events in one transaction (``lineage serve``'s group commit): each post's IngestResult, in
        order. All or nothing, however many events: an event the store refuses raises InvalidEventError naming it
        and none of any post is stored (the caller stores each post alone to tell whose it was)."""
        batch = [item for post in posts for item in post]
        # stored in time order: posts that came at once from several clients interleave their runs' events, and an
        # event earlier than its run's first makes the transaction write its runs and look the job's latest up again
        # (``EventIngest._latest_run``); what is stored does not depend on the order
        order = sorted(range(len(batch)), key=lambda index: str(batch[index].event.get("eventTime")))
        is_new_in_order: list[bool] = []
        self._ingest_batch([batch[index] for index in order], is_new_in_order)
        is_new = [False] * len(batch)
        for index, new in zip(order, is_new_in_order, strict=True):
            is_new[index] = new
        results, start = [], 0
        for post in posts:
            results.append(IngestResult(read=len(post), new=sum(is_new[start : start + len(post)])))
            start += len(post)
        return results

    def ingest_files(self, files: Iterable[Path | str]) -> IngestResult:
        """Ingest event files, each all or nothing: a file is read and checked whole, then stored in one transaction;
        if one of its events is bad (unreadable, not an event, or refused by the store) none of its events is stored.

        A bad file does not stop the others: the call goes on with the next file, and at the end raises the first bad
        file's error (``UnreadableEventFileError`` or ``InvalidEventError``, naming the file and the line of its
        first bad event), with ``error.ingested`` the IngestResult of the files stored and ``error.errors`` every bad
        file's error, in order. Any other error (the store unreachable) stops the call at once."""
        result = IngestResult()
        errors: list[LineageError] = []
        for file in files:
            try:
                with cyclic_gc_paused():  # reading a file makes as many objects as storing it
                    result += self._ingest_batch(read_event_file(file))
            except (UnreadableEventFileError, InvalidEventError) as error:
                errors.append(error)
        if errors:
            first = errors[0]
            first.ingested, first.errors = result, errors  # type: ignore[attr-defined]
            raise first
        return result

    def _ingest_batch(self, batch: list[SourcedEvent], is_new: list[bool] | None = None) -> IngestResult:
        # the collector paused: a batch makes a burst of short-lived objects (27 % of an ingest's CPU went to
        # collections with it on; include/core/collector.py)
        with cyclic_gc_paused():
            try:
                return self._ingest_transaction(batch, bulk=True, is_new=is_new)
            except DeferredWriteRefusedError:
                # a value the database cannot take in a row written for several events at once: the batch again,
                # each event's rows written with it, so that the error names the event
                if is_new is not None:
                    is_new.clear()
                return self._ingest_transaction(batch, bulk=False, is_new=is_new)

    def _ingest_transaction(
        self, batch: list[SourcedEvent], bulk: bool, is_new: list[bool] | None = None
    ) -> IngestResult:
        """The batch in one transaction. ``bulk``: its events kept by one multi-row insert before they are read
        (``_keep_events``); else each by its own. ``is_new``: given, whether each event was new is appended to it."""
        result = IngestResult(read=len(batch))
        with self._lock:
            self._job_latest.clear()  # what another writer may change between transactions is read again
            self._graph.clear()
            try:
                with self.engine.begin() as conn:
                    self.serialize_writers(conn)
                    ingests, rows = [], []
                    deferred = (DeferredWriteRefusedError,) if bulk else ()  # ... raised as it is, not as this event's
                    for item in batch:
                        with _named(item):
                            if not item.checked:
                                check_event(item.event)
                            ingests.append(
                                EventIngest(self, conn, item.event, item.source, item.received, item.problems)
                            )
                            rows.append(ingests[-1].raw_row() if bulk else None)
                    event_ids = self._keep_events(conn, rows) if bulk else None
                    if bulk:  # else each event reads its own, so that a value the database refuses names its event
                        self._read_batch(conn, ingests)
                    for index, (item, ingest) in enumerate(zip(batch, ingests, strict=True)):
                        with _named(item, passing=deferred):
                            if event_ids is not None:
                                new = ingest.run_stored(event_ids[index])
                            else:  # each event's rows written with it, so that a refused value names its event
                                new = ingest.run()
                                self.pending.flush(conn)
                        if is_new is not None:
                            is_new.append(new)
                        if new:
                            result.new += 1
                            result.note(ingest)
                    self.pending.flush(conn)
                    self._flush(conn)
                    self._repack_ancestry(conn)
            except BaseException:
                self.forget_row_ids()  # of rolled-back rows
                raise
            finally:
                self._job_latest.clear()
                self._graph.clear()
                self._facet_rows.clear()
                self._absent_rows.clear()
                self._seen_edges.clear()
                self.pending.clear()
                self._stale_ancestry.clear()
                self._stale_below.clear()
        self.packer.after_ingest()
        return result

    def _keep_events(self, conn: Connection, rows: list[dict]) -> list[int | None]:
        """The batch's raw events in one multi-row insert; each one's id, in order, or None for the very same event
        stored before (or earlier in the batch)."""
        if not rows:
            return []
        try:
            kept = execute_many(conn, self.statements["insert_events"], rows)
        except REFUSED_VALUE_ERRORS as error:
            raise DeferredWriteRefusedError(str(error)) from error
        ids = {dedup_key: event_id for event_id, dedup_key in kept}
        return [ids.pop(row["dedup_key"], None) for row in rows]

    def _read_batch(self, conn: Connection, ingests: list[EventIngest]) -> None:
        """What the batch's events read of the store, read at once before the first is ingested: their runs, jobs and
        datasets. A value the database refuses in these reads (a NUL in a name, on PostgreSQL) is no one event's yet:
        the batch is taken again event by event (``DeferredWriteRefusedError``), where the error names its event
        (Trap 56)."""
        try:
            self.pending.read_runs(conn, {i.run_id for i in ingests if isinstance(i.run_id, str)})
            self._read_jobs(
                conn,
                {(i.event["job"]["namespace"], i.event["job"]["name"]) for i in ingests if i.event.get("job")},
            )
            read_datasets(self, conn, [i.event for i in ingests])
        except REFUSED_VALUE_ERRORS as error:
            raise DeferredWriteRefusedError(str(error)) from error

    def _read_jobs(self, conn: Connection, names: set[tuple[str, str]]) -> None:
        """What the transaction reads of the batch's jobs, read at once: each job's row (its facets, its latest run)
        and its edges in the graph, a query per 500 jobs instead of three per job (``_job_edges``, ``job_latest``,
        ``ingest.EventIngest._upsert_with_facets``: each still reads what is not read here)."""
        j, e, v = jobs_table.c, edges_table.c, job_versions_table.c
        wanted = sorted(key for key in names if (jobs_table.name, *key) not in self._facet_rows)
        nodes: list[int] = []
        query = select(
            j.id,
            j.node_id,
            j.namespace,
            j.name,
            j.facets,
            j.facet_times,
            j.updated_at,
            j.latest_run_id,
            j.latest_run_time,
            j.current_version_id,
            v.version.label("current_version"),
        ).outerjoin(job_versions_table, v.id == j.current_version_id)
        for key, row in rows_of_pairs(conn, query, j.namespace, j.name, wanted):
            if row.current_version is not None:
                # the version a job's next run most likely has: found here, not asked once per run
                # (``EventIngest._job_version``: 3,599 reads of 8,000 events into a new process)
                self._ids[("job_version", row.id, row.current_version)] = row.current_version_id
            self._facet_rows[(jobs_table.name, *key)] = FacetRow(
                row.id, UPDATE_JOB_FACETS, row.facets, row.facet_times, row.updated_at
            )
            self._job_latest.setdefault(row.id, (row.latest_run_id, row.latest_run_time, row.current_version_id))
            self._ids[("job", *key)] = row.id
            self._ids[("node", "job", *key)] = row.node_id
            if row.node_id not in self._graph:
                self._graph[row.node_id] = set()
                nodes.append(row.node_id)
        for end in (e.source, e.target):
            for source, target in in_chunks(conn, select(e.source, e.target), end, nodes):
                for node in (source, target):
                    if node in self._graph:
                        self._graph[node].add((source, target))

    def forget_row_ids(self) -> None:
        """Forget the ids kept of rows that may be gone (a rolled-back transaction's, a prune's): never reused."""
        for kept in (self._ids, self._aliases, self._history):
            kept.clear()

    def serialize_writers(self, conn: Connection) -> None:
        """One writing transaction at a time across processes (two `lineage serve`, a `lineage consume`): each
        keeps the closure from the graph it reads, so two at once could each miss the other's edge, and they take row
        locks in different orders (PostgreSQL found deadlocks). SQLite already has one writer; PostgreSQL takes a
        transaction-scoped advisory lock, freed at commit or rollback."""
        if self.dialect == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": WRITER_LOCK_KEY})

    # ---------------------------------------------------------------- graph
    def _node_id(self, conn: Connection, kind: str, namespace: str, name: str, label: str) -> int:
        """The node of (kind, namespace, name), made on first sight with its aliases and its closure row."""
        cached = self._ids.get(("node", kind, namespace, name))
        if cached is not None:
            return cached
        node_id = conn.execute(SELECT_NODE, {"p_kind": kind, "p_ns": namespace, "p_name": name}).scalar()
        if node_id is None:
            key = dataset_key(namespace, name) if kind == "dataset" else job_key(namespace, name)
            node_id = conn.execute(
                nodes_table.insert(), {"key": key, "kind": kind, "namespace": namespace, "name": name, "label": label}
            ).inserted_primary_key[0]
            conn.execute(closure_table.insert(), {"ancestor": node_id, "descendant": node_id, "depth": 0})
            self._stale_ancestry.add(node_id)
            aliases = {key, f"{namespace}:{name}"} | ({name} if kind == "job" else set())
            conn.execute(aliases_table.insert(), [{"alias": alias, "node_id": node_id} for alias in sorted(aliases)])
            self._aliases[node_id] = aliases
        self._ids[("node", kind, namespace, name)] = node_id
        return node_id

    def add_aliases(self, conn: Connection, node_id: int, aliases: set[str]) -> bool:
        """Record more names of a node; True if any was new. A name may name several nodes (two datasets whose
        ``symlinks`` claim one table): it is added to each, never moved, and looking it up finds them all."""
        known = self._aliases.get(node_id)
        if known is None:
            known = self._aliases[node_id] = set(conn.execute(SELECT_ALIASES, {"p_node": node_id}).scalars())
        missing = aliases - known
        if missing:
            conn.execute(aliases_table.insert(), [{"alias": alias, "node_id": node_id} for alias in sorted(missing)])
            known |= missing
        return bool(missing)

    def record_edges(self, conn: Connection, edges: list[tuple[int, int]], time: str) -> None:
        """``lineage_edge_history``: each edge seen at ``time``, its first and last seen times widened to it."""
        for edge in dict.fromkeys(edges):
            seen = self._history.get(edge)  # a range the table's is known to contain
            if seen is not None and seen[0] <= time <= seen[1]:
                continue
            self._history[edge] = (min(seen[0], time), max(seen[1], time)) if seen else (time, time)
            pending = self._seen_edges.get(edge)  # written once, widened, at the transaction's end (_flush)
            self._seen_edges[edge] = (min(pending[0], time), max(pending[1], time)) if pending else (time, time)

    def _flush(self, conn: Connection) -> None:
        """What the transaction's events merged in memory, written once: jobs' and datasets' facets, edges' seen
        times (include/lineage/store/ingest.py ``FacetRow``, ``record_edges``)."""
        updates: dict = {}
        for row in self._facet_rows.values():
            values = row.update()
            if values is not None:
                updates.setdefault(row.statement, []).append(values)
        for statement, rows in updates.items():
            execute_many(conn, statement, rows)
        if self._seen_edges:
            execute_many(
                conn,
                self.statements["upsert_edge_history"],
                [
                    {"source": source, "target": target, "first_seen": first, "last_seen": last}
                    for (source, target), (first, last) in self._seen_edges.items()
                ],
            )

    def job_latest(self, conn: Connection, job_id: int) -> tuple[str | None, str | None, int | None]:
        """(latest run id, its time, current version id) of a job, read once per transaction."""
        known = self._job_latest.get(job_id)
        if known is None:
            row = conn.execute(SELECT_JOB_LATEST, {"p_id": job_id}).one()
            known = self._job_latest[job_id] = (row.latest_run_id, row.latest_run_time, row.current_version_id)
        return known

    def job_latest_known(self, job_id: int, latest: tuple[str | None, str | None, int | None]) -> None:
        self._job_latest[job_id] = latest

    def _job_edges(self, conn: Connection, job_node: int) -> set[tuple[int, int]]:
        """The job's edges in the graph (its inputs' and outputs'), read once per transaction."""
        edges = self._graph.get(job_node)
        if edges is None:
            edges = self._graph[job_node] = {tuple(row) for row in conn.execute(SELECT_JOB_EDGES, {"p_node": job_node})}
        return edges

    def add_job_edges(self, conn: Connection, job_node: int, edges: list[tuple[int, int]]) -> None:
        """Add a job's edges that the graph lacks, extending the closure."""
        current = self._job_edges(conn, job_node)
        for edge in edges:
            if edge not in current:
                self._add_edge(conn, *edge)
                current.add(edge)

    def set_job_edges(self, conn: Connection, job_node: int, edges: Iterable[tuple[int, int]]) -> None:
        """Make a job's edges in the graph exactly ``edges``: the others leave (the closure repaired), new ones come
        (in the order given)."""
        wanted = list(dict.fromkeys(edges))
        current = self._job_edges(conn, job_node)
        removed = current - set(wanted)
        if removed:
            self._remove_edges(conn, removed)
            current -= removed
        self.add_job_edges(conn, job_node, wanted)

    def _add_edge(self, conn: Connection, source: int, target: int) -> None:
        conn.execute(edges_table.insert(), {"source": source, "target": target})
        conn.execute(self.statements["extend_closure"], {"p_source": source, "p_target": target})
        # every new pair ends at a descendant of the target (itself included): only their ancestors changed. They are
        # read once, at the transaction's end: a path to one of them that an edge removal cut in between marked it
        # then (the removal's descendants), so the target's descendants at the end plus those cover every change.
        self._stale_below.add(target)

    def _remove_edges(self, conn: Connection, removed: set[tuple[int, int]]) -> None:
        """Delete edges and repair the closure exactly.

        Only a pair (x, y) with x an ancestor of a removed edge's source and y a descendant of its target can lose a
        path (every path that used the edge runs x .. source -> target .. y); removing edges never shortens one. The
        remaining edges among the nodes on some old path from such an x to such a y are read at once; a
        breadth-first walk from each x over them gives its new distances: a pair no longer reached is deleted, a
        longer shortest distance updated; every other pair keeps its row. Pairs of a node with itself stay at 0."""
        conn.execute(
            edges_table.delete().where(edges_table.c.source == _p("p_source"), edges_table.c.target == _p("p_target")),
            [{"p_source": source, "p_target": target} for source, target in sorted(removed)],
        )
        c, e = closure_table.c, edges_table.c
        sources, targets = {source for source, _ in removed}, {target for _, target in removed}
        ancestors = {row[0] for row in in_chunks(conn, select(c.ancestor), c.descendant, sources)}
        descendants = {row[0] for row in in_chunks(conn, select(c.descendant), c.ancestor, targets)}
        old: dict[int, dict[int, int]] = {ancestor: {} for ancestor in ancestors}  # the pairs that may change
        reached: set[int] = set()  # every node an ancestor reached
        for ancestor, descendant, depth in in_chunks(
            conn, select(c.ancestor, c.descendant, c.depth), c.ancestor, ancestors
        ):
            reached.add(descendant)
            if descendant in descendants and descendant != ancestor:
                old[ancestor][descendant] = depth
        self._stale_ancestry.update(descendants)  # the only nodes whose ancestors may change
        leading = {row[0] for row in in_chunks(conn, select(c.ancestor), c.descendant, descendants)}
        region = reached & leading  # on some old path from an ancestor to a descendant: no other node matters
        successors: dict[int, list[int]] = {}
        for source, target in in_chunks(conn, select(e.source, e.target), e.source, region):
            if target in region:
                successors.setdefault(source, []).append(target)
        deletes, updates = [], []
        for ancestor in sorted(ancestors):
            pairs = old[ancestor]
            distance, frontier, wanted = {ancestor: 0}, [ancestor], len(pairs)
            while frontier and wanted:
                following = []
                for node in frontier:
                    for target in successors.get(node, ()):
                        if target not in distance:
                            distance[target] = distance[node] + 1
                            following.append(target)
                            wanted -= target in pairs
                frontier = following
            for descendant, depth in pairs.items():
                new = distance.get(descendant)
                if new is None:
                    deletes.append({"p_ancestor": ancestor, "p_descendant": descendant})
                elif new != depth:
                    updates.append({"p_ancestor": ancestor, "p_descendant": descendant, "p_depth": new})
        where = (c.ancestor == _p("p_ancestor"), c.descendant == _p("p_descendant"))
        if deletes:
            conn.execute(closure_table.delete().where(*where), deletes)
        if updates:
            conn.execute(update(closure_table).where(*where).values(depth=_p("p_depth")), updates)

    def _repack_ancestry(self, conn: Connection) -> None:
        """Rebuild ``lineage_ancestry`` for the nodes whose closure rows changed in this transaction, from those rows
        (include/lineage/store/ancestry.py): the packed copy commits with the rows it was made from, or not at all."""
        c = closure_table.c
        below = in_chunks(conn, select(c.descendant), c.ancestor, self._stale_below)
        stale = sorted(self._stale_ancestry.union(row[0] for row in below))
        self._stale_ancestry.clear()
        self._stale_below.clear()
        for start in range(0, len(stale), CHUNK):
            pairs: dict[int, list[tuple[int, int]]] = {node: [] for node in stale[start : start + CHUNK]}
            query = select(c.descendant, c.ancestor, c.depth).where(c.descendant.in_(list(pairs)))
            for descendant, ancestor, depth in conn.execute(query):
                pairs[descendant].append((ancestor, depth))
            conn.execute(
                self.statements["upsert_ancestry"],
                [{"descendant": node, "packed": ancestry.pack(rows)} for node, rows in pairs.items() if rows],
            )

    # ---------------------------------------------------------------- small helpers for callers
    def count(self, table: Table) -> int:
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(table)).scalar_one()


def _p(name: str):
    return bindparam(name)


def _where(item: SourcedEvent, reason: str) -> str:
    return f"{item.source}: {reason}" if item.source else reason


# A value of a type the database cannot take (a list bound as text: ProgrammingError; an integer past 64 bits:
# OverflowError; a NUL in PostgreSQL's text: ValueError), or of a shape the store cannot read, wherever check_event
# does not look
_REFUSED_VALUES = (*REFUSED_VALUE_ERRORS, AttributeError, KeyError, DeferredWriteRefusedError)


@contextmanager
def _named(item: SourcedEvent, passing: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """An error of one event, raised as InvalidEventError naming where it came from; ``passing``: errors raised as
    they are."""
    try:
        yield
    except passing:
        raise
    except InvalidEventError as error:
        raise InvalidEventError(_where(item, str(error))) from error
    except _REFUSED_VALUES as error:
        cause = error.__cause__ if isinstance(error, DeferredWriteRefusedError) else error
        raise InvalidEventError(
            _where(item, f"the store cannot keep this event ({type(cause).__name__}: {cause})")
        ) from error


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        # A transaction that writes takes the write lock at its first write (BEGIN IMMEDIATE): two writers (the CLI and
        # the endpoint) then wait for each other instead of failing to upgrade a read lock. Readers never wait (WAL).
        dbapi_connection.isolation_level = "IMMEDIATE"
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout=30000")  # first: setting the journal mode may wait for a lock too
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # Reads through a memory map of the file (the OS's page cache, shared by connections), not SQLite's 2 MiB
        # page cache per connection: the nodes of a 2,220-node answer cost 8 ms with the cache, 3 ms mapped.
        cursor.execute("PRAGMA mmap_size=1073741824")
        cursor.close()


def _postgres_session(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        # No JIT compilation: the planner over-estimates a recursive walk (run provenance, the as-of walk) by orders of
        # magnitude, and past jit_above_cost it compiled ~150 functions per question: 808 ms of an 849 ms run
        # provenance at 3x10^4 events (EXPLAIN ANALYZE), for a query that then ran in 40 ms. The store's questions are
        # short index walks; JIT pays off only for long scans.
        cursor = dbapi_connection.cursor()
        # set_config only where the setting exists: PostgreSQL 10 and older have no JIT and refuse `SET jit`
        cursor.execute("SELECT set_config('jit', 'off', false) WHERE current_setting('jit', true) IS NOT NULL")
        cursor.close()
        dbapi_connection.commit()  # the SET outside any transaction the pool's first user begins

    prepared.enable(engine)  # the questions a connection asks again, planned once there


def iter_events(store: LineageStore, run_id: str | None = None) -> Iterator[dict]:
    """The raw events kept, in event-time order (all of them, or one run's)."""
    e = events_table.c
    query = select(e.id, e.payload, e.packed).order_by(e.event_time, e.id)
    if run_id:
        query = query.where(e.run_id == run_id)
    with store.engine.connect() as conn:
        for row in conn.execute(query):
            yield loads(store.packer.text(conn, *row))
