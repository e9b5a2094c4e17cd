"""Retention: ``lineage prune --older-than 90d [--dry-run]`` (default ``$LINEAGE_RETENTION``, 395 days as Unity
Catalog keeps lineage; Marquez has ``db-retention``).

What goes is history older than the horizon (now minus the age):

- runs whose every event is older than the horizon, with their events and their run -> dataset edges
  (``lineage_run_datasets``), unless the run is some job's latest run (it gives the job its current version and
  its edges), created some dataset's current version, or is the parent or root of a run that stays;
- dataset versions created before the horizon that are no dataset's current version and that no remaining run read
  or wrote; job versions likewise (no job's current one, no remaining run's);
- events without a run older than the horizon, but a job's latest ones (they give a job without runs its edges);
- ``lineage_edge_history`` rows last seen before the horizon whose edge is not in the current graph nor an edge of a
  run that stays (the as-of walk finds a dataset's writers and readers there).

What stays is untouched: every node, every current version, the current graph (``lineage_edges``) and so its
closure, which pruning never changes and therefore keeps exact. Run provenance and ``--as-of`` answers reach back to
the horizon. On SQLite the pages freed are filled by new events first; ``--vacuum`` gives them back to the file
system, rewriting the store in one transaction that writers wait for.

The prune is planned first, reading only, then deleted in transactions of a bounded size (``BATCH_RUNS`` old runs,
oldest first; ``BATCH_ROWS`` other rows), each taking the writers' lock for its own length only: pruning a year's
store in one transaction held every writer off for the whole of it (more than 49 minutes for 6.2 million events on
SQLite, its write-ahead log grown to 8.3 GB). Writers come in between, so each transaction first reads what was
written since the plan: a run that received an event, the parents and roots of such a run, and whatever has become
a job's latest run or made a dataset's current version are spared, and versions, runless events and history rows
are deleted only where the rules still hold when they are deleted. A prune stopped half-way leaves a store that is
consistent and partly pruned; running it again finishes it.

Another process writing the same store keeps ids of versions in memory: restart a long-running ``lineage serve`` or
``lineage consume --forever`` after a prune (an event of pruned history arriving again could otherwise point at a
deleted version).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import delete, func, select, text, tuple_
from sqlalchemy.engine import Connection

from include.lineage.errors import LineageError
from include.lineage.store.change_key import note_events_deleted
from include.lineage.store.schema import (
    dataset_versions_table,
    datasets_table,
    edge_history_table,
    edges_table,
    events_table,
    job_versions_table,
    jobs_table,
    run_audits_table,
    run_datasets_table,
    runs_table,
)

_UNITS = {"d": "days", "h": "hours", "m": "minutes", "w": "weeks"}
_AGE = re.compile(r"^\s*(\d+)\s*([dhmw])\s*$")
_CHUNK = 500  # ids in one IN list
BATCH_RUNS = 2_000  # old runs (≈ 4 events each at a year's scale) deleted in one transaction
BATCH_ROWS = 5_000  # runless events, versions or history rows deleted in one transaction
_COUNTED = ("events", "runs", "run edges", "dataset versions", "job versions", "edge history rows")
_STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"  # the store's times (events.utc_time): string order is time order


def parse_horizon(value: str) -> timedelta:
    """``90d``, ``12h``, ``30m``, ``2w`` as a duration; LineageError (exit 2, HTTP 400) for anything else."""
    match = _AGE.match(value or "")
    if match is None:
        raise LineageError(f"age {value!r}: expected a number and a unit, d (days), h, m or w, e.g. 90d")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


@dataclass
class PruneReport:
    horizon: str
    dry_run: bool
    counts: dict[str, int] = field(default_factory=dict)
    bytes_before: int | None = None
    bytes_after: int | None = None
    free_bytes: int | None = None  # SQLite, not vacuumed: the freed pages, which new events fill first
    transactions: int = 0  # the deleting ones
    longest_transaction: float = 0.0  # seconds: the longest a writer waited for a deleting transaction
    spared: int = 0  # old runs kept because of what was written while the prune ran
    seconds: dict[str, float] = field(default_factory=dict)  # planning, deleting, vacuuming

    def line(self, older_than: str) -> str:
        what = ", ".join(f"{count:,} {name}" for name, count in self.counts.items())
        verb = "would delete" if self.dry_run else "deleted"
        size = ""
        if self.transactions:
            size = f" in {self.transactions:,} transactions (the longest {self.longest_transaction:.1f} s)"
        if self.spared:
            size += f"; {self.spared:,} old runs spared (written to while pruning)"
        if self.bytes_before is not None:
            size += f"; store {self.bytes_before / 1e6:.1f} MB"
            if self.bytes_after is not None:
                size += f" -> {self.bytes_after / 1e6:.1f} MB"
            elif self.free_bytes:
                size += f", {self.free_bytes / 1e6:.1f} MB of it free for new events (--vacuum gives it back)"
        return f"lineage prune: older than {older_than} (before {self.horizon}): {verb} {what}{size}"


def sqlite_file(store) -> Path | None:
    """The store's SQLite file, or None for another database."""
    if store.dialect != "sqlite":
        return None
    return Path(store.url.removeprefix("sqlite:///"))


