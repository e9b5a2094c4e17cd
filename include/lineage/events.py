"""OpenLineage events as the store reads them: the shape check, times, an event's identity, node ids (Marquez's
``dataset:<namespace>:<name>`` and their parsing), and event files.

Lowest layer of the lineage package with ``errors``: the store, the HTTP API and the consumer all check events here.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import shutil
import sys
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from include.core import settings
from include.core.jsontext import loads, sorted_compact
from include.lineage.errors import InvalidEventError, LineageError, UnreadableEventFileError


class TimeOutOfRangeError(ValueError):
    """An ISO-8601 time whose UTC instant is outside the years 1 to 9999."""


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
    try:
        utc = parsed.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+14:00 is before the first representable UTC instant
        raise TimeOutOfRangeError(f"{value!r} is outside the years 1 to 9999 in UTC") from None
    # Not strftime: its %Y does not pad years before 1000 to four digits on Linux, and the width is the order
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S.%f}Z"


def dataset_key(namespace: str, name: str) -> str:
    """Marquez's node id of a dataset: for display and for Marquez clients. Two datasets may share one (``pg://h:5432``
    + ``db.t`` and ``pg://h`` + ``5432:db.t``): the store keys nodes by ``(kind, namespace, name)``, never by this."""
    return f"dataset:{namespace}:{name}"


def job_key(namespace: str, name: str) -> str:
    return f"job:{namespace}:{name}"


class NodeRef(NamedTuple):
    """A dataset or job as a node id names it; equal to the tuple ``(kind, namespace, name)``."""

    kind: str  # dataset | job
    namespace: str
    name: str


class FieldRef(NamedTuple):
    """A dataset's column as a ``datasetField:<namespace>:<name>:<field>`` id names it."""

    kind: str  # datasetField
    namespace: str
    name: str
    field: str

    @property
    def dataset(self) -> NodeRef:
        return NodeRef("dataset", self.namespace, self.name)


MAX_NODE_ID_LENGTH = 4096  # longer than any id of the store's columns (namespace 1024, name 2048, field 512)
_NODE_ID_PARTS = {"dataset": 3, "job": 3, "datasetField": 4}  # Marquez: asDatasetId, asJobId, asDatasetFieldId
_NODE_ID_PREFIX = re.compile(r"(dataset|datasetField|job|run):")  # NodeId.ID_PATTERN
_NODE_ID_SPLIT = re.compile(r"[:#]")  # NodeId.parts: ID_DELIM + "|" + VERSION_DELIM
_NODE_ID_SEPARATOR = re.compile(r":(?!//|\d)")  # a colon not of a URI's "scheme://" nor of a "host:port"
_JAVA_LINE_TERMINATORS = frozenset("\n\r\u0085\u2028\u2029")  # what Java's "." does not match


def parse_node_id(value: str) -> NodeRef | FieldRef:
    """``dataset:<namespace>:<name>``, ``job:<namespace>:<name>`` or ``datasetField:<namespace>:<name>:<field>``
    split as Marquez's ``NodeId.parts()`` does (``api/src/main/java/marquez/service/models/NodeId.java``).

    Split on ``:`` and ``#``; when that gives exactly the parts the kind has, they are the answer; when it gives
    more, split instead on the colons not followed by ``//`` or a digit, left to right, the last part taking the
    rest: ``dataset:postgres://host:5432:db.schema.table`` is (``postgres://host:5432``, ``db.schema.table``). A name
    that starts with a digit or ``//`` after such a namespace cannot be told apart (Marquez cannot either). Anything
    else raises LineageError saying why."""
    if not isinstance(value, str) or not value:
        raise LineageError("an empty node id: expected dataset:<namespace>:<name> or job:<namespace>:<name>")
    shown = value if len(value) <= 80 else value[:77] + "..."
    if len(value) > MAX_NODE_ID_LENGTH:
        raise LineageError(f"node id {shown!r} is {len(value):,} characters long (at most {MAX_NODE_ID_LENGTH:,})")
    prefix = _NODE_ID_PREFIX.match(value)
    if prefix is None or _JAVA_LINE_TERMINATORS.intersection(value):
        raise LineageError(
            f"node id {shown!r} is not dataset:<namespace>:<name>, job:<namespace>:<name> or "
            "datasetField:<namespace>:<name>:<field>"
        )
    kind = prefix.group(1)
    if kind == "run":
        raise LineageError(f"node id {shown!r} names a run: lineage is asked of a dataset, a job or a column")
    expected = _NODE_ID_PARTS[kind]
    parts = _NODE_ID_SPLIT.split(value)
    while parts and not parts[-1]:
        parts.pop()  # Java's String.split drops trailing empty strings
    if len(parts) < expected:
        raise LineageError(f"node id {shown!r} has fewer than the {expected} parts of a {kind} id")
    if len(parts) > expected:
        parts, start = [], 0
        separators = _NODE_ID_SEPARATOR.finditer(value)
        for _ in range(expected - 1):
            separator = next(separators, None)
            if separator is None:
                raise LineageError(
                    f"node id {shown!r} cannot be split into {expected} parts: after the namespace's scheme:// and "
                    "port, a colon must separate it from the name (does the name start with a digit?)"
                )
            parts.append(value[start : separator.start()])
            start = separator.end()
        parts.append(value[start:])
    if parts[0] != kind:  # Marquez would take "dataset:5ns" for the prefix and go on with the wrong parts
        raise LineageError(f"node id {shown!r}: a namespace that starts with a digit or // cannot be told apart")
    if not all(parts[1:]):
        raise LineageError(f"node id {shown!r}: its namespace, name and field cannot be empty")
    return FieldRef(*parts) if kind == "datasetField" else NodeRef(*parts)


