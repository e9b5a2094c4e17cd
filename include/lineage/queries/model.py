"""Marquez's model of the events: the part of Marquez's database its lineage graph reads, rebuilt from the stored
events, whatever the closure table holds (``marquez.py`` answers ``GET /api/v1/lineage`` from it)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import case, func, select
from sqlalchemy.engine import Connection

from include.core.collector import cyclic_gc_paused, set_apart_what_is_alive
from include.lineage.store.marquez_view import CompactEvent, Ref
from include.lineage.store.packing import PayloadPacker
from include.lineage.store.schema import events_table

DONE = frozenset({"COMPLETE", "FAIL", "ABORT"})  # OpenLineageDao.getRunState(...).isDone()
_TERMINAL = frozenset({"COMPLETE", "FAIL"})  # LineageEvent.isTerminalEvent()


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
    model; a late one (earlier than the newest replayed) or a deleted one (``lineage prune``) replays every event
    again, from the compact events kept in memory. Each event is read from its ``marquez`` column (its payload only
    for rows stored before that column). One per ``LineageQueries``; locked, as one may answer several requests at
    once."""

    def __init__(self, packer: PayloadPacker):
        self.packer = packer  # a row without the compact column is read from its (packed) payload
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._replay: _Replay | None = None
        self._compact: dict[int, CompactEvent] = {}
        self.full_replays = 0  # how many times every event was replayed (the cost a late event brings)

    def model(self, conn: Connection) -> MarquezModel:
        e = events_table
        key = tuple(conn.execute(select(func.count(), func.max(e.c.id))).one())
        with self._lock, cyclic_gc_paused():
            if self._replay is not None and self._key == key:
                return self._replay.model
            known = self._compact
            since = max(known) if known else 0
            new = self._read(conn, e.c.id > since)
            known.update((event.id, event) for event in new)
            # rows stored since the count was taken are not in it; anything else the count disagrees with (a row
            # deleted, or one committed late under a lower id) means the kept events are not the store's: read all
            if len(known) - sum(1 for event in new if event.id > (key[1] or 0)) != key[0]:
                known.clear()
                known.update((event.id, event) for event in self._read(conn, None))
                self._replay = None
            new.sort(key=lambda c: (c.time, c.id))
            if self._replay is not None and self._replay.follows(new):
                # onto a copy: a request still walking the model it was given must not see it change under it
                self._replay.model = self._replay.model.copy()
                self._replay.run(new)
            else:
                self._replay = _Replay(MarquezModel())
                self._replay.run(sorted(known.values(), key=lambda c: (c.time, c.id)))
                self.full_replays += 1
                set_apart_what_is_alive()  # the model is kept: later collections need not walk it
            self._key = key
            return self._replay.model

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
