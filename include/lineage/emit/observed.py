"""What a Spark task really read and wrote: its applications' OpenLineage listener events, rolled up to the task.

A task's lineage is observed, not declared. The OpenLineage Spark listener names every dataset a Spark application
reads or writes; the job itself records, in its report, what Spark cannot see (a model saved by plain Python, the
tables a DataFrame built in the driver came from, the columns a fitted model really used). The DAG file's
``inputs``/``outputs`` (or a stock operator's ``inlets``/``outlets``) are what the author *expects*: compared with
what ran (:func:`drift`), never used as the answer.

Roll-up rules, each from what the listener emits on this stack (docs/lineage.md, "Where each facet comes from"):

- The events of a task are its applications' (an event whose ``parent`` run is the task's run) and their SQL
  executions' (whose ``parent`` is one of those applications). A project operator's outbox holds only its own.
- An input counts when some event names it with facets: a dataset named bare is the listing of a folder that Spark
  did before reading the file in it (``map_partitions_parallel_collection``), or a partial plan of a read that a
  later event names in full.
- An output counts wherever it is named, DDL included (``create_table`` names the table it made).
- A dataset the task writes is not also its input: the listener names a MERGE's target, and a job's check of what
  it already loaded, as reads of the table being written; at task level that is a self-loop, not an upstream.
- Iceberg's own files (``<table>/data/…``, ``<table>/metadata/…``) are not datasets.
- Column lineage is the union of the listener's ``columnLineage`` over the task's events, renamed to the task's
  datasets; input fields on a dataset that is not an input of the task (the table itself, per the rule above) are
  left out. Where the job reports the lineage of an output column, the job's word wins: it knows what a DataFrame
  built in the driver, or a fitted model, was computed from, and the listener does not (it maps such columns to
  themselves).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from include.core import naming, settings
from include.core.contract import JobReport

log = logging.getLogger(__name__)

PARENT_RUN_ID_PROPERTY = (
    "spark.openlineage.parentRunId"  # set by the provider ([openlineage] spark_inject_parent_job_info)
)
# What a stock operator's extractor reads of the listener's shared file when it knows no offset: the tail a task's
# applications can have written (a few hundred events of a few KiB each), not the file's whole history.
TAIL_BYTES = 64 * 1024 * 1024

# (input key, input column, transformation type, subtype)
ColumnSource = tuple[str, str, str, str]


@dataclass
class Observed:
    """A task's datasets as its applications and its job saw them. Keys are the project's lineage keys (a table
    name, ``model:<name>``, an absolute path or a URI); facets are the listener's last facets of each."""

    inputs: dict[str, dict] = field(default_factory=dict)
    outputs: dict[str, dict] = field(default_factory=dict)
    columns: dict[str, dict[str, list[ColumnSource]]] = field(default_factory=dict)
    applications: int = 0
    events: int = 0

    def input_keys(self) -> list[str]:
        """In the order they were first seen (the listener's, then the report's): a run's first output is its main
        one (the taxi load's raw table before its quarantine)."""
        return list(self.inputs)

    def output_keys(self) -> list[str]:
        return list(self.outputs)


def _location(namespace: str, name: str) -> str:
    """A dataset's physical location as one string: an absolute local path, or ``scheme://bucket/key``."""
    if namespace == "file":
        return name
    if "://" in namespace:
        return f"{namespace.rstrip('/')}/{name.lstrip('/')}"
    return f"{namespace}/{name}"


def _local(uri: str) -> str:
    return uri.removeprefix("file://") if uri.startswith("file://") else uri