# Iceberg's Spark catalog reads `db.table.branch_<ref>`, `.tag_<ref>`, `.snapshot_id_<id>` and `.at_timestamp_<ms>` as
# the table at that ref (SparkCatalog's BRANCH_PREFIX, TAG_PREFIX, SNAPSHOT_ID, AT_TIMESTAMP), and the OpenLineage
# Spark listener names a table read or written that way with the suffix in its `symlinks` facet (a write-audit-publish
# audit reads `…yellow_taxi_raw.branch_audit_…`). The table is the name without it.
_ICEBERG_REF_SUFFIX = re.compile(r"\.(?:branch_|tag_|snapshot_id_|at_timestamp_)[^.]+$")


def table_of_symlink(name: str) -> str:
    """The Iceberg table a ``symlinks`` identifier names, without a branch, tag or time-travel suffix."""
    return _ICEBERG_REF_SUFFIX.sub("", name) if name.count(".") >= 2 else name


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
            aliases.add(table_of_symlink(identifier["name"]))
    return aliases


def dataset_label(namespace: str, name: str, facets: dict) -> str:
    for identifier in (facets.get("symlinks") or {}).get("identifiers") or []:
        if identifier.get("type", "TABLE") == "TABLE" and identifier.get("name"):
            return table_of_symlink(identifier["name"])
    if "://" in namespace and name.startswith("/"):
        return namespace + name
    return name if namespace == "file" else f"{namespace}:{name}"


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def canonical_json(lineage_event: dict) -> str:
    """The event's one spelling: keys sorted, no spaces, non-ASCII kept (the standard library's, written faster)."""
    return sorted_compact(lineage_event)


def event_dedup_key(lineage_event: dict) -> str:
    """An event's identity: the SHA-256 of its canonical JSON. Only the same event again is a duplicate; two events
    of one run with the same type and time that differ in anything (a dataset, a facet, how the time is written)
    are both kept and merged into their run."""
    return dedup_key_of(canonical_json(lineage_event))


def dag_run_identity(run_facets: dict) -> tuple | None:
    """The Airflow DAG run an event's run facets name (``airflowDagRun``, else ``airflow``): its (field, value)
    pairs of dag id, logical date, clear number and run id, those it has; None when it names none (or the facets are
    not an object: what the spec refuses is never read)."""
    if not isinstance(run_facets, dict):
        return None
    for facet in ("airflowDagRun", "airflow"):
        dag_run = run_facets[facet].get("dagRun") if isinstance(run_facets.get(facet), dict) else None
        if isinstance(dag_run, dict) and dag_run:
            return tuple(
                (key, str(dag_run[key]))
                for key in ("dag_id", "logical_date", "clear_number", "run_id")
                if dag_run.get(key) is not None
            )
    return None


def dedup_key_of(canonical: str) -> str:
    """``event_dedup_key`` of an event whose canonical JSON is ``canonical``."""
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


EVENT_TYPES = frozenset({"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"})  # OpenLineage.json, RunEvent
FACET_KEYS = {"run": ("facets",), "job": ("facets",), "dataset": ("facets", "inputFacets", "outputFacets")}