def sqlite_size(path: Path | None) -> int | None:
    """Bytes of a SQLite file and its write-ahead log; None when there is no file."""
    if path is None or not path.exists():
        return None
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def _chunks(values: Iterable, size: int = _CHUNK) -> Iterator[list]:
    values = sorted(values)
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _newest_event(conn: Connection) -> int:
    return conn.execute(select(func.max(events_table.c.id))).scalar() or 0


def _protected_runs(conn: Connection) -> set[str]:
    """The runs that stay whatever their age: each job's latest run and the makers of the datasets' current versions."""
    dv, d = dataset_versions_table.c, datasets_table.c
    latest = set(conn.execute(select(jobs_table.c.latest_run_id)).scalars())
    makers = set(
        conn.execute(
            select(dv.created_by_run_id).select_from(
                dataset_versions_table.join(datasets_table, d.current_version_id == dv.id)
            )
        ).scalars()
    )
    return (latest | makers) - {None}


def _with_ancestors(lineage: dict[str, tuple], runs: set[str]) -> set[str]:
    """The runs and every parent and root above them that ``lineage`` (run -> (parent, root)) knows."""
    found, frontier = set(runs), set(runs)
    while frontier:
        above = {
            parent
            for run_id in frontier
            for parent in lineage.get(run_id, ())
            if parent in lineage and parent not in found
        }
        found |= above
        frontier = above
    return found


def _edges_of_runs(conn, run_ids: Iterable[str]) -> set[tuple[int, int]]:
    """The graph edges (node ids) of runs' inputs and outputs: the history rows the as-of walk finds a dataset's
    writers and readers by (queries/walks.py), which must outlive neither a run that stays nor its edges."""
    rd, d, r, j = run_datasets_table.c, datasets_table.c, runs_table.c, jobs_table.c
    found = set()
    for chunk in _chunks(run_ids):
        for direction, dataset_node, job_node in conn.execute(
            select(rd.direction, d.node_id, j.node_id)
            .select_from(run_datasets_table)
            .join(datasets_table, d.id == rd.dataset_id)
            .join(runs_table, r.id == rd.run_id)
            .join(jobs_table, j.id == r.job_id)
            .where(rd.run_id.in_(chunk))
            .distinct()
        ):
            found.add((dataset_node, job_node) if direction == "input" else (job_node, dataset_node))
    return found


@dataclass
class _Plan:
    """What the rules say goes, read before anything is deleted; kept true while writers come in between."""

    horizon: str
    seen: int  # the newest event id already accounted for: a newer one was written while the prune ran
    lineage: dict[str, tuple]  # every run's (parent, root)
    old_runs: list[str]  # oldest first, so that each transaction frees pages near each other
    runless: set[int]
    dataset_versions: set[int]
    job_versions: set[int]
    history: set[tuple[int, int]]
    kept_edges: set[tuple[int, int]]  # edges of runs that stay (the current graph's are read when deleting)
    spared: set[str] = field(default_factory=set)


