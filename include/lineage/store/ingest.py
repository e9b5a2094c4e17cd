"""Ingesting one OpenLineage event into the store's tables: runs, jobs and versions, datasets and versions, edges,
columns and the closure, all in the caller's transaction; the statements are built once per dialect.

The rules; what they give does not depend on the order events arrive in, but for facets of equal event time:

- an event is kept unless the very same event (same canonical JSON, ``events.event_dedup_key``) is already stored;
- a run is the union of its events: its inputs and outputs are those of all its events, its job version is computed
  from that union;
- facets of runs, jobs and datasets merge per facet name, as Marquez's ``run_facets``/``job_facets``/
  ``dataset_facets`` read back (``JSON_AGG(facet ORDER BY lineage_event_time)`` merged in order by
  ``MapperUtils.toFacetsOrNull``): the facet of the latest event time wins; on a tie, the later-ingested event
  (greater ``lineage_events.id``). A facet is replaced whole, never deep-merged. ``facet_times`` keeps, per name,
  the (event time, event id) it came from;
- a run's time is its earliest event time (``first_event_time``); a job's latest run is the one of the greatest
  (first_event_time, run id), and its current version is that run's version. A late event of an older run changes
  that run (its state, its version) but never which version is current;
- the graph (``lineage_edges``) holds, per job, the inputs and outputs of its latest run: when that changes, edges
  the new one lacks leave the graph and the closure is repaired (``store.LineageStore.set_job_edges``). A job
  without runs (only runless job events) has those of its latest job events (all of those at the latest time).
  Every edge ever seen stays in ``lineage_edge_history`` with the event times it was first and last seen at.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Protocol

from sqlalchemy.engine import Connection

from include.lineage.events import (
    canonical_json,
    dataset_aliases,
    dataset_label,
    dedup_key_of,
    digest,
    event_dedup_key,
    utc_time,
)
from include.lineage.store.marquez_view import marquez_column
from include.lineage.store.pending import MergedFacets, PendingWrites
from include.lineage.store.problems import problem_rows
from include.lineage.store.schema import (
    dataset_versions_table,
    datasets_table,
    facet_problems_table,
    job_versions_table,
    jobs_table,
)
from include.lineage.store.statements import (
    DELETE_JOB_VERSION,
    RUN_USING_VERSION,
    SELECT_DATASET,
    SELECT_JOB,
    SELECT_JOB_VERSION,
    SELECT_LATEST_RUN,
    SELECT_RUN_NODES,
    SELECT_VERSION,
    UPDATE_DATASET_FACETS,
    UPDATE_FIRST_VERSION,
    UPDATE_JOB_FACETS,
    UPDATE_NODE_LABEL,
    UPDATE_VERSION,
)


class StoreWriter(Protocol):
    """What ingesting an event needs of the store (``store.LineageStore``), named here so this module does not
    import the store that calls it."""

    statements: dict
    _ids: dict
    _facet_rows: dict  # per transaction: what the store writes once at its end or only once
    _absent_rows: set  # per transaction: keys of ``_ids`` looked up and not stored
    _aliases: dict  # node id -> its names, as read or written by this process
    pending: PendingWrites  # ... runs, run -> dataset links, jobs' latest runs, current versions, column edges

    def _node_id(self, conn: Connection, kind: str, namespace: str, name: str, label: str) -> int: ...

    def add_aliases(self, conn: Connection, node_id: int, aliases: set[str]) -> bool: ...

    def record_edges(self, conn: Connection, edges: list[tuple[int, int]], time: str) -> None: ...

    def job_latest(self, conn: Connection, job_id: int) -> tuple[str | None, str | None, int | None]: ...

    def job_latest_known(self, job_id: int, latest: tuple[str | None, str | None, int | None]) -> None: ...

    def add_job_edges(self, conn: Connection, job_node: int, edges: list[tuple[int, int]]) -> None: ...

    def set_job_edges(self, conn: Connection, job_node: int, edges: Iterable[tuple[int, int]]) -> None: ...


# OpenLineage event type -> (run state as Marquez names it, rank). A state is replaced only by one of higher rank, or
# of equal rank and a later event time: a COMPLETE that arrives before its START is never undone by the START.
RUN_STATES = {
    "START": ("RUNNING", 1),
    "RUNNING": ("RUNNING", 2),
    "COMPLETE": ("COMPLETED", 3),
    "FAIL": ("FAILED", 3),
    "ABORT": ("ABORTED", 3),
}


# A run not stored yet, as ``EventIngest._run_changes`` reads a stored one.
NEW_RUN = {
    "state_rank": 0,
    "state_time": None,
    "started_at": None,
    "ended_at": None,
    "facets": None,
    "facets_time": None,
    "facet_times": None,
    "first_event_time": None,
    "parent_run_id": None,
    "nominal_start": None,
    "code_hash": None,
    "code_version": None,
    "job_version_id": None,
}


class FacetRow:
    """A job's or dataset's facets as one transaction merges them: read once, merged in memory event by event by the
    rule of ``pending.MergedFacets`` (the facet of the greatest (event time, event id) wins; ``updated_at`` the latest time
    of an event with facets), written once at the transaction's end when anything changed (``update``)."""

    __slots__ = ("id", "statement", "facets", "facet_times", "updated_at", "objects", "changed", "dirty")

    def __init__(self, row_id: int, statement, facets: str | None, facet_times: str | None, updated_at: str | None):
        self.id, self.statement = row_id, statement
        self.facets, self.facet_times, self.updated_at = facets, facet_times, updated_at
        self.objects: MergedFacets | None = None
        self.changed = self.dirty = False

    def merge(self, new: dict, stamp: tuple[str, int], time: str) -> None:
        if self.objects is None:
            self.objects = MergedFacets(self.facets, self.facet_times)
        won = self.objects.merge(new, stamp)
        updated = max(self.updated_at or time, time)
        if won or updated != self.updated_at:
            self.dirty = True
        self.changed |= won
        self.updated_at = updated

    def update(self) -> dict | None:
        """The parameters of the row's update, or None when nothing changed."""
        if not self.dirty:
            return None
        facets, times = self.facets, self.facet_times
        if self.changed:
            facets, times = self.objects.texts()
        return {"p_id": self.id, "p_facets": facets, "p_times": times, "p_time": self.updated_at}