def _check_facets(owner: dict, keys: tuple[str, ...], where: str) -> None:
    """Facets are a JSON object of JSON objects (OpenLineage.json: ``additionalProperties`` of each ``*Facets``)."""
    for key in keys:
        facets = owner.get(key)
        if facets is None:
            continue
        if not isinstance(facets, dict):
            raise InvalidEventError(f"{where}.{key} is a {type(facets).__name__}, not an object of facets")
        for name, facet in facets.items():
            if not isinstance(facet, dict):
                raise InvalidEventError(f"{where}.{key}.{name} is a {type(facet).__name__}, not a facet object")


def _check_read_facets(dataset: dict, where: str) -> None:
    """The dataset facets whose insides the store reads (aliases and labels from ``symlinks``, the schema, column
    edges from ``columnLineage``) have the shapes their OpenLineage facet schemas give, so that ingest never meets a
    number where a name belongs."""
    facets = dataset.get("facets") or {}
    identifiers = (facets.get("symlinks") or {}).get("identifiers")
    for index, identifier in enumerate(_objects(identifiers, f"{where}.facets.symlinks.identifiers")):
        for key in ("namespace", "name", "type"):
            _check_optional_string(identifier.get(key), f"{where}.facets.symlinks.identifiers[{index}].{key}")
    _objects((facets.get("schema") or {}).get("fields"), f"{where}.facets.schema.fields")
    fields = (facets.get("columnLineage") or {}).get("fields")
    if fields is None:
        return
    if not isinstance(fields, dict):
        raise InvalidEventError(f"{where}.facets.columnLineage.fields is a {type(fields).__name__}, not an object")
    for field, spec in fields.items():
        at = f"{where}.facets.columnLineage.fields.{field}"
        if not isinstance(spec, dict):
            raise InvalidEventError(f"{at} is a {type(spec).__name__}, not an object")
        for index, input_field in enumerate(_objects(spec.get("inputFields"), f"{at}.inputFields")):
            for key in ("namespace", "name", "field"):
                _check_optional_string(input_field.get(key), f"{at}.inputFields[{index}].{key}")


# The run and job facet values the store keeps in columns of their own (include/lineage/store/ingest.py), each a
# string when present; every object on the way to it an object.
READ_FACET_STRINGS = {
    "run": (
        ("parent", "run", "runId"),
        ("parent", "root", "run", "runId"),
        ("errorMessage", "message"),
        ("nominalTime", "nominalStartTime"),
        ("nominalTime", "nominalEndTime"),
    ),
    "job": (("sourceCode", "sourceCode"), ("sourceCodeLocation", "version")),
}


def _check_read_strings(facets: dict, kind: str, where: str) -> None:
    for path in READ_FACET_STRINGS[kind]:
        value, at = facets, f"{where}.facets"
        for key in path:
            if not isinstance(value, dict):
                raise InvalidEventError(f"{at} is a {type(value).__name__}, not an object")
            value, at = value.get(key), f"{at}.{key}"
            if value is None:
                break
        _check_optional_string(value, at)