def dataset_key(namespace: str, name: str, paths: settings.Paths | None = None) -> str | None:
    """The project's lineage key of a dataset the listener named, or None for what is not a dataset (Iceberg's own
    data and metadata files). One identity: a key resolved back with ``naming.dataset_for_key`` gives this dataset."""
    location = _location(namespace, name).rstrip("/")
    catalog = settings.CatalogSettings.current()
    warehouse = _local(catalog.warehouse).rstrip("/")
    if location.startswith(warehouse + "/"):
        parts = location[len(warehouse) + 1 :].split("/")
        if len(parts) > 2:
            return None  # <namespace>/<table>/data/… or …/metadata/…: the table's files
        if len(parts) == 2 and parts[0] == settings.ICEBERG_NAMESPACE:
            return parts[1]
        return location
    models = naming.models_location(paths)  # this machine's var/models, or the object store's (PIPELINE_MODELS_URI)
    if location.startswith(models + "/"):
        return naming.model_key(location[len(models) + 1 :].split("/")[0])
    return location


def _parent_run_id(event: dict) -> str | None:
    parent = ((event.get("run") or {}).get("facets") or {}).get("parent") or {}
    return (parent.get("run") or {}).get("runId")


def task_events(events: Iterable[dict], task_run_id: str | None) -> list[dict]:
    """The events of the applications whose parent is ``task_run_id`` and of their SQL executions (all of them when
    ``task_run_id`` is None: an outbox holds one task's applications only)."""
    events = list(events)
    if task_run_id is None:
        return events
    applications = {e["run"]["runId"] for e in events if _parent_run_id(e) == task_run_id}
    return [e for e in events if _parent_run_id(e) == task_run_id or _parent_run_id(e) in applications]


def _add_sources(sources: list[ColumnSource], input_fields, paths: settings.Paths) -> None:
    for source in input_fields if isinstance(input_fields, list) else []:
        if not isinstance(source, dict):
            continue
        source_key = dataset_key(str(source.get("namespace", "")), str(source.get("name", "")), paths)
        if source_key is None:
            continue
        for transformation in source.get("transformations") or [{"type": "DIRECT", "subtype": "IDENTITY"}]:
            item = (source_key, str(source.get("field")), transformation.get("type"), transformation.get("subtype"))
            if item not in sources:
                sources.append(item)


def _add_columns(observed: Observed, key: str, facet: dict, schema: dict, paths: settings.Paths) -> None:
    """One event's ``columnLineage`` of output ``key``. In an aggregation (the facet's dataset-level list has a
    ``GROUP_BY``), a column the facet names no input field for (a ``count(*)``) depends on what the whole dataset
    depends on: its grouping and filters. Elsewhere such a column is a literal of the job, drawn from no column."""
    fields = facet.get("fields")
    if not isinstance(fields, dict):
        return
    columns = observed.columns.setdefault(key, {})
    for column, entry in fields.items():
        _add_sources(columns.setdefault(column, []), (entry or {}).get("inputFields"), paths)
    whole: list[ColumnSource] = []
    _add_sources(whole, facet.get("dataset"), paths)
    if not any(source[3] == "GROUP_BY" for source in whole):
        return
    for column in [f.get("name") for f in schema.get("fields") or [] if isinstance(f, dict)]:
        if column and column not in fields:
            sources = columns.setdefault(column, [])
            sources.extend(source for source in whole if source not in sources)


def roll_up(events: Iterable[dict], task_run_id: str | None = None, paths: settings.Paths | None = None) -> Observed:
    """The task-level datasets and column lineage of a task's listener events (the module's rules)."""
    paths = paths or settings.Paths.current()
    observed = Observed()
    mine = task_events(events, task_run_id)
    observed.events = len(mine)
    run_ids = {e["run"]["runId"] for e in mine}
    observed.applications = len({e["run"]["runId"] for e in mine if _parent_run_id(e) not in run_ids})
    for event in mine:
        for dataset in event.get("inputs") or []:
            key = dataset_key(str(dataset.get("namespace", "")), str(dataset.get("name", "")), paths)
            if key is not None and dataset.get("facets"):
                observed.inputs.setdefault(key, {}).update(dataset["facets"])
        for dataset in event.get("outputs") or []:
            key = dataset_key(str(dataset.get("namespace", "")), str(dataset.get("name", "")), paths)
            if key is None:
                continue
            facets = dataset.get("facets") or {}
            observed.outputs.setdefault(key, {}).update({k: v for k, v in facets.items() if k != "columnLineage"})
            if isinstance(facets.get("columnLineage"), dict):
                schema = facets.get("schema") if isinstance(facets.get("schema"), dict) else {}
                _add_columns(observed, key, facets["columnLineage"], schema, paths)
    return observed


