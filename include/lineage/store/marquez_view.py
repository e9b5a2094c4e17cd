"""What Marquez's model keeps of one event (its job, run, type and datasets with their symlinks), written beside the
raw event at ingest (``lineage_events.marquez``) so that rebuilding the model reads a few hundred bytes an event
instead of parsing every stored payload again: at 10^5 events parsing the payloads was 72 % of the first
``GET /api/v1/lineage`` after a start. ``queries/model.py`` replays these into Marquez's terms."""

from __future__ import annotations

import json
from dataclasses import dataclass

from include.core.jsontext import loads

Ref = tuple[str, str]  # (namespace, name) of a dataset or a job
DatasetItem = tuple[str, str, tuple[Ref, ...]]  # (namespace, name, the names of its symlinks facet)


def _dataset_item(item: dict) -> DatasetItem:
    identifiers = ((item.get("facets") or {}).get("symlinks") or {}).get("identifiers") or []
    links = tuple(
        (i["namespace"], i["name"]) for i in identifiers if isinstance(i, dict) and i.get("namespace") and i.get("name")
    )
    return item["namespace"], item["name"], links


def _items(value: list) -> tuple[DatasetItem, ...]:
    return tuple((namespace, name, tuple(map(tuple, links))) for namespace, name, links in value)


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
    def of_event(cls, event_id: int, time: str, event: dict) -> CompactEvent:
        """Of a parsed event (a stored payload, or the event being ingested)."""
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

    @classmethod
    def of_row(cls, event_id: int, time: str, marquez: str | None, payload: str | None) -> CompactEvent:
        """Of a stored row: its ``marquez`` column, or its payload for a row stored before that column (0009)."""
        if marquez is None:
            return cls.of_event(event_id, time, loads(payload or "{}"))
        job, run, event_type, streaming, location, inputs, outputs, dataset = loads(marquez)
        return cls(
            time=time,
            id=event_id,
            job=tuple(job) if job else None,
            run=run,
            event_type=event_type,
            streaming=bool(streaming),
            location=location,
            inputs=_items(inputs),
            outputs=_items(outputs),
            dataset=_items([dataset])[0] if dataset else None,
        )

    def column(self) -> str:
        """The ``marquez`` column's text: everything but the id and time, which the row has already."""
        return json.dumps(
            [
                self.job,
                self.run,
                self.event_type,
                int(self.streaming),
                self.location,
                self.inputs,
                self.outputs,
                self.dataset,
            ],
            separators=(",", ":"),
        )


def marquez_column(event: dict) -> str | None:
    """The ``marquez`` column of an event being stored; None for one whose datasets Marquez could not read (no
    namespace or name: the schema check lets none through, but ingest must never fail on this column), which the
    model then reads from the payload, as it did before the column."""
    try:
        return CompactEvent.of_event(0, "", event).column()
    except (KeyError, TypeError, AttributeError):
        return None