def _objects(value, what: str) -> list:
    """``value`` as a list of JSON objects (None: none); InvalidEventError naming ``what`` otherwise."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise InvalidEventError(f"{what} is not a list of objects")
    return value


def _check_optional_string(value, what: str) -> None:
    if value is not None and not isinstance(value, str):
        raise InvalidEventError(f"{what} is a {type(value).__name__}, not a string")


def _check_name(value, what: str) -> None:
    """A name is a string; OpenLineage.json gives it no least length, and Marquez keeps an empty one too."""
    if not isinstance(value, str):
        raise InvalidEventError(f"{what} must be a string")


def check_event(lineage_event) -> None:
    """Raise InvalidEventError unless this is shaped like an OpenLineage run, job or dataset event: the fields the
    store reads have the types OpenLineage.json gives them (strings, lists, objects of facet objects), so no stored
    event can make a later read fail."""
    if not isinstance(lineage_event, dict):
        raise InvalidEventError(f"an OpenLineage event is a JSON object, not {type(lineage_event).__name__}")
    if not isinstance(lineage_event.get("eventTime"), str):
        raise InvalidEventError("no eventTime")
    try:
        utc_time(lineage_event["eventTime"])
    except TimeOutOfRangeError as error:
        raise InvalidEventError(f"eventTime {error}") from None
    except ValueError:
        raise InvalidEventError(f"eventTime {lineage_event['eventTime']!r} is not an ISO-8601 time") from None
    _check_optional_string(lineage_event.get("producer"), "producer")  # kept with a dataset version's schema
    event_type = lineage_event.get("eventType")
    if event_type is not None and (not isinstance(event_type, str) or event_type not in EVENT_TYPES):
        raise InvalidEventError(f"eventType {event_type!r} is not one of {', '.join(sorted(EVENT_TYPES))}")
    if "run" in lineage_event:
        run = lineage_event.get("run")
        if not isinstance(run, dict) or not isinstance(run.get("runId"), str) or not run["runId"]:
            raise InvalidEventError("run without a runId")
        if not isinstance(lineage_event.get("job"), dict):
            raise InvalidEventError("run event without a job")
        _check_facets(run, FACET_KEYS["run"], "run")
        _check_read_strings(run.get("facets") or {}, "run", "run")
    if "job" not in lineage_event and "dataset" not in lineage_event:
        raise InvalidEventError("neither a run, a job nor a dataset: not an OpenLineage event")
    job = lineage_event.get("job")
    if job is not None:
        if not isinstance(job, dict):
            raise InvalidEventError("job is not an object")
        _check_name(job.get("namespace"), "job.namespace")
        _check_name(job.get("name"), "job.name")
        _check_facets(job, FACET_KEYS["job"], "job")
        _check_read_strings(job.get("facets") or {}, "job", "job")
    if isinstance(lineage_event.get("dataset"), dict):
        _check_facets(lineage_event["dataset"], FACET_KEYS["dataset"], "dataset")
        _check_read_facets(lineage_event["dataset"], "dataset")
    for side in ("inputs", "outputs"):
        datasets = lineage_event.get(side) or []
        if not isinstance(datasets, list):
            raise InvalidEventError(f"{side} is not a list")
        for index, dataset in enumerate(datasets):
            if not isinstance(dataset, dict):
                raise InvalidEventError(f"{side}[{index}] is not an object")
            _check_name(dataset.get("namespace"), f"{side}[{index}].namespace")
            _check_name(dataset.get("name"), f"{side}[{index}].name")
            _check_facets(dataset, FACET_KEYS["dataset"], f"{side}[{index}]")
            _check_read_facets(dataset, f"{side}[{index}]")


@dataclass(frozen=True)
class SourcedEvent:
    event: dict  # what the store reads
    source: str  # file:line, or where it came from
    # ``lineage serve``: the event as received when the store reads less of it (an invalid facet left out, a missing
    # schemaURL inferred), and what the spec refuses in it ([{"path", "facet", "rule"}])
    received: dict | None = None
    problems: tuple = ()
    checked: bool = False  # ``event`` already passed ``check_event`` (as it was read): the store need not ask again


class EventLine(NamedTuple):
    """One line of a JSON-lines event file: its event, or why it is not one."""

    offset: int  # where the line starts in the file, in bytes
    number: int | None  # its line number (1-based); None when the lines before it were not counted
    raw: bytes  # the line, without its newline
    event: dict | None
    error: str | None  # why the line is not an event (None for an event)

    def where(self, file: str) -> str:
        return f"{file}:{self.number}" if self.number is not None else f"{file} at byte {self.offset}"


def parse_event(raw: bytes) -> tuple[dict | None, str | None]:
    """(the OpenLineage event ``raw`` holds, None) or (None, why it holds none): not UTF-8, not JSON, or not shaped
    like an event (``check_event``)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, f"not UTF-8 (byte {error.start} of the line: {error.reason})"
    try:
        item = loads(text)
    except ValueError as error:
        detail = f"{error.msg} at column {error.colno}" if isinstance(error, json.JSONDecodeError) else str(error)
        return None, f"not valid JSON ({detail})"
    except RecursionError:
        return None, "not valid JSON (nested too deeply)"
    try:
        check_event(item)
    except InvalidEventError as error:
        return None, str(error)
    return item, None


def event_lines(chunk: bytes, offset: int = 0, first_number: int | None = 1) -> list[EventLine]:
    """The lines of ``chunk`` that are not blank, each with its event or why it has none. ``chunk`` holds whole lines
    of a JSON-lines file, read from byte ``offset``; ``first_number`` is the number of its first line (None: unknown).

    Lines end at ``\n`` only: ``str.splitlines`` also breaks at U+0085, U+2028 and U+2029, which JSON allows raw
    inside a string (the Spark listener's Jackson writes them so), and would cut such an event in two."""
    out = []
    position = offset
    for index, line in enumerate(chunk.split(b"\n")):
        start, position = position, position + len(line) + 1
        if not line.strip():
            continue
        event, error = parse_event(line)
        number = None if first_number is None else first_number + index
        out.append(EventLine(start, number, line, event, error))
    return out


