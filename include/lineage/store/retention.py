"""Retention: ``lineage prune --older-than 90d [--dry-run]`` (default ``$LINEAGE_RETENTION``, 395 days as Unity
Catalog keeps lineage; Marquez has ``db-retention``).

What goes, in one transaction, is history older than the horizon (now minus the age):

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
the horizon. On SQLite the file is vacuumed afterwards, so the store shrinks on disk too.

Another process writing the same store keeps ids of versions in memory: restart a long-running ``lineage serve`` or
``lineage consume --forever`` after a prune (an event of pruned history arriving again could otherwise point at a
deleted version).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import delete, func, select, text, tuple_

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
_CHUNK = 500
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

    def line(self, older_than: str) -> str:
        what = ", ".join(f"{count:,} {name}" for name, count in self.counts.items())
        verb = "would delete" if self.dry_run else "deleted"
        size = ""
        if self.bytes_before is not None:
            size = f"; store {self.bytes_before / 1e6:.1f} MB"
            if self.bytes_after is not None:
                size += f" -> {self.bytes_after / 1e6:.1f} MB"
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


def _chunks(values):
    values = sorted(values)
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


def _edges_of_runs(conn, run_ids: list[str]) -> set[tuple[int, int]]:
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


def prune_store(store, older_than: timedelta, dry_run: bool = False, now: datetime | None = None) -> PruneReport:
    """Delete what the module's rules say is older than ``now - older_than``; with ``dry_run`` only count it."""
    horizon = ((now or datetime.now(UTC)) - older_than).astimezone(UTC).strftime(_STAMP)
    file = sqlite_file(store)
    report = PruneReport(horizon, dry_run, bytes_before=sqlite_size(file))
    r, e, rd = runs_table.c, events_table.c, run_datasets_table.c
    with store._lock:  # the store's writer lock: no ingest of this process in between
        with store.engine.begin() as conn:
            store.serialize_writers(conn)  # nor of another process
            last_event = dict(
                conn.execute(
                    select(e.run_id, func.max(e.event_time)).where(e.run_id.is_not(None)).group_by(e.run_id)
                ).all()
            )
            runs = {
                row.id: row
                for row in conn.execute(select(r.id, r.first_event_time, r.state_time, r.parent_run_id, r.root_run_id))
            }

            def last_seen(run_id: str) -> str:
                row = runs[run_id]
                return max(t for t in (last_event.get(run_id), row.first_event_time, row.state_time, "") if t)

            protected = set(conn.execute(select(jobs_table.c.latest_run_id)).scalars())
            current_datasets = set(conn.execute(select(datasets_table.c.current_version_id)).scalars()) - {None}
            current_jobs = set(conn.execute(select(jobs_table.c.current_version_id)).scalars()) - {None}
            for chunk in _chunks(current_datasets):
                protected |= set(
                    conn.execute(
                        select(dataset_versions_table.c.created_by_run_id).where(dataset_versions_table.c.id.in_(chunk))
                    ).scalars()
                )
            kept = {run_id for run_id in runs if run_id in protected or last_seen(run_id) >= horizon}
            frontier = set(kept)
            while frontier:  # the parents and roots of what stays stay
                above = {
                    parent
                    for run_id in frontier
                    for parent in (runs[run_id].parent_run_id, runs[run_id].root_run_id)
                    if parent in runs and parent not in kept
                }
                kept |= above
                frontier = above
            old_runs = set(runs) - kept

            # what the remaining runs reference, and so stays
            used_dataset_versions, used_job_versions = set(current_datasets), set(current_jobs)
            for chunk in _chunks(kept):
                used_dataset_versions |= set(
                    conn.execute(select(rd.dataset_version_id).where(rd.run_id.in_(chunk))).scalars()
                )
                used_job_versions |= set(conn.execute(select(r.job_version_id).where(r.id.in_(chunk))).scalars())
            dv, jv = dataset_versions_table.c, job_versions_table.c
            old_dataset_versions = {
                version_id
                for version_id, created in conn.execute(select(dv.id, dv.created_at))
                if version_id not in used_dataset_versions and (created or "") < horizon
            }
            old_job_versions = {
                version_id
                for version_id, created in conn.execute(select(jv.id, jv.created_at))
                if version_id not in used_job_versions and (created or "") < horizon
            }
            # runless events: all before the horizon but those at their job's latest time
            latest_runless = {
                (row.namespace, row.name, row.latest_run_time)
                for row in conn.execute(
                    select(jobs_table.c.namespace, jobs_table.c.name, jobs_table.c.latest_run_time).where(
                        jobs_table.c.latest_run_id.is_(None)
                    )
                )
            }
            old_runless = {
                row.id
                for row in conn.execute(
                    select(e.id, e.job_namespace, e.job_name, e.event_time).where(
                        e.run_id.is_(None), e.event_time < horizon
                    )
                )
                if (row.job_namespace, row.job_name, row.event_time) not in latest_runless
            }
            kept_edges = set(conn.execute(select(edges_table.c.source, edges_table.c.target)).all())
            # a run that stays and began before the horizon may have an edge only its early events showed
            kept_edges |= _edges_of_runs(conn, [k for k in kept if (runs[k].first_event_time or "") < horizon])
            eh = edge_history_table.c
            old_history = {
                (source, target)
                for source, target in conn.execute(select(eh.source, eh.target).where(eh.last_seen < horizon))
                if (source, target) not in kept_edges
            }

            counts = {"events": 0, "runs": len(old_runs), "run edges": 0}
            for chunk in _chunks(old_runs):
                counts["events"] += conn.execute(
                    select(func.count()).select_from(events_table).where(e.run_id.in_(chunk))
                ).scalar_one()
                counts["run edges"] += conn.execute(
                    select(func.count()).select_from(run_datasets_table).where(rd.run_id.in_(chunk))
                ).scalar_one()
            counts["events"] += len(old_runless)
            counts["dataset versions"] = len(old_dataset_versions)
            counts["job versions"] = len(old_job_versions)
            counts["edge history rows"] = len(old_history)
            report.counts = counts
            if dry_run:
                return report
            note_events_deleted(conn)  # readers keeping what they read of the events read them again
            for chunk in _chunks(old_runs):
                conn.execute(delete(events_table).where(e.run_id.in_(chunk)))
                conn.execute(delete(run_datasets_table).where(rd.run_id.in_(chunk)))
                conn.execute(delete(run_audits_table).where(run_audits_table.c.run_id.in_(chunk)))
                conn.execute(delete(runs_table).where(r.id.in_(chunk)))
            for chunk in _chunks(old_runless):
                conn.execute(delete(events_table).where(e.id.in_(chunk)))
            for chunk in _chunks(old_dataset_versions):
                conn.execute(delete(dataset_versions_table).where(dv.id.in_(chunk)))
            for chunk in _chunks(old_job_versions):
                conn.execute(delete(job_versions_table).where(jv.id.in_(chunk)))
            for chunk in _chunks(old_history):
                conn.execute(delete(edge_history_table).where(tuple_(eh.source, eh.target).in_(chunk)))
        # ids of deleted rows must not be reused from the store's caches
        store._ids.clear()
        store._aliases.clear()
        store._history.clear()
    if file is not None:
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
            conn.exec_driver_sql("VACUUM")
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        report.bytes_after = sqlite_size(file)
    return report
