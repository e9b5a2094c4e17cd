"""What an ingest did (``LineageStore.ingest``, ``ingest_files``): events read and new, the runs they went to, and the
facts of the runs it made, from which ``lineage ingest`` tells a run holding two runs' events without reading them
back (``queries.runs.merged_runs``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from include.lineage.events import dag_run_identity

if TYPE_CHECKING:
    from include.lineage.store.ingest import EventIngest


@dataclass
class IngestResult:
    read: int = 0
    new: int = 0
    new_run_ids: set[str] = field(default_factory=set)
    # Runs this ingest made, with what each of their events says of the run being one (its type, its time, the
    # Airflow DAG run it names): all their events are in hand, so ``lineage ingest`` tells whether one holds two
    # runs without unpacking their stored events again (``queries.runs.merged_runs``).
    created_runs: dict[str, list[tuple[str | None, str, tuple | None]]] = field(default_factory=dict)

    @property
    def duplicates(self) -> int:
        return self.read - self.new

    def __iadd__(self, other: IngestResult) -> IngestResult:
        self.read += other.read
        self.new += other.new
        for run_id in other.new_run_ids - set(other.created_runs):
            # a run made earlier in this ingest got more events, stored beside the earlier ones: its facts in hand
            # are not all of it any more, so the store is asked instead
            self.created_runs.pop(run_id, None)
        self.new_run_ids |= other.new_run_ids
        self.created_runs.update(other.created_runs)
        return self

    def note(self, ingest: EventIngest) -> None:
        """A new event stored: its run counted, and its facts kept when this ingest made the run."""
        if not ingest.run_id:
            return
        self.new_run_ids.add(ingest.run_id)
        if ingest.created_run or ingest.run_id in self.created_runs:
            run_facets = (ingest.event.get("run") or {}).get("facets") or {}
            fact = (ingest.event.get("eventType"), ingest.time, dag_run_identity(run_facets))
            self.created_runs.setdefault(ingest.run_id, []).append(fact)