def read_event_file(path: Path | str) -> list[SourcedEvent]:
    """Events of a JSON-lines file (``-`` is stdin), or of a file holding one JSON event or a list of them; either
    may be gzip-compressed (``.jsonl.gz``, ``.json.gz``), read as the file it holds (``_event_file_bytes``).

    Every line is checked before anything is stored; a bad one raises UnreadableEventFileError naming file and line."""
    name = str(path)
    label = "<stdin>" if name == "-" else name
    raw = _event_file_bytes(name, label)
    stripped = raw.strip()
    if stripped.startswith(b"[") or (stripped.startswith(b"{") and b"\n" in stripped and _whole_json(stripped)):
        try:
            document = json.loads(stripped)
        except UnicodeDecodeError as error:
            raise UnreadableEventFileError(label, None, f"not UTF-8 ({error.reason} at byte {error.start})") from None
        except json.JSONDecodeError as error:
            raise UnreadableEventFileError(label, error.lineno, f"not valid JSON ({error.msg})") from None
        except RecursionError:
            raise UnreadableEventFileError(label, None, "not valid JSON (nested too deeply)") from None
        items = document if isinstance(document, list) else [document]
        out = []
        for index, item in enumerate(items, start=1):
            try:
                check_event(item)
            except InvalidEventError as error:
                raise UnreadableEventFileError(label, None, f"event {index}: {error}") from None
            out.append(SourcedEvent(item, f"{label}#{index}", checked=True))
        return out
    out = []
    for line in event_lines(raw):
        if line.error is not None:
            raise UnreadableEventFileError(label, line.number, line.error)
        out.append(SourcedEvent(line.event, line.where(label), checked=True))  # event_lines checked it
    return out


GZIP_MAGIC = b"\x1f\x8b"  # the first two bytes of every gzip member (RFC 1952)


def _event_file_bytes(name: str, label: str) -> bytes:
    """The bytes of an event file (``-``: stdin), decompressed when they are gzip: when they start with the gzip magic
    bytes, whatever the file's name. A file named ``.gz`` that does not start with them is refused, not read as text.

    Read whole, as a plain file is (its events are all checked before any is stored): memory is about the size of
    what the file holds. A regular file is decompressed as it is read, its compressed bytes never all in memory; a
    pipe or stdin is read whole first. A gzip file that cannot be decompressed (truncated, corrupt, garbage after a
    member) raises UnreadableEventFileError naming the file, as a file that cannot be read does."""
    try:
        if name == "-":
            raw = sys.stdin.buffer.read()
            return _gunzip(io.BytesIO(raw), label) if raw.startswith(GZIP_MAGIC) else raw
        with open(name, "rb", buffering=0) as file:
            head = b""
            while len(head) < 2 and (more := file.read(2 - len(head))):  # a pipe may give one byte at a time
                head += more
            seekable = file.seekable()
            if seekable:
                file.seek(0)
            if head != GZIP_MAGIC:
                if name.lower().endswith(".gz"):
                    raise UnreadableEventFileError(
                        label, None, "named .gz but not gzip-compressed (it does not start with the bytes 1f 8b)"
                    )
                return file.readall() if seekable else head + file.readall()
            return _gunzip(file if seekable else io.BytesIO(head + file.readall()), label)
    except OSError as error:
        raise UnreadableEventFileError(name, None, f"cannot read: {error}") from None


def _gunzip(compressed, label: str) -> bytes:
    out = io.BytesIO()  # getvalue() hands over its buffer: the decompressed bytes are not copied again
    try:
        with gzip.GzipFile(fileobj=compressed, mode="rb") as archive:
            shutil.copyfileobj(archive, out, 1 << 20)
    except EOFError:
        raise UnreadableEventFileError(label, None, "not a readable gzip file: truncated") from None
    except (gzip.BadGzipFile, zlib.error) as error:  # BadGzipFile before OSError: it is one
        raise UnreadableEventFileError(label, None, f"not a readable gzip file: {error}") from None
    return out.getvalue()


def _whole_json(text: str | bytes) -> bool:
    try:
        json.loads(text)
        return True
    except (ValueError, RecursionError):
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
            events.extend(json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip())
    return events
