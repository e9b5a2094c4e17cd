"""Marquez's model of the events: the part of Marquez's database its lineage graph reads, rebuilt from the stored
events, whatever the closure table holds (``marquez.py`` answers ``GET /api/v1/lineage`` from it)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import case, func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from include.core.collector import cyclic_gc_paused, set_apart_what_is_alive
from include.lineage.queries import model_snapshot
from include.lineage.store.change_key import events_key
from include.lineage.store.marquez_view import CompactEvent, Ref
from include.lineage.store.packing import PayloadPacker
from include.lineage.store.schema import events_table, model_snapshots_table

DONE = frozenset({"COMPLETE", "FAIL", "ABORT"})  # OpenLineageDao.getRunState(...).isDone()
_TERMINAL = frozenset({"COMPLETE", "FAIL"})  # LineageEvent.isTerminalEvent()

log = logging.getLogger(__name__)


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
    def replay(cls, compact_events: Iterable[CompactEvent]) -> MarquezModel:
        return _Replay(cls()).run(compact_events)

    def copy(self) -> MarquezModel:
        """A model that later replays can change without changing this one (the values are immutable)."""
        return MarquezModel(
            dict(self.registry),
            dict(self.inputs),
            dict(self.outputs),
            dict(self.writer),
            dict(self.reader),
            set(self.jobs),
        )

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


class _Replay:
    """One replay of events into a ``MarquezModel``, with what Marquez keeps beside it while processing them: each
    run's datasets over its events, and the job versions made so far."""

    def __init__(self, model: MarquezModel):
        self.model = model
        self.run_io: dict[str, tuple[set[Ref], set[Ref]]] = {}
        self.versions: dict[tuple, tuple[str, int]] = {}
        self.applied = 0  # events replayed so far: the next one's place in the order
        self.last: tuple[str, int] | None = None  # (time, id) of the last event replayed

    def parts(self) -> dict:
        """What the replay holds, for a snapshot (``model_snapshot.encode``)."""
        model = self.model
        return {
            "registry": model.registry,
            "inputs": model.inputs,
            "outputs": model.outputs,
            "writer": model.writer,
            "reader": model.reader,
            "jobs": model.jobs,
            "run_io": self.run_io,
            "versions": self.versions,
            "applied": self.applied,
            "last": self.last,
        }

    @classmethod
    def of_parts(cls, parts: dict) -> _Replay:
        """The replay a snapshot holds (``model_snapshot.decode``), ready to go on with the events after it."""
        replay = cls(
            MarquezModel(
                parts["registry"], parts["inputs"], parts["outputs"], parts["writer"], parts["reader"], parts["jobs"]
            )
        )
        replay.run_io, replay.versions = parts["run_io"], parts["versions"]
        replay.applied, replay.last = parts["applied"], parts["last"]
        return replay

    def run(self, compact_events: Iterable[CompactEvent]) -> MarquezModel:
        """Replay events that sort after every event replayed so far (by time, then id), continuing the order."""
        for event in compact_events:
            self.apply(event, self.applied)
            self.applied += 1
            self.last = (event.time, event.id)
        return self.model

    def follows(self, compact_events: Iterable[CompactEvent]) -> bool:
        """Whether every one of these sorts after the last event replayed, so replaying them next is the replay of
        all events in order."""
        return self.last is None or all((event.time, event.id) > self.last for event in compact_events)

    def register(self, namespace: str, name: str, links: tuple[Ref, ...]) -> Ref:
        registry = self.model.registry
        primary = registry.setdefault((namespace, name), (namespace, name))
        for link in links:
            registry.setdefault(link, primary)
        return primary

    def apply(self, event: CompactEvent, order: int) -> None:
        model = self.model
        ins = {self.register(*d) for d in event.inputs}
        outs = {self.register(*d) for d in event.outputs}
        if event.dataset:
            self.register(*event.dataset)
        job = event.job
        if job is None:
            return
        model.jobs.add(job)
        if event.run is None:  # a JobEvent: upsertRunlessJobVersion
            self.new_version(job, ins, outs, event.location, event.time, order)
            return
        io = self.run_io.setdefault(event.run, (set(), set()))
        io[0].update(ins)
        io[1].update(outs)
        quiet = event.streaming and event.event_type in _TERMINAL and not ins and not outs
        if not ins and not quiet:
            model.inputs.pop(job, None)
        if not outs and not quiet:
            model.outputs.pop(job, None)
        if event.streaming:
            key = (job, frozenset(io[0]), frozenset(io[1]), event.location)
            if not quiet and key not in self.versions:
                self.new_version(job, io[0], io[1], event.location, event.time, order)
        elif event.event_type in DONE:
            self.new_version(job, io[0], io[1], event.location, event.time, order)

    def new_version(self, job: Ref, ins: set[Ref], outs: set[Ref], location, time: str, order: int) -> None:
        model = self.model
        key = (job, frozenset(ins), frozenset(outs), location)
        created = self.versions.setdefault(key, (time, order))  # upsertJobVersion: ON CONFLICT keeps created_at
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