def _plan(conn: Connection, horizon: str) -> _Plan:
    seen = _newest_event(conn)  # first: whatever is written after it is looked at again before each deletion
    r, e, rd = runs_table.c, events_table.c, run_datasets_table.c
    last_event = dict(
        conn.execute(select(e.run_id, func.max(e.event_time)).where(e.run_id.is_not(None)).group_by(e.run_id)).all()
    )
    lineage, versions, old, early = {}, {}, {}, set()
    columns = (r.id, r.first_event_time, r.state_time, r.parent_run_id, r.root_run_id, r.job_version_id)
    for row in conn.execute(select(*columns)):
        lineage[row.id] = (row.parent_run_id, row.root_run_id)
        versions[row.id] = row.job_version_id
        if (row.first_event_time or "") < horizon:
            early.add(row.id)
            times = (last_event.get(row.id), row.first_event_time, row.state_time)
            if max((t for t in times if t), default="") < horizon:
                old[row.id] = row.first_event_time or ""
    kept = _with_ancestors(lineage, (lineage.keys() - old.keys()) | (_protected_runs(conn) & lineage.keys()))
    old_runs = sorted(old.keys() - kept, key=lambda run_id: (old[run_id], run_id))

    used_dataset_versions = set(conn.execute(select(datasets_table.c.current_version_id)).scalars())
    for chunk in _chunks(kept):
        used_dataset_versions |= set(conn.execute(select(rd.dataset_version_id).where(rd.run_id.in_(chunk))).scalars())
    used_job_versions = set(conn.execute(select(jobs_table.c.current_version_id)).scalars())
    used_job_versions |= {versions[run_id] for run_id in kept}
    dv, jv = dataset_versions_table.c, job_versions_table.c
    # a run that stays and began before the horizon may have an edge only its early events showed
    kept_edges = _edges_of_runs(conn, kept & early)
    return _Plan(
        horizon=horizon,
        seen=seen,
        lineage=lineage,
        old_runs=old_runs,
        runless=_old_runless(conn, horizon),
        dataset_versions={
            version_id
            for version_id, created in conn.execute(select(dv.id, dv.created_at))
            if version_id not in used_dataset_versions and (created or "") < horizon
        },
        job_versions={
            version_id
            for version_id, created in conn.execute(select(jv.id, jv.created_at))
            if version_id not in used_job_versions and (created or "") < horizon
        },
        history=_old_history(conn, horizon, kept_edges),
        kept_edges=kept_edges,
    )


def _old_runless(conn: Connection, horizon: str, among: list[int] | None = None) -> set[int]:
    """Events without a run before the horizon (of ``among`` only, if given), but those at their job's latest time."""
    j, e = jobs_table.c, events_table.c
    latest = {
        (row.namespace, row.name, row.latest_run_time)
        for row in conn.execute(select(j.namespace, j.name, j.latest_run_time).where(j.latest_run_id.is_(None)))
    }
    query = select(e.id, e.job_namespace, e.job_name, e.event_time).where(e.run_id.is_(None), e.event_time < horizon)
    if among is not None:
        query = query.where(e.id.in_(among))
    return {row.id for row in conn.execute(query) if (row.job_namespace, row.job_name, row.event_time) not in latest}


def _old_history(conn: Connection, horizon: str, kept_edges: set, among: list | None = None) -> set[tuple[int, int]]:
    """Edge history rows last seen before the horizon (of ``among`` only, if given) whose edge is neither in the
    current graph nor in ``kept_edges``."""
    eh = edge_history_table.c
    kept = kept_edges | set(conn.execute(select(edges_table.c.source, edges_table.c.target)).all())
    query = select(eh.source, eh.target).where(eh.last_seen < horizon)
    if among is not None:
        query = query.where(tuple_(eh.source, eh.target).in_(among))
    return {(source, target) for source, target in conn.execute(query) if (source, target) not in kept}