class EventIngest:
    """Ingest of one event inside the batch's transaction. ``lineage_event`` is what the store reads; ``received``
    the event as it came when that differs (``lineage serve`` leaves out what the spec refuses), kept beside it with
    ``problems`` (what the spec refuses, each ``{"path", "facet", "rule"}``), which are also filed by node."""

    def __init__(
        self,
        store: StoreWriter,
        conn: Connection,
        lineage_event: dict,
        source: str,
        received: dict | None = None,
        problems: tuple | list = (),
    ):
        self.store, self.conn, self.event, self.source = store, conn, lineage_event, source
        self.received = received if received is not None and received != lineage_event else None
        self.problems = list(problems)
        self.time = utc_time(lineage_event["eventTime"])
        self.run_id: str | None = (lineage_event.get("run") or {}).get("runId")
        self.stamp: tuple[str, int] = (self.time, 0)  # (event time, event id): which facet wins
        self.created_run = False  # this event made its run (none stored or pending before it)

    def run(self) -> bool:
        """Keep the event and ingest it; False when the very same event is already stored."""
        return self.run_stored(self._store_raw())

    def run_stored(self, event_id: int | None) -> bool:
        """Ingest the event, already kept as ``event_id`` (by the batch's one insert); None: the very same event was
        stored before, and nothing is done."""
        if event_id is None:
            return False
        self.stamp = (self.time, event_id)
        job = self.event.get("job")
        job_row = self._job(job) if job else None
        inputs = [self._dataset(d, "input") for d in self.event.get("inputs") or []]
        outputs = [self._dataset(d, "output") for d in self.event.get("outputs") or []]
        dataset_row = None
        if isinstance(self.event.get("dataset"), dict):  # a DatasetEvent
            dataset_row = self._dataset(self.event["dataset"], None)
        if self.problems:
            rows = problem_rows(
                self.problems, event_id, self.run_id, self.time, job_row or dataset_row, inputs, outputs
            )
            if rows:
                self.conn.execute(facet_problems_table.insert(), rows)
        if job_row is not None:
            job_id, job_node = job_row
            edges = [(dataset_node, job_node) for _, dataset_node in inputs]
            edges += [(job_node, dataset_node) for _, dataset_node in outputs]
            if edges:
                self.store.record_edges(self.conn, edges, self.time)
            if self.run_id:
                self._run(job_id, job_node, edges)
            else:
                self._runless_job(job_id, job_node, edges)
        for dataset, (dataset_id, _) in zip(self.event.get("outputs") or [], outputs, strict=True):
            self._column_lineage(dataset, dataset_id)
        return True

    def _store_raw(self) -> int | None:
        """Keep the event (as received, and what the store reads of it); its id, or None when the very same event is
        already stored."""
        return self.conn.execute(self.store.statements["insert_event"], self.raw_row()).scalar()

    def raw_row(self) -> dict:
        """The event's row of ``lineage_events``."""
        job = self.event.get("job") or {}
        payload = canonical_json(self.event)
        # the key of the event as received; when that is what the store reads, of the very text the row keeps
        dedup_key = dedup_key_of(payload) if self.received is None else event_dedup_key(self.received)
        return {
            "dedup_key": dedup_key,
            "run_id": self.run_id,
            "event_type": self.event.get("eventType"),
            "event_time": self.time,
            "job_namespace": job.get("namespace"),
            "job_name": job.get("name"),
            "source": self.source[:1024],
            "payload": "",
            "packed": self.store.packer.pack(self.conn, payload),
            "received": json.dumps(self.received, sort_keys=True) if self.received is not None else None,
            "problems": json.dumps(self.problems, sort_keys=True) if self.problems else None,
            "marquez": marquez_column(self.event),
        }

    def _job(self, job: dict) -> tuple[int, int]:
        namespace, name = job["namespace"], job["name"]
        conn, store = self.conn, self.store
        node_id = store._node_id(conn, "job", namespace, name, name)
        facets = job.get("facets") or {}
        job_id = store._ids.get(("job", namespace, name))
        if job_id is not None and not facets:
            return job_id, node_id
        job_id = self._upsert_with_facets(jobs_table, SELECT_JOB, UPDATE_JOB_FACETS, node_id, namespace, name, facets)
        store._ids[("job", namespace, name)] = job_id
        return job_id, node_id

    def _upsert_with_facets(self, table, select_row, update_facets, node_id: int, namespace: str, name: str, facets):
        """The id of the job or dataset row (``table``) named ``namespace``/``name``: inserted with the event's
        facets, or its facets merged with them (``FacetRow.merge``). The row is read once per transaction and its
        merged facets written once, at the transaction's end (``LineageStore._flush_facet_rows``)."""
        rows = self.store._facet_rows
        key = (table.name, namespace, name)
        row = rows.get(key)
        if row is None:
            found = self.conn.execute(select_row, {"p_ns": namespace, "p_name": name}).first()
            if found is None:
                first = MergedFacets(None, None)
                merged = first.texts() if first.merge(facets, self.stamp) else ("{}", None)
                values = {"node_id": node_id, "namespace": namespace, "name": name, "created_at": self.time}
                values.update(updated_at=self.time, facets=merged[0], facet_times=merged[1])
                row_id = self.conn.execute(table.insert(), values).inserted_primary_key[0]
                rows[key] = FacetRow(row_id, update_facets, merged[0], merged[1], self.time)
                return row_id
            row = rows[key] = FacetRow(found.id, update_facets, found.facets, found.facet_times, found.updated_at)
        if facets:
            row.merge(facets, self.stamp, self.time)
        return row.id

    def _dataset(self, dataset: dict, direction: str | None) -> tuple[int, int]:
        namespace, name = dataset["namespace"], dataset["name"]
        facets = dataset.get("facets") or {}
        conn, store = self.conn, self.store
        node_id = store._node_id(conn, "dataset", namespace, name, dataset_label(namespace, name, facets))
        if store.add_aliases(conn, node_id, dataset_aliases(namespace, name, facets)) and facets.get("symlinks"):
            conn.execute(UPDATE_NODE_LABEL, {"p_id": node_id, "p_label": dataset_label(namespace, name, facets)})
        dataset_id = store._ids.get(("dataset", namespace, name))
        if dataset_id is None or facets:
            dataset_id = self._upsert_with_facets(
                datasets_table, SELECT_DATASET, UPDATE_DATASET_FACETS, node_id, namespace, name, facets
            )
            store._ids[("dataset", namespace, name)] = dataset_id
        version_id = self._dataset_version(dataset_id, facets, direction)
        if direction and self.run_id:
            store.pending.link(self.run_id, dataset_id, direction, version_id, (namespace, name))
        return dataset_id, node_id

    def _version_row(
        self, cache_key: tuple, select_row, keys: dict, table, row: Callable[[], dict]
    ) -> tuple[int, bool]:
        """The id of a version row (a dataset's or a job's) and whether this event inserted it: the store's cache, else
        the row looked up by ``keys``, else ``row()`` inserted into ``table``; the id is cached under ``cache_key``."""
        version_id = self.store._ids.get(cache_key)
        if version_id is None and cache_key not in self.store._absent_rows:
            version_id = self.conn.execute(select_row, keys).scalar()
        inserted = version_id is None
        if inserted:
            version_id = self.conn.execute(table.insert(), row()).inserted_primary_key[0]
        self.store._ids[cache_key] = version_id
        return version_id, inserted

    def _dataset_version(self, dataset_id: int, facets: dict, direction: str | None) -> int | None:
        version = (facets.get("version") or {}).get("datasetVersion")
        if version is None:
            return None
        version = str(version)
        conn, store = self.conn, self.store
        fields = (facets.get("schema") or {}).get("fields") or []
        schema = json.dumps([[f.get("name"), f.get("type")] for f in fields]) if fields else None
        creator = self.run_id if direction == "output" else None
        version_id, inserted = self._version_row(
            ("version", dataset_id, version),
            SELECT_VERSION,
            {"p_dataset": dataset_id, "p_version": version},
            dataset_versions_table,
            lambda: {
                "dataset_id": dataset_id,
                "version": version,
                "schema": schema,
                "schema_producer": self.event.get("producer") if schema else None,
                "created_by_run_id": creator,
                "created_at": self.time,
            },
        )
        if not inserted and (
            (schema and ("version_schema", version_id) not in store._ids)
            or (creator and ("version_creator", version_id) not in store._ids)
        ):
            conn.execute(
                UPDATE_VERSION,
                {
                    "p_id": version_id,
                    "p_schema": schema,
                    "p_producer": self.event.get("producer") if schema else None,
                    "p_run": creator,
                },
            )
        if schema:
            store._ids[("version_schema", version_id)] = 1
        if creator:
            store._ids[("version_creator", version_id)] = 1
        if direction == "output":
            store.pending.set_current_version(dataset_id, self.time, version_id)
            store._ids[("has_version", dataset_id)] = 1
        elif ("has_version", dataset_id) not in store._ids:
            conn.execute(UPDATE_FIRST_VERSION, {"p_id": dataset_id, "p_version": version_id})
            store._ids[("has_version", dataset_id)] = 1
        return version_id

    def _run(self, job_id: int, job_node: int, edges: list[tuple[int, int]]) -> None:
        pending = self.store.pending
        row = pending.run(self.conn, self.run_id)
        current = NEW_RUN if row is None else dict(row)
        values: dict = {} if row is not None else {"id": self.run_id, "job_id": job_id, "state": "NEW", "state_rank": 0}
        values.update(self._run_changes(current))
        if row is None:
            self.created_run = True
            pending.add_run(values)
        elif values:
            pending.change_run(self.run_id, values)
        version_id = current["job_version_id"]
        if row is None or edges or "code_hash" in values or "code_version" in values:
            version_id = self._job_version(
                job_id,
                values.get("code_hash") or current["code_hash"],
                values.get("code_version") or current["code_version"],
                current["job_version_id"],
            )
        self._latest_run(
            job_id,
            job_node,
            edges,
            is_new=row is None,
            run_time=values.get("first_event_time") or current["first_event_time"],
            earlier=row is not None and "first_event_time" in values,
            version_id=version_id,
        )

    def _run_changes(self, current) -> dict:
        """What this event changes of its run's row (``current``: as stored, or ``NEW_RUN``): its first event time,
        state, start and end, facets, parent, error, nominal time and code."""
        run_facets = (self.event.get("run") or {}).get("facets") or {}
        job_facets = (self.event.get("job") or {}).get("facets") or {}
        state, rank = RUN_STATES.get(self.event.get("eventType") or "", (None, 0))
        values: dict = {}
        if current["first_event_time"] is None or self.time < current["first_event_time"]:
            values["first_event_time"] = self.time
        if state and (rank, self.time) >= (current["state_rank"], current["state_time"] or ""):
            values.update(state=state, state_rank=rank, state_time=self.time)
        if self.event.get("eventType") == "START" and (
            current["started_at"] is None or self.time < current["started_at"]
        ):
            values["started_at"] = self.time
        if rank == 3 and (current["ended_at"] is None or self.time > current["ended_at"]):
            values["ended_at"] = self.time
        if run_facets:
            merged = current["facets"]
            if not isinstance(merged, MergedFacets):
                merged = MergedFacets(current["facets"], current["facet_times"])
            if merged.merge(run_facets, self.stamp):
                values["facets"] = values["facet_times"] = merged  # both columns' JSON when the row is written
            if current["facets_time"] is None or self.time > current["facets_time"]:
                values["facets_time"] = self.time
        parent = run_facets.get("parent") or {}
        parent_run_id = (parent.get("run") or {}).get("runId")
        if parent_run_id and not current["parent_run_id"]:
            values["parent_run_id"] = parent_run_id
            values["root_run_id"] = ((parent.get("root") or {}).get("run") or {}).get("runId") or parent_run_id
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
        return values

    def _job_version(self, job_id: int, code_hash: str | None, code_version: str | None, previous: int | None) -> int:
        """The run's job version: its inputs and outputs (all events of the run so far) and its source code."""
        conn, store = self.conn, self.store
        io = store.pending.run_io(conn, self.run_id)
        inputs = sorted(f"{ns}:{name}" for direction, ns, name in io if direction == "input")
        outputs = sorted(f"{ns}:{name}" for direction, ns, name in io if direction == "output")
        version = digest({"inputs": inputs, "outputs": outputs, "code": code_hash or code_version})
        version_id, _ = self._version_row(
            ("job_version", job_id, version),
            SELECT_JOB_VERSION,
            {"p_job": job_id, "p_version": version},
            job_versions_table,
            lambda: {
                "job_id": job_id,
                "version": version,
                "inputs": json.dumps(inputs),
                "outputs": json.dumps(outputs),
                "code_hash": code_hash,
                "code_version": code_version,
                "created_at": self.time,
            },
        )
        if previous != version_id:
            store.pending.change_run(self.run_id, {"job_version_id": version_id})
            if previous is not None and self._unused(previous):
                conn.execute(
                    DELETE_JOB_VERSION, {"p_version": previous}
                )  # a version only a partial event of this run had
                store._ids = {k: v for k, v in store._ids.items() if not (k[0] == "job_version" and v == previous)}
        return version_id

    def _unused(self, job_version_id: int) -> bool:
        """No run has this job version (the runs this transaction changed included)."""
        self.store.pending.flush_runs(self.conn)
        return self.conn.execute(RUN_USING_VERSION, {"p_version": job_version_id}).first() is None

    def _latest_run(
        self,
        job_id: int,
        job_node: int,
        edges: list[tuple[int, int]],
        *,
        is_new: bool,
        run_time: str,
        earlier: bool,
        version_id: int | None,
    ) -> None:
        """Which run of the job is its latest, hence its current version and its edges in the graph.

        The latest run is the one of the greatest (first_event_time, run id). This run becomes it when it is later
        than the latest; stays it while its time does not move earlier; when the latest run's time moves earlier (its
        START arrived after its COMPLETE), the latest is looked up again. Any other run is older: its events change
        nothing here."""
        conn, store = self.conn, self.store
        latest_run, latest_time, current_version = store.job_latest(conn, job_id)
        if self.run_id == latest_run:
            if earlier:
                store.pending.flush_runs(conn)
                top = conn.execute(SELECT_LATEST_RUN, {"p_job": job_id}).first()
                if top is not None and top.id != self.run_id:
                    self._set_latest(job_id, top.id, top.first_event_time, top.job_version_id)
                    store.set_job_edges(conn, job_node, self._run_edges(top.id, job_node))
                    return
            if (run_time, version_id) != (latest_time, current_version):
                self._set_latest(job_id, self.run_id, run_time, version_id)
            store.add_job_edges(conn, job_node, edges)  # a run's inputs and outputs only grow
        elif latest_run is None or (run_time, self.run_id) > (latest_time, latest_run):
            self._set_latest(job_id, self.run_id, run_time, version_id)
            store.set_job_edges(conn, job_node, edges if is_new else self._run_edges(self.run_id, job_node))

    def _runless_job(self, job_id: int, job_node: int, edges: list[tuple[int, int]]) -> None:
        """A job event without a run: it sets the job's edges only while the job has no run, latest time winning
        (the union of those at the latest time)."""
        conn, store = self.conn, self.store
        latest_run, latest_time, current_version = store.job_latest(conn, job_id)
        if latest_run is not None or (latest_time is not None and self.time < latest_time):
            return
        if latest_time is None or self.time > latest_time:
            self._set_latest(job_id, None, self.time, current_version)
            store.set_job_edges(conn, job_node, edges)
        else:
            store.add_job_edges(conn, job_node, edges)

    def _set_latest(self, job_id: int, run_id: str | None, run_time: str, version_id: int | None) -> None:
        self.store.pending.set_job_latest(job_id, (run_id, run_time, version_id))
        self.store.job_latest_known(job_id, (run_id, run_time, version_id))

    def _run_edges(self, run_id: str, job_node: int) -> list[tuple[int, int]]:
        """The graph edges of a run: its input datasets -> its job -> its output datasets (all its events)."""
        self.store.pending.flush_run_datasets(self.conn)
        return [
            (node, job_node) if direction == "input" else (job_node, node)
            for direction, node in self.conn.execute(SELECT_RUN_NODES, {"p_run": run_id})
        ]

    def _column_lineage(self, dataset: dict, dataset_id: int) -> None:
        """The column edges of an output's ``columnLineage``, each with the transformations its latest report gave,
        written at the transaction's end (``PendingWrites.column_edges``)."""
        fields = ((dataset.get("facets") or {}).get("columnLineage") or {}).get("fields") or {}
        store = self.store
        wanted: dict[tuple, str] = {}
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
                wanted[(dataset_id, field_name, input_id, input_field["field"])] = transformations
        if wanted:
            store.pending.column_edges(wanted)