class ModelCache:
    """The model of the stored events, kept until the store has other events. New events that all sort after those
    already replayed (the usual case: events arrive in about the order they happened) are replayed onto the kept
    model; a late one (earlier than the newest replayed) or a deleted one (``lineage prune``, seen by the store's
    change key without counting the events: ``store/change_key.py``) replays every event again. Each event is read
    from its ``marquez`` column (its payload only for rows stored before that column). One per ``LineageQueries``;
    locked, as one may answer several requests at once.

    With ``engine``, a process starts from the store's newest snapshot of the model (``model_snapshot.py``) when it
    is the replay of exactly the events stored up to its last one, and replays only the events stored since; it
    writes a snapshot after each replay of every event and once the events replayed since the last one are a quarter
    as many as it holds (at least ``SNAPSHOT_EVERY``). A snapshot that cannot be read or written is logged and
    passed over: the model is then replayed, as without snapshots."""

    SNAPSHOT_EVERY = 10_000

    def __init__(self, packer: PayloadPacker, engine: Engine | None = None):
        self.packer = packer  # a row without the compact column is read from its (packed) payload
        self.engine = engine  # where snapshots are read and written; None: never
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._replay: _Replay | None = None
        # the compact events read so far, for a replay of every event; after a start from a snapshot only those
        # stored since it (``_complete`` False), and all are read when every event must be replayed
        self._compact: dict[int, CompactEvent] = {}
        self._complete = True
        self._seen = 0  # how many events the replay is of: all those with an id up to ``_since``
        self._since = 0
        self._snapshot_seen: int | None = None  # events of the newest snapshot written or read; None: none yet
        self.full_replays = 0  # how many times every event was replayed (the cost a late event brings)
        self.snapshots_read = self.snapshots_written = 0

    def model(self, conn: Connection) -> MarquezModel:
        e = events_table
        key = events_key(conn)  # (newest id, deletions): no count of the events (store/change_key.py)
        with self._lock, cyclic_gc_paused():
            if self._replay is not None and self._key == key:
                return self._replay.model
            if self._replay is None and self._seen == 0 and self.engine is not None:
                self._start_from_snapshot(conn)
            if self._key is not None and key[1] != self._key[1]:
                # events deleted since (lineage prune): the events replayed are not the store's
                self._read_every_event(conn)
                new = []
            else:
                new = self._read(conn, e.c.id > self._since)  # with any stored since the key was read
                self._compact.update((event.id, event) for event in new)
                self._seen += len(new)
                self._since = max((event.id for event in new), default=self._since)
            new.sort(key=lambda c: (c.time, c.id))
            if self._replay is not None and self._replay.follows(new):
                # onto a copy: a request still walking the model it was given must not see it change under it
                self._replay.model = self._replay.model.copy()
                self._replay.run(new)
                due = max(self.SNAPSHOT_EVERY, (self._snapshot_seen or 0) // 4)
                if self._snapshot_seen is None or self._seen - self._snapshot_seen >= due:
                    self._write_snapshot()
            else:
                if not self._complete:
                    self._read_every_event(conn)
                self._replay = _Replay(MarquezModel())
                self._replay.run(sorted(self._compact.values(), key=lambda c: (c.time, c.id)))
                self.full_replays += 1
                self._write_snapshot()
                set_apart_what_is_alive()  # the model is kept: later collections need not walk it
            self._key = key
            return self._replay.model

    def _read_every_event(self, conn: Connection) -> None:
        self._compact = {event.id: event for event in self._read(conn, None)}
        self._complete = True
        self._seen, self._since = len(self._compact), max(self._compact, default=0)
        self._replay = None

    def _start_from_snapshot(self, conn: Connection) -> None:
        """The newest snapshot as the replay, when it is the replay of exactly the events now stored up to its last
        one (none deleted since, none committed late under a lower id)."""
        s, e = model_snapshots_table.c, events_table.c
        try:
            row = conn.execute(
                select(s.id, s.events, s.last_event_id, s.data)
                .where(s.format == model_snapshot.FORMAT)
                .order_by(s.last_event_id.desc(), s.id.desc())
                .limit(1)
            ).first()
            if row is None:
                return
            stored = conn.execute(select(func.count()).where(e.id <= row.last_event_id)).scalar()
            if stored != row.events:
                log.info(
                    "the model's snapshot %s is of %s events, the store has %s up to it: not read",
                    row.id,
                    row.events,
                    stored,
                )
                return
            replay = _Replay.of_parts(model_snapshot.decode(bytes(row.data)))
        except (model_snapshot.SnapshotUnreadableError, SQLAlchemyError) as error:
            log.warning("the model's snapshot could not be read (%s): every event is replayed", error)
            return
        self._replay, self._seen, self._since = replay, row.events, row.last_event_id
        self._snapshot_seen, self._complete, self._compact = row.events, False, {}
        self.snapshots_read += 1
        set_apart_what_is_alive()  # kept, as a replayed model is

    def _write_snapshot(self) -> None:
        """The replay as the store's newest snapshot, older ones deleted; never fails the answer being made."""
        if self.engine is None or self._replay is None:
            return
        s = model_snapshots_table.c
        try:
            data = model_snapshot.encode(self._replay.parts())
            with self.engine.begin() as conn:
                conn.execute(
                    model_snapshots_table.insert().values(
                        format=model_snapshot.FORMAT,
                        events=self._seen,
                        last_event_id=self._since,
                        taken_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                        data=data,
                    )
                )
                conn.execute(model_snapshots_table.delete().where(s.last_event_id < self._since))
        except (SQLAlchemyError, OSError, ValueError, TypeError) as error:
            # tried again only once as many more events came as a snapshot would wait for: a store this process
            # cannot write to (a read-only role) must not cost every answer a failed write
            log.warning("the model's snapshot could not be written (%s): a restart replays more events", error)
        else:
            self.snapshots_written += 1
        self._snapshot_seen = self._seen

    def _read(self, conn: Connection, where) -> list[CompactEvent]:
        e = events_table
        # the payload only where the compact column is missing (a row stored before migration 0009, or an event it
        # could not be built for)
        payload = case((e.c.marquez.is_(None), e.c.payload), else_=None)
        packed = case((e.c.marquez.is_(None), e.c.packed), else_=None)
        query = select(e.c.id, e.c.event_time, e.c.marquez, payload, packed)
        if where is not None:
            query = query.where(where)
        return [
            CompactEvent.of_row(
                event_id, time or "", marquez, self.packer.text(conn, event_id, text, blob) if marquez is None else None
            )
            for event_id, time, marquez, text, blob in conn.execute(query)
        ]
