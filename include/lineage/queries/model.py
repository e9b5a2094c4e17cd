"""Marquez's model of the events: the part of Marquez's database its lineage graph reads, rebuilt from the stored
events, whatever the closure table holds (``marquez.py`` answers ``GET /api/v1/lineage`` from it)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from include.lineage.store.schema import events_table

Ref = tuple[str, str]  # (namespace, name) of a dataset or a job
DatasetItem = tuple[str, str, tuple[Ref, ...]]  # (namespace, name, the names of its symlinks facet)

DONE = frozenset({"COMPLETE", "FAIL", "ABORT"})  # OpenLineageDao.getRunState(...).isDone()
_TERMINAL = frozenset({"COMPLETE", "FAIL"})  # LineageEvent.isTerminalEvent()


def _dataset_item(item: dict) -> DatasetItem:
    identifiers = ((item.get("facets") or {}).get("symlinks") or {}).get("identifiers") or []
    links = tuple(
        (i["namespace"], i["name"]) for i in identifiers if isinstance(i, dict) and i.get("namespace") and i.get("name")
    )
    return item["namespace"], item["name"], links


@dataclass(frozen=True)
class CompactEvent:
    """What Marquez's model keeps of one event: the job, run, type, datasets (with their symlinks)."""

    time: str
    id: int
    job: Ref | None
    run: str | None
    event_type: str
    streaming: bool
    location: str | None
    inputs: tuple[DatasetItem, ...]
    outputs: tuple[DatasetItem, ...]
    dataset: DatasetItem | None

    @classmethod
    def of(cls, event_id: int, time: str, payload: str) -> CompactEvent:
        event = json.loads(payload)
        job = event.get("job") if isinstance(event.get("job"), dict) else None
        facets = (job or {}).get("facets") or {}
        run = event.get("run") if isinstance(event.get("run"), dict) else None
        return cls(
            time=time,
            id=event_id,
            job=(job["namespace"], job["name"]) if job else None,
            run=run.get("runId") if run else None,
            event_type=(event.get("eventType") or "").upper(),
            streaming=((facets.get("jobType") or {}).get("processingType") or "").upper() == "STREAMING",
            location=(facets.get("sourceCodeLocation") or {}).get("url"),
            inputs=tuple(_dataset_item(d) for d in event.get("inputs") or []),
            outputs=tuple(_dataset_item(d) for d in event.get("outputs") or []),
            dataset=_dataset_item(event["dataset"]) if isinstance(event.get("dataset"), dict) else None,
        )


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

    def run(self, compact_events: Iterable[CompactEvent]) -> MarquezModel:
        for order, event in enumerate(compact_events):
            self.apply(event, order)
        return self.model

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
    """The events replayed into ``MarquezModel``, kept until the store has other events; a new event is compacted
    alone, not the whole store again. One per ``LineageQueries``; locked, as one may answer several requests at
    once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._model: MarquezModel | None = None
        self._compact: dict[int, CompactEvent] = {}

    def model(self, conn: Connection) -> MarquezModel:
        e = events_table
        key = tuple(conn.execute(select(func.count(), func.max(e.c.id))).one())
        with self._lock:
            if self._model is not None and self._key == key:
                return self._model
            known = self._compact
            query = select(e.c.id, e.c.event_time, e.c.payload)
            since = max(known) if known else 0
            for row in conn.execute(query.where(e.c.id > since)):
                known[row.id] = CompactEvent.of(row.id, row.event_time or "", row.payload)
            if len(known) != key[0]:  # not only new rows: read them all again
                known.clear()
                for row in conn.execute(query):
                    known[row.id] = CompactEvent.of(row.id, row.event_time or "", row.payload)
            self._model = MarquezModel.replay(sorted(known.values(), key=lambda c: (c.time, c.id)))
            self._key = key
            return self._model