def with_report(observed: Observed, report: JobReport) -> Observed:
    """Add what the job recorded at run time (the keys of its report's ``inputs``/``outputs``, the files it measured
    or fingerprinted, its column lineage), then apply the rules that need the whole picture: no output is an input,
    no column source outside the inputs. (A load that finds its month already loaded reads the landed file's bytes to
    fingerprint it and no row through Spark: the file is still what it read.)"""
    for key in [*report.inputs, *report.input_metrics, *report.source_fingerprints]:
        observed.inputs.setdefault(key, {})
    for key in report.outputs:
        observed.outputs.setdefault(key, {})
    for output, columns in (report.column_lineage or {}).items():
        observed.outputs.setdefault(output, {})
        reported = observed.columns.setdefault(output, {})
        for column, sources in columns.items():
            reported[column] = [tuple(source) for source in sources]  # the job's word wins for this column
    for key in observed.outputs:
        observed.inputs.pop(key, None)
    for output, columns in list(observed.columns.items()):
        kept = {
            column: [source for source in sources if source[0] in observed.inputs]
            for column, sources in columns.items()
        }
        kept = {column: sources for column, sources in kept.items() if sources}
        if kept and output in observed.outputs:
            observed.columns[output] = kept
        else:
            del observed.columns[output]
    return observed


def read_event_lines(lines: Iterable[bytes | str], where: str) -> list[dict]:
    """The JSON events of the listener's lines; a torn or broken line is skipped (logged): it is the forwarder's and
    the store's to keep, not the extractor's to fail on."""
    events = []
    for number, line in enumerate(lines, 1):
        text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        if not text.strip():
            continue
        try:
            event = json.loads(text)
        except ValueError as error:
            log.warning(
                "lineage: %s line %d is not JSON (%s); left out of the task's observed lineage", where, number, error
            )
            continue
        if isinstance(event, dict) and isinstance(event.get("run"), dict) and "runId" in event["run"]:
            events.append(event)
    return events


def events_after(path: Path, offset: int | None) -> list[dict]:
    """The listener events appended to ``path`` since byte ``offset`` (None: its last ``TAIL_BYTES``)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return []
    start = max(0, size - TAIL_BYTES) if offset is None else min(offset, size)
    with path.open("rb") as stream:
        stream.seek(start)
        data = stream.read(size - start)
    lines = data.split(b"\n")
    if start > 0 and offset is None:
        lines = lines[1:]  # the first piece of a tail is a line's end
    return read_event_lines(lines[:-1] if not data.endswith(b"\n") else lines, str(path))


@dataclass(frozen=True)
class Drift:
    """Declared against observed, by dataset identity (``namespace``/``name``)."""

    declared_not_read: list[str]
    declared_not_written: list[str]
    read_not_declared: list[str]
    written_not_declared: list[str]

    def __bool__(self) -> bool:
        return any(
            (self.declared_not_read, self.declared_not_written, self.read_not_declared, self.written_not_declared)
        )


def _identity(key: str) -> tuple[str, str]:
    dataset_id, _ = naming.dataset_for_key(key)
    return dataset_id.namespace, dataset_id.name


def drift(declared_inputs: list[str], declared_outputs: list[str], observed: Observed) -> Drift:
    """What the DAG said the task reads and writes, against what it did (keys compared by dataset identity)."""

    def minus(first: list[str], second: list[str]) -> list[str]:
        seen = {_identity(key) for key in second}
        return sorted({key for key in first if _identity(key) not in seen})

    inputs, outputs = observed.input_keys(), observed.output_keys()
    return Drift(
        declared_not_read=minus(declared_inputs, inputs),
        declared_not_written=minus(declared_outputs, outputs),
        read_not_declared=minus(inputs, declared_inputs),
        written_not_declared=minus(outputs, declared_outputs),
    )
