"""OpenLineage events as the store reads them: the shape check, times, dataset and job keys, and event files.

Lowest layer of the lineage package with ``errors``: the store, the HTTP API and the consumer all check events here.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from include.core import settings
from include.lineage.errors import InvalidEventError, UnreadableEventFileError


def utc_time(value: str) -> str:
    """An ISO-8601 time as fixed-width UTC (``2025-01-01T00:00:00.000000Z``): string order is time order."""
    text = value.strip()
    if "." in text:  # Python parses at most 6 fractional digits; Java emits up to 9
        head, _, tail = text.partition(".")
        digits = len(tail) - len(tail.lstrip("0123456789"))
        text = f"{head}.{tail[: min(digits, 6)]}{tail[digits:]}"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def dataset_key(namespace: str, name: str) -> str:
    return f"dataset:{namespace}:{name}"


def job_key(namespace: str, name: str) -> str:
    return f"job:{namespace}:{name}"


def dataset_aliases(namespace: str, name: str, facets: dict) -> set[str]:
    """Names a user may type for a dataset: ``namespace:name``, a URL as one string, its symlinked table names."""
    aliases = {f"{namespace}:{name}"}
    if "://" in namespace and name.startswith("/"):
        aliases.add(namespace + name)
    if namespace == "file":
        aliases.add(name)
    for identifier in (facets.get("symlinks") or {}).get("identifiers") or []:
        if identifier.get("name"):
            aliases.add(identifier["name"])
    return aliases


def dataset_label(namespace: str, name: str, facets: dict) -> str:
    for identifier in (facets.get("symlinks") or {}).get("identifiers") or []:
        if identifier.get("type", "TABLE") == "TABLE" and identifier.get("name"):
            return identifier["name"]
    if "://" in namespace and name.startswith("/"):
        return namespace + name
    return name if namespace == "file" else f"{namespace}:{name}"


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def event_dedup_key(lineage_event: dict) -> str:
    run_id = (lineage_event.get("run") or {}).get("runId")
    if run_id:
        return f"{run_id}|{lineage_event.get('eventType', '')}|{utc_time(lineage_event['eventTime'])}"
    return "sha256:" + digest(lineage_event)


def check_event(lineage_event) -> None:
    """Raise InvalidEventError unless this looks like an OpenLineage run, job or dataset event."""
    if not isinstance(lineage_event, dict):
        raise InvalidEventError(f"an OpenLineage event is a JSON object, not {type(lineage_event).__name__}")
    if not isinstance(lineage_event.get("eventTime"), str):
        raise InvalidEventError("no eventTime")
    try:
        utc_time(lineage_event["eventTime"])
    except ValueError:
        raise InvalidEventError(f"eventTime {lineage_event['eventTime']!r} is not an ISO-8601 time") from None
    if "run" in lineage_event:
        run = lineage_event.get("run")
        if not isinstance(run, dict) or not isinstance(run.get("runId"), str) or not run["runId"]:
            raise InvalidEventError("run without a runId")
        if not isinstance(lineage_event.get("job"), dict):
            raise InvalidEventError("run event without a job")
    if "job" not in lineage_event and "dataset" not in lineage_event:
        raise InvalidEventError("neither a run, a job nor a dataset: not an OpenLineage event")
    job = lineage_event.get("job")
    if job is not None and not (isinstance(job, dict) and job.get("namespace") and job.get("name")):
        raise InvalidEventError("job without a namespace and name")
    for side in ("inputs", "outputs"):
        datasets = lineage_event.get(side) or []
        if not isinstance(datasets, list):
            raise InvalidEventError(f"{side} is not a list")
        for dataset in datasets:
            if not (isinstance(dataset, dict) and dataset.get("namespace") and dataset.get("name")):
                raise InvalidEventError(f"an entry of {side} has no namespace and name")


@dataclass(frozen=True)
class SourcedEvent:
    event: dict
    source: str  # file:line, or where it came from


def read_event_file(path: Path | str) -> list[SourcedEvent]:
    """Events of a JSON-lines file (``-`` is stdin), or of a file holding one JSON event or a list of them.

    Every line is checked before anything is stored; a bad one raises UnreadableEventFileError naming file and line."""
    name = str(path)
    try:
        text = sys.stdin.read() if name == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UnreadableEventFileError(name, None, f"cannot read: {error}") from None
    label = "<stdin>" if name == "-" else name
    stripped = text.strip()
    if stripped.startswith("[") or (stripped.startswith("{") and "\n" in stripped and _whole_json(stripped)):
        try:
            document = json.loads(stripped)
        except ValueError as error:
            raise UnreadableEventFileError(label, error.lineno, f"not valid JSON ({error.msg})") from None
        items = document if isinstance(document, list) else [document]
        out = []
        for index, item in enumerate(items, start=1):
            try:
                check_event(item)
            except InvalidEventError as error:
                raise UnreadableEventFileError(label, None, f"event {index}: {error}") from None
            out.append(SourcedEvent(item, f"{label}#{index}"))
        return out
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as error:
            raise UnreadableEventFileError(
                label, number, f"not valid JSON ({error.msg} at column {error.colno})"
            ) from None
        try:
            check_event(item)
        except InvalidEventError as error:
            raise UnreadableEventFileError(label, number, str(error)) from None
        out.append(SourcedEvent(item, f"{label}:{number}"))
    return out


def _whole_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def discover_event_files(paths: settings.Paths | None = None) -> list[Path]:
    """Every event file under ``var/lineage/``: the Airflow events, the Spark listener's, and spooled events."""
    paths = paths or settings.Paths.current()
    if not paths.lineage.exists():
        return []
    files = sorted(p for p in paths.lineage.rglob("*.jsonl") if paths.job_reports not in p.parents)
    if paths.lineage_spool.exists():
        files += sorted(p for p in paths.lineage_spool.glob("*.json"))
    return files


def load_events(*files: Path) -> list[dict]:
    """Every event of the given JSON-lines files that exist, in file order (``lineage validate``, the tests)."""
    events = []
    for path in map(Path, files):
        if path.exists():
            events.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return events
