"""The rows an ingest transaction changes again and again, kept in memory and written once per transaction: runs,
run -> dataset links, jobs' latest runs, datasets' current versions, column edges.

A day of events touches each run several times (START, RUNNING, COMPLETE; Spark's child runs) and each job and
dataset many times: written as they came, that was six statements an event, most of them rewriting a row the same
transaction had just written (issue 52: 51,833 statements for 8,000 events into PostgreSQL, 60% of the time). Here
each row is read at most once (the batch's runs in one query), changed in memory, and written by one multi-row
statement per table at the transaction's end (``flush``).

What reads these tables inside the transaction asks ``flush_runs`` or ``flush_run_datasets`` first (a job's latest run
looked up again, whether a job version is still used, a run's datasets), so every read sees what a statement-per-change
ingest would have written: the rules of ``ingest.py`` are unchanged, only when rows reach the database.

A value the database refuses in a deferred row (a parent run id longer than its column) is found only when it is
written, maybe while another event is being read: ``DeferredWriteRefusedError`` then says that which event it came
from is not known, and the store takes the batch again an event at a time (``LineageStore._ingest_batch``).
"""

from __future__ import annotations

from sqlalchemy import bindparam, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DataError, ProgrammingError

from include.core.jsontext import loads, sorted_compact
from include.lineage.store import run_audits
from include.lineage.store.bulk import execute_many
from include.lineage.store.schema import column_edges_table, runs_table
from include.lineage.store.statements import (
    RETIME_OUTPUTS,
    SELECT_RUN_IO,
    UPDATE_CURRENT_VERSION,
    UPDATE_JOB_LATEST,
)

_CHUNK = 500  # values of one IN (...) list
_RUN_COLUMNS = tuple(column.name for column in runs_table.c)
_INSERT_RUN = runs_table.insert()
_UPDATE_RUN = (
    update(runs_table)
    .where(runs_table.c.id == bindparam("p_id"))
    .values({name: bindparam(f"v_{name}") for name in _RUN_COLUMNS if name != "id"})
)


def written_at(run: dict | None) -> str | None:
    """When a run wrote its outputs, by its row: its end, else its latest state's time, else its start. Kept on its
    output links (``schema.run_datasets_table``), so set again whenever these move: a link of this transaction as it
    is written (``flush_run_datasets``), the outputs an earlier transaction stored by ``_retime_stored_outputs``."""
    if run is None:
        return None
    return run["ended_at"] or run["state_time"] or run["started_at"]


# What a database answers to a value it cannot keep (a text too long or holding NUL, an integer past 64 bits)
REFUSED_VALUE_ERRORS = (DataError, ProgrammingError, TypeError, ValueError, OverflowError)


class DeferredWriteRefusedError(Exception):
    """A deferred row was refused (the cause says why); which event it came from is not known."""


def _write(conn: Connection, statement, rows) -> None:
    try:
        execute_many(conn, statement, rows)
    except REFUSED_VALUE_ERRORS as error:
        raise DeferredWriteRefusedError(str(error)) from error


class MergedFacets:
    """Facets (a run's, a job's or a dataset's) as one transaction merges them event by event: parsed once, merged in
    memory per facet name (the facet of the greatest (event time, event id) wins; ``times`` keeps each name's), and
    turned into JSON once, when the row is written (``texts``), not re-read and re-written by each event."""

    __slots__ = ("facets", "times")

    def __init__(self, facets: str | None, times: str | None):
        self.facets = loads(facets) if facets else {}
        self.times = loads(times) if times else {}

    def merge(self, new: dict, stamp: tuple[str, int]) -> bool:
        """Merge ``new`` facets stamped (event time, event id); True if any of them won."""
        won = False
        for name, value in new.items():
            seen = self.times.get(name)
            if seen is None or stamp > (seen[0], seen[1]):
                self.facets[name], self.times[name], won = value, list(stamp), True
        return won

    def texts(self) -> tuple[str, str]:
        # compact, keys sorted (rows written before 29 November 2026 spell them with spaces and ASCII escapes: the
        # same values; the LIKE filters on these columns look for quoted ASCII names, found in either spelling)
        return sorted_compact(self.facets), sorted_compact(self.times)