def _count(conn: Connection, plan: _Plan) -> dict[str, int]:
    """What the plan would delete, were nothing written meanwhile (``--dry-run``)."""
    e, rd = events_table.c, run_datasets_table.c
    counts = {"events": len(plan.runless), "runs": len(plan.old_runs), "run edges": 0}
    for chunk in _chunks(plan.old_runs):
        counts["events"] += conn.execute(
            select(func.count()).select_from(events_table).where(e.run_id.in_(chunk))
        ).scalar_one()
        counts["run edges"] += conn.execute(
            select(func.count()).select_from(run_datasets_table).where(rd.run_id.in_(chunk))
        ).scalar_one()
    counts["dataset versions"] = len(plan.dataset_versions)
    counts["job versions"] = len(plan.job_versions)
    counts["edge history rows"] = len(plan.history)
    return counts


def _spare_what_was_written(conn: Connection, plan: _Plan) -> None:
    """Keep true the plan's runs to delete: the runs written since it was made (or since the last transaction), their
    parents and roots, and today's latest runs and current versions' makers are spared, with their edges."""
    newest = _newest_event(conn)
    if newest <= plan.seen:
        return  # nothing written meanwhile: what protects a run only moves with a new event
    e, r = events_table.c, runs_table.c
    written = set(conn.execute(select(e.run_id).where(e.id > plan.seen, e.run_id.is_not(None)).distinct()).scalars())
    for chunk in _chunks(written - plan.lineage.keys()):  # new runs: whose children they are
        for row in conn.execute(select(r.id, r.parent_run_id, r.root_run_id).where(r.id.in_(chunk))):
            plan.lineage[row.id] = (row.parent_run_id, row.root_run_id)
    spared = _with_ancestors(plan.lineage, written | (_protected_runs(conn) & plan.lineage.keys()))
    plan.kept_edges |= _edges_of_runs(conn, spared - plan.spared)
    plan.spared |= spared
    plan.seen = newest


@dataclass
class _Deleting:
    """The prune's deleting transactions: each takes the writers' lock for its own length only."""

    store: object
    report: PruneReport
    progress: Callable[[PruneReport], None] | None

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        began = time.monotonic()
        with self.store._lock:  # this process's writers, then (serialize_writers) every process's
            with self.store.engine.begin() as conn:
                self.store.serialize_writers(conn)
                yield conn
            # before this process's next writer: it must not reuse an id of what this transaction deleted
            self.store.forget_row_ids()
        self.report.transactions += 1
        self.report.longest_transaction = max(self.report.longest_transaction, time.monotonic() - began)
        if self.progress is not None:
            self.progress(self.report)

    def add(self, name: str, result) -> None:
        self.report.counts[name] = self.report.counts.get(name, 0) + max(result.rowcount, 0)


def _delete_runs(deleting: _Deleting, plan: _Plan, batch_runs: int) -> None:
    e, rd, r, ra = events_table.c, run_datasets_table.c, runs_table.c, run_audits_table.c
    for start in range(0, len(plan.old_runs), batch_runs):
        with deleting.transaction() as conn:
            _spare_what_was_written(conn, plan)
            doomed = [run_id for run_id in plan.old_runs[start : start + batch_runs] if run_id not in plan.spared]
            if doomed:
                note_events_deleted(conn)  # readers keeping what they read of the events read them again
            for chunk in _chunks(doomed):
                deleting.add("events", conn.execute(delete(events_table).where(e.run_id.in_(chunk))))
                deleting.add("run edges", conn.execute(delete(run_datasets_table).where(rd.run_id.in_(chunk))))
                conn.execute(delete(run_audits_table).where(ra.run_id.in_(chunk)))
                deleting.add("runs", conn.execute(delete(runs_table).where(r.id.in_(chunk))))
            # SQLite gives a new row the greatest id plus one: past the ids deleted, what is written next is newer
            plan.seen = _newest_event(conn)


def _delete_the_rest(deleting: _Deleting, plan: _Plan) -> None:
    """Runless events, versions and history rows, each checked against the rules again as it is deleted."""
    e, dv, jv, eh = events_table.c, dataset_versions_table.c, job_versions_table.c, edge_history_table.c
    for batch in _chunks(plan.runless, BATCH_ROWS):
        with deleting.transaction() as conn:
            doomed = _old_runless(conn, plan.horizon, batch)
            if doomed:
                note_events_deleted(conn)
            for chunk in _chunks(doomed):
                deleting.add("events", conn.execute(delete(events_table).where(e.id.in_(chunk))))
    for batch in _chunks(plan.dataset_versions, BATCH_ROWS):
        with deleting.transaction() as conn:
            current = set(conn.execute(select(datasets_table.c.current_version_id)).scalars())
            for chunk in _chunks(set(batch) - current):
                unread = (
                    ~select(run_datasets_table.c.dataset_version_id)
                    .where(run_datasets_table.c.dataset_version_id == dv.id)
                    .exists()
                )
                statement = delete(dataset_versions_table).where(dv.id.in_(chunk), unread)
                deleting.add("dataset versions", conn.execute(statement))
    for batch in _chunks(plan.job_versions, BATCH_ROWS):
        with deleting.transaction() as conn:
            current = set(conn.execute(select(jobs_table.c.current_version_id)).scalars())
            for chunk in _chunks(set(batch) - current):
                unused = ~select(runs_table.c.id).where(runs_table.c.job_version_id == jv.id).exists()
                statement = delete(job_versions_table).where(jv.id.in_(chunk), unused)
                deleting.add("job versions", conn.execute(statement))
    for batch in _chunks(plan.history, BATCH_ROWS):
        with deleting.transaction() as conn:
            for chunk in _chunks(_old_history(conn, plan.horizon, plan.kept_edges, batch)):
                statement = delete(edge_history_table).where(tuple_(eh.source, eh.target).in_(chunk))
                deleting.add("edge history rows", conn.execute(statement))


def _vacuum(store) -> None:
    """Give the freed pages back to the file system (SQLite only; PostgreSQL reuses them). VACUUM rewrites the whole
    store in one transaction: writers wait for all of it (91 s for the 7.4 GB left of the 10^7 year as built, pruned
    to 90 days)."""
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        conn.exec_driver_sql("VACUUM")
        conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))


def _free_bytes(store) -> int:
    with store.engine.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA freelist_count").scalar()
        return pages * conn.exec_driver_sql("PRAGMA page_size").scalar()


def prune_store(
    store,
    older_than: timedelta,
    dry_run: bool = False,
    now: datetime | None = None,
    batch_runs: int = BATCH_RUNS,
    progress: Callable[[PruneReport], None] | None = None,
    vacuum: bool = False,
) -> PruneReport:
    """Delete what the module's rules say is older than ``now - older_than``; with ``dry_run`` only count it.
    ``progress`` is told the report after each deleting transaction. ``vacuum`` (SQLite): give the freed space back
    to the file system; without it, new events fill it first and the file does not grow until it is full."""
    horizon = ((now or datetime.now(UTC)) - older_than).astimezone(UTC).strftime(_STAMP)
    file = sqlite_file(store)
    report = PruneReport(horizon, dry_run, bytes_before=sqlite_size(file))
    began = time.monotonic()
    with store.engine.connect() as conn:  # reading only: writers go on
        plan = _plan(conn, horizon)
        report.seconds["planning"] = round(time.monotonic() - began, 2)
        if dry_run:
            report.counts = _count(conn, plan)
            return report
    report.counts = dict.fromkeys(_COUNTED, 0)
    deleting = _Deleting(store, report, progress)
    began = time.monotonic()
    _delete_runs(deleting, plan, batch_runs)
    _delete_the_rest(deleting, plan)
    report.seconds["deleting"] = round(time.monotonic() - began, 2)
    report.spared = len(plan.spared & set(plan.old_runs))
    if file is not None and vacuum:
        began = time.monotonic()
        _vacuum(store)
        report.seconds["vacuuming"] = round(time.monotonic() - began, 2)
        report.bytes_after = sqlite_size(file)
    elif file is not None:
        report.free_bytes = _free_bytes(store)
    return report