class PendingWrites:
    """One ingest transaction's deferred rows. ``statements``: the dialect's upserts (``statements.dialect_statements``)
    of a run -> dataset link and of a column edge."""

    def __init__(self, statements: dict) -> None:
        self._upsert_run_dataset = statements["upsert_run_dataset"]
        self._upsert_column_edge = statements["upsert_column_edge"]
        self._column_edges: dict[tuple[int, str, int, str], str] = {}  # (dataset, field, input, its field) -> how
        self.runs: dict[str, dict | None] = {}  # run id -> its row as this transaction leaves it; None: not stored
        self._new_runs: set[str] = set()  # ... to insert
        self._changed_runs: set[str] = set()  # ... stored, to update
        # runs stored by an earlier transaction -> the ``written_at`` their stored outputs hold
        self._stored_before: dict[str, str | None] = {}
        self._stored_io: dict[str, set[tuple[str, str, str]]] = {}  # ... their (direction, namespace, name) then
        self._run_io: dict[str, set[tuple[str, str, str]]] = {}  # ... and this transaction's, of every run
        self._links: dict[tuple[str, int, str], int | None] = {}  # (run, dataset, direction) -> version id
        self._written_links: dict[tuple[str, int, str], tuple[int | None, str | None]] = {}  # -> (version, written_at)
        self._latest: dict[int, tuple[str | None, str | None, int | None]] = {}  # job id -> (run, time, version)
        self._current_versions: dict[int, tuple[str, int]] = {}  # dataset id -> (event time, version id)

    def clear(self) -> None:
        for kept in (self.runs, self._stored_io, self._run_io, self._links, self._written_links, self._latest):
            kept.clear()
        for kept in (self._current_versions, self._stored_before, self._new_runs, self._changed_runs):
            kept.clear()
        self._column_edges.clear()

    # ---------------------------------------------------------------- runs
    def read_runs(self, conn: Connection, run_ids: set[str]) -> None:
        """The stored rows of the batch's runs, in one query per 500: each event then finds its run in memory."""
        wanted = sorted(run_id for run_id in run_ids if run_id not in self.runs)
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            self.runs.update(dict.fromkeys(chunk))
            for row in conn.execute(select(runs_table).where(runs_table.c.id.in_(chunk))):
                self.runs[row.id] = dict(row._mapping)
                self._stored_before[row.id] = written_at(self.runs[row.id])

    def run(self, conn: Connection, run_id: str) -> dict | None:
        """The run's row as this transaction sees it, or None when it is not stored."""
        if run_id not in self.runs:
            self.read_runs(conn, {run_id})
        return self.runs[run_id]

    def add_run(self, values: dict) -> None:
        row = dict.fromkeys(_RUN_COLUMNS) | values
        self.runs[row["id"]] = row
        self._new_runs.add(row["id"])

    def change_run(self, run_id: str, values: dict) -> None:
        self.runs[run_id].update(values)
        if run_id not in self._new_runs:
            self._changed_runs.add(run_id)

    def flush_runs(self, conn: Connection) -> None:
        audits: dict[str, dict | None] = {}  # run id -> its audit row (None: none), of runs with an audit facet
        for run_id in self._new_runs | self._changed_runs:
            row = self.runs[run_id]
            if isinstance(row["facets"], MergedFacets):  # its JSON, once, as the row is written
                # a merge never drops a facet's name: a run whose facets never named it has no audit row to change
                if run_audits.FACET in row["facets"].facets:
                    audits[run_id] = run_audits.audit_row(run_id, row["facets"].facets)
                row["facets"], row["facet_times"] = row["facets"].texts()
        if self._new_runs:
            _write(conn, _INSERT_RUN, [self.runs[run_id] for run_id in sorted(self._new_runs)])
        if self._changed_runs:
            rows = [self.runs[run_id] for run_id in sorted(self._changed_runs)]
            _write(conn, _UPDATE_RUN, [{f"v_{k}": v for k, v in row.items()} | {"p_id": row["id"]} for row in rows])
        if audits:
            try:
                run_audits.write(conn, audits)
            except REFUSED_VALUE_ERRORS as error:
                raise DeferredWriteRefusedError(str(error)) from error
        self._new_runs.clear()
        self._changed_runs.clear()

    # ---------------------------------------------------------------- run -> dataset links
    def link(self, run_id: str, dataset_id: int, direction: str, version_id: int | None, names: tuple[str, str]):
        """The run read or wrote the dataset ``names`` (namespace, name), in the version ``version_id`` when known: a
        link keeps its last known version, as the upsert's ``coalesce`` does."""
        key = (run_id, dataset_id, direction)
        if version_id is not None or key not in self._links:
            self._links[key] = version_id if version_id is not None else self._links.get(key)
        self._run_io.setdefault(run_id, set()).add((direction, *names))

    def run_io(self, conn: Connection, run_id: str) -> set[tuple[str, str, str]]:
        """(direction, namespace, name) of every dataset the run read or wrote, in all its events so far: those of
        earlier transactions (read once, for a run stored before this one) and this transaction's."""
        stored: set[tuple[str, str, str]] = set()
        if run_id in self._stored_before:
            stored = self._stored_io.get(run_id)
            if stored is None:
                stored = self._stored_io[run_id] = set(map(tuple, conn.execute(SELECT_RUN_IO, {"p_run": run_id})))
        return stored | self._run_io.get(run_id, set())

    def flush_run_datasets(self, conn: Connection) -> None:
        """This transaction's links not yet written as they stand: new, of a version now known, or an output whose
        run's times moved since it was written (called again before a read of links, and by ``flush``)."""
        values = {
            key: (version, written_at(self.runs.get(key[0])) if key[2] == "output" else None)
            for key, version in self._links.items()
        }
        rows = [
            {"run_id": run, "dataset_id": dataset, "direction": direction, "dataset_version_id": version}
            | {"written_at": written}
            for (run, dataset, direction), (version, written) in sorted(values.items(), key=lambda item: item[0])
            if self._written_links.get((run, dataset, direction)) != (version, written)
        ]
        if rows:
            _write(conn, self._upsert_run_dataset, rows)
        self._written_links.update(values)

    def _retime_stored_outputs(self, conn: Connection) -> None:
        """The outputs earlier transactions stored for a run whose times this one moved: their ``written_at`` set to
        the run's new time (one statement a run, run id and direction a seek of the primary key)."""
        rows = []
        for run_id, stored in sorted(self._stored_before.items(), key=lambda item: item[0]):
            now = written_at(self.runs.get(run_id))
            if now != stored:
                rows.append({"p_run": run_id, "p_written": now})
                self._stored_before[run_id] = now
        if rows:
            _write(conn, RETIME_OUTPUTS, rows)

    # ---------------------------------------------------------------- jobs and datasets
    def set_job_latest(self, job_id: int, latest: tuple[str | None, str | None, int | None]) -> None:
        self._latest[job_id] = latest

    def set_current_version(self, dataset_id: int, time: str, version_id: int) -> None:
        """An output's version at ``time``: the latest time wins, on a tie the later event (as ``<=`` let the later
        statement win)."""
        known = self._current_versions.get(dataset_id)
        if known is None or time >= known[0]:
            self._current_versions[dataset_id] = (time, version_id)

    def column_edges(self, edges: dict[tuple[int, str, int, str], str]) -> None:
        """Column edges of an output's ``columnLineage``, each with its transformations (JSON): the latest report of an
        edge wins, as the upsert per report did."""
        self._column_edges.update(edges)

    def flush(self, conn: Connection) -> None:
        """Everything still in memory, written: runs, links, jobs' latest runs, datasets' current versions, column
        edges."""
        self.flush_runs(conn)
        self.flush_run_datasets(conn)
        self._retime_stored_outputs(conn)
        if self._latest:
            _write(
                conn,
                UPDATE_JOB_LATEST,
                [
                    {"p_id": job, "p_run": run, "p_time": time, "p_version": version}
                    for job, (run, time, version) in sorted(self._latest.items())
                ],
            )
            self._latest.clear()
        if self._current_versions:
            _write(
                conn,
                UPDATE_CURRENT_VERSION,
                [
                    {"p_id": dataset, "p_time": time, "p_version": version}
                    for dataset, (time, version) in sorted(self._current_versions.items())
                ],
            )
            self._current_versions.clear()
        if self._column_edges:
            names = [column.name for column in column_edges_table.c]  # the key's four, then transformations
            rows = [dict(zip(names, (*key, how), strict=True)) for key, how in sorted(self._column_edges.items())]
            _write(conn, self._upsert_column_edge, rows)
            self._column_edges.clear()
