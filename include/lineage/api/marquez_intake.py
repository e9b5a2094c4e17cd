"""Marquez 0.51's intake as a model: what its ``POST /api/v1/lineage`` answers to an event, read from its source
(MarquezProject/marquez, 0.51.x; paths below are under ``api/src/main/java/marquez/``), so that ``lineage serve``
accepts every event Marquez accepts and refuses, with a 4xx, exactly the ones it refuses.

Marquez takes an event in three steps, and the first that fails answers:

1. **Jackson binds the body** to ``BaseEvent`` (``api/OpenLineageResource.java:68``). The class is chosen by
   ``schemaURL`` (``service/models/BaseEvent.java:13-19``, ``EventTypeResolver.java:64-85``): the text after its last
   ``/`` is ``/DatasetEvent`` or ``/JobEvent``, else (none, no ``/``, anything else) a ``LineageEvent``, a RunEvent.
   Each known field has a Java type (``service/models/LineageEvent.java``, ``DatasetEvent.java``, ``JobEvent.java``);
   unknown fields are kept aside (``BaseJsonModel``'s any-setter) or ignored (Dropwizard's ``Jackson.newObjectMapper``
   disables ``FAIL_ON_UNKNOWN_PROPERTIES``). A ``String`` takes a string, or a number or boolean as its text; a time
   takes ISO-8601 with an optional offset (``common/models/FlexibleDateTimeDeserializer.java:28-35``) or a number
   (epoch seconds); an object or a list takes only that. Anything else fails, and Marquez's
   ``api/exceptions/JsonProcessingExceptionMapper.java:23`` answers it with **500** (``Response.serverError()``).
2. **Bean validation** of the bound event (``@Valid @NotNull``, cascading through ``@Valid`` fields): a missing
   ``@NotNull`` field is answered **422** by Dropwizard. Validation does not descend into a map (``@JsonIgnore`` any-
   setter maps carry no ``@Valid``), so a column-lineage entry's fields are not validated.
3. **The service** (``service/OpenLineageService.createAsync``): an ``IllegalArgumentException`` is **400**, anything
   else **500** (``api/OpenLineageResource.java:102-109``). The arguments checked there: a RunEvent's input datasets
   become ``NamespaceName``/``DatasetName`` (``db/OpenLineageDao.java:578``, ``:754``; the namespace must match
   ``common/models/NamespaceName.java:26``'s pattern, the name must not be blank), and a run's job name and namespace
   become ``JobName``/``NamespaceName`` when the run is done, reads inputs or writes outputs
   (``service/OpenLineageService.java:193-198``, ``:230-231``, ``:273-274``, ``:281-282``).

:func:`marquez_answer` returns that answer (201, or the first refusal with its status, reason and the rule it comes
from); :func:`marquez_reading` the event as Marquez reads it (strings from numbers, times it understood).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

from include.lineage.events import utc_time

MARQUEZ = "MarquezProject/marquez 0.51 api/src/main/java/marquez/"
MODELS = "service/models/LineageEvent.java"
BINDING_500 = "api/exceptions/JsonProcessingExceptionMapper.java:23 (Jackson's errors answered 500)"
VALIDATION_422 = "api/OpenLineageResource.java:68 (@Valid @NotNull BaseEvent: Dropwizard answers 422)"
SERVICE_400 = "api/OpenLineageResource.java:105 (IllegalArgumentException -> 400)"
NULL_ELEMENT_500 = "db/OpenLineageDao.java (a null element of a list is dereferenced: NullPointerException -> 500)"
RUN_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


# ----------------------------------------------------------------------------- the Java model, field by field
@dataclass(frozen=True)
class Field:
    kind: object  # "str" | "time" | "uri" | "any" | Obj | ListOf
    required: bool = False  # @NotNull
    line: str = ""  # where Marquez declares it


@dataclass(frozen=True)
class Obj:
    name: str  # the Java class
    fields: dict[str, Field] = field(default_factory=dict)
    values: object = "any"  # what its any-setter takes for other keys
    validate_values: bool = False  # whether bean validation descends into those (a map: never)


@dataclass(frozen=True)
class ListOf:
    item: object


def _facet(java_class: str, line: str, **fields: Field) -> Obj:
    """A typed facet: ``LineageEvent.BaseFacet``'s ``@NotNull`` ``_producer`` and ``_schemaURL`` (lines 122-123),
    then its own fields; other keys go to its any-setter."""
    base = {"_producer": Field("uri", True, f"{MODELS}:122"), "_schemaURL": Field("uri", True, f"{MODELS}:123")}
    return Obj(f"{java_class} ({MODELS}:{line})", {**base, **fields})


def _s(line: int, required: bool = False) -> Field:
    return Field("str", required, f"{MODELS}:{line}")


PARENT = _facet(
    "ParentRunFacet",
    "171",
    run=Field(Obj("RunLink", {"runId": _s(197, True)}), True, f"{MODELS}:173"),
    job=Field(Obj("JobLink", {"namespace": _s(209, True), "name": _s(210, True)}), True, f"{MODELS}:174"),
)
RUN = Obj(
    "Run",
    {
        "runId": _s(78, True),
        "facets": Field(
            Obj(
                "RunFacet",
                {
                    "nominalTime": Field(
                        _facet(
                            "NominalTimeRunFacet",
                            "149",
                            nominalStartTime=Field("time", True, f"{MODELS}:151"),
                            nominalEndTime=Field("time", False, f"{MODELS}:152"),
                        ),
                        line=f"{MODELS}:91",
                    ),
                    "parent": Field(PARENT, line=f"{MODELS}:96"),
                    "parentRun": Field(PARENT, line=f"{MODELS}:93 (@JsonAlias)"),
                },
            ),
            line=f"{MODELS}:79",
        ),
    },
)
JOB = Obj(
    "Job",
    {
        "namespace": _s(222, True),
        "name": _s(223, True),
        "facets": Field(
            Obj(
                "JobFacet",
                {
                    "documentation": Field(_facet("DocumentationJobFacet", "293", description=_s(295, True))),
                    "sourceCodeLocation": Field(_facet("SourceCodeLocationJobFacet", "310", type=_s(312), url=_s(313))),
                    "sql": Field(_facet("SQLJobFacet", "329", query=_s(331, True))),
                    "jobType": Field(
                        _facet(
                            "JobTypeJobFacet",
                            "345",
                            processingType=_s(347, True),
                            integration=_s(348, True),
                            jobType=_s(349, True),
                        )
                    ),
                },
            ),
            line=f"{MODELS}:224",
        ),
    },
)
INPUT_FIELD = Obj(
    "ColumnLineageInputField", {"namespace": _s(642, True), "name": _s(643, True), "field": _s(644, True)}
)
OUTPUT_COLUMN = Obj(
    "ColumnLineageOutputColumn",
    {
        "inputFields": Field(ListOf(INPUT_FIELD), True, f"{MODELS}:628"),
        "transformationDescription": _s(629),
        "transformationType": _s(630),
    },
)
DATASET_FACETS = Obj(
    "DatasetFacets",
    {
        "documentation": Field(_facet("DocumentationDatasetFacet", "466", description=_s(468, True))),
        "schema": Field(
            _facet(
                "SchemaDatasetFacet",
                "483",
                fields=Field(
                    ListOf(Obj("SchemaField", {"name": _s(504, True), "type": _s(505), "description": _s(506)})),
                    line=f"{MODELS}:485",
                ),
            )
        ),
        "lifecycleStateChange": Field(_facet("LifecycleStateChangeFacet", "563", lifecycleStateChange=_s(565))),
        "dataSource": Field(_facet("DatasourceDatasetFacet", "544", name=_s(546), uri=_s(547))),
        "columnLineage": Field(
            _facet(
                "ColumnLineageDatasetFacet",
                "581",
                fields=Field(
                    Obj("ColumnLineageDatasetFacetFields", values=OUTPUT_COLUMN, validate_values=False),
                    line=f"{MODELS}:582",
                ),
            )
        ),
        "symlinks": Field(
            _facet(
                "DatasetSymlinkFacet",
                "514",
                identifiers=Field(
                    ListOf(
                        Obj("SymlinkIdentifier", {"namespace": _s(534, True), "name": _s(535, True), "type": _s(536)})
                    ),
                    line=f"{MODELS}:516",
                ),
            )
        ),
        "description": _s(419),  # a String, not a facet object
    },
)
DATASET = Obj(
    "Dataset",
    {
        "namespace": _s(375, True),
        "name": _s(376, True),
        "facets": Field(DATASET_FACETS, line=f"{MODELS}:377"),
        "inputFacets": Field(Obj("InputDatasetFacets"), line=f"{MODELS}:378"),
        "outputFacets": Field(Obj("OutputDatasetFacets"), line=f"{MODELS}:379"),
    },
)
DATASETS = ListOf(DATASET)
EVENTS = {
    "RunEvent": Obj(
        f"LineageEvent ({MODELS}:43)",
        {
            "eventType": _s(45),
            "eventTime": Field("time", True, f"{MODELS}:47"),
            "run": Field(RUN, True, f"{MODELS}:48"),
            "job": Field(JOB, True, f"{MODELS}:49"),
            "inputs": Field(DATASETS, line=f"{MODELS}:50"),
            "outputs": Field(DATASETS, line=f"{MODELS}:51"),
            "producer": _s(52, True),
            "schemaURL": Field("uri", line=f"{MODELS}:53"),
        },
    ),
    "DatasetEvent": Obj(
        "DatasetEvent (service/models/DatasetEvent.java:26)",
        {
            "eventTime": Field("time", True, "service/models/DatasetEvent.java:27"),
            "dataset": Field(DATASET, line="service/models/DatasetEvent.java:28"),
            "producer": Field("str", True, "service/models/DatasetEvent.java:29"),
            "schemaURL": Field("uri", True, "service/models/DatasetEvent.java:30"),
        },
    ),
    "JobEvent": Obj(
        "JobEvent (service/models/JobEvent.java:27)",
        {
            "eventTime": Field("time", True, "service/models/JobEvent.java:28"),
            "job": Field(JOB, True, "service/models/JobEvent.java:29"),
            "inputs": Field(DATASETS, line="service/models/JobEvent.java:30"),
            "outputs": Field(DATASETS, line="service/models/JobEvent.java:31"),
            "producer": Field("str", True, "service/models/JobEvent.java:32"),
            "schemaURL": Field("uri", True, "service/models/JobEvent.java:33"),
        },
    ),
}


# ----------------------------------------------------------------------------- answers
@dataclass(frozen=True)
class Refusal:
    """Marquez's answer to an event it does not store: its status, what is wrong (with the JSON path) and the rule of
    Marquez's source that answers so."""

    status: int  # 400, 422 or 500
    reason: str
    rule: str

    def line(self) -> str:
        return f"{self.reason} (Marquez {self.status}: {self.rule})"


class _BindError(Exception):
    def __init__(self, path: str, reason: str, rule: str = BINDING_500):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason, self.rule = path, reason, rule


@dataclass
class Reading:
    """The event as Marquez bound it: ``event`` with strings from numbers and the times Marquez understood, and
    ``notes`` saying where it read something other than what was sent; ``kind`` the class ``schemaURL`` chose;
    ``missing`` the ``@NotNull`` fields absent (path, where Marquez declares it)."""

    kind: str
    event: dict
    notes: list[tuple[str, str]] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)


def event_kind(event: dict) -> str:
    """The class Marquez binds an event to (``EventTypeResolver.typeFromId``): the text after the last ``/`` of
    ``schemaURL`` names it; none, or an unknown one, is a RunEvent (``BaseEvent``'s ``defaultImpl``)."""
    schema_url = event.get("schemaURL")
    if isinstance(schema_url, bool):
        schema_url = "true" if schema_url else "false"
    if not isinstance(schema_url, str | int | float):
        return "RunEvent"  # null, or a value Jackson takes no type id from
    text = str(schema_url)
    tail = text[text.rfind("/") :] if "/" in text else ""
    return {"/DatasetEvent": "DatasetEvent", "/JobEvent": "JobEvent"}.get(tail, "RunEvent")


def marquez_reading(event) -> Reading:
    """Bind ``event`` as Marquez's Jackson does; raises ``_BindError`` where Marquez answers 500."""
    if not isinstance(event, dict):
        raise _BindError("$", f"{_a(event)} is not an event object")
    kind = event_kind(event)
    reading = Reading(kind, {})
    reading.event = _bind(event, EVENTS[kind], "", reading, validate=True)
    return reading


def marquez_answer(event) -> Refusal | None:
    """Marquez 0.51's answer to one event posted to ``/api/v1/lineage``: None when it answers 201, else the refusal."""
    return marquez_verdict(event)[0]


def marquez_verdict(event) -> tuple[Refusal | None, Reading | None]:
    """``marquez_answer`` and Marquez's reading of the event (``marquez_reading``; None where it could not bind it):
    the event is bound once for both."""
    if event is None:
        return Refusal(422, "the body holds no event (null or empty)", VALIDATION_422), None
    try:
        reading = marquez_reading(event)
    except _BindError as error:
        return Refusal(500, f"{error.path}: {error.reason}", error.rule), None
    if reading.missing:
        path, line = reading.missing[0]
        return Refusal(422, f"{path} is required (@NotNull)", f"{line}; {VALIDATION_422}"), reading
    return _service_refusal(reading), reading


def _service_refusal(reading: Reading) -> Refusal | None:
    """What ``OpenLineageService.createAsync`` refuses with an IllegalArgumentException (400), for a RunEvent."""
    if reading.kind != "RunEvent":
        return None
    event = reading.event
    inputs = [d for d in event.get("inputs") or [] if isinstance(d, dict)]
    outputs = [d for d in event.get("outputs") or [] if isinstance(d, dict)]
    for index, dataset in enumerate(inputs):
        problem = _dataset_id_problem(dataset)
        if problem:
            return Refusal(400, f"inputs[{index}]: {problem}", f"db/OpenLineageDao.java:578, :754; {SERVICE_400}")
    event_type = event.get("eventType")
    if event_type is None:
        return None
    job = event["job"]
    processing = ((job.get("facets") or {}).get("jobType") or {}).get("processingType")
    streaming = isinstance(processing, str) and processing.lower() == "streaming"  # LineageEvent.java:232-237
    done = event_type.lower() in ("complete", "fail", "abort")
    job_problem = _job_id_problem(job)
    if job_problem and (done or streaming):
        return Refusal(400, job_problem, f"service/OpenLineageService.java:193-198; {SERVICE_400}")
    if job_problem and inputs:
        return Refusal(400, job_problem, f"service/OpenLineageService.java:273-274; {SERVICE_400}")
    if outputs and (event_type.lower() == "complete" or streaming):
        if job_problem:
            return Refusal(400, job_problem, f"service/OpenLineageService.java:230-231; {SERVICE_400}")
        for index, dataset in enumerate(outputs):
            problem = _dataset_id_problem(dataset)
            if problem:
                return Refusal(
                    400, f"outputs[{index}]: {problem}", f"service/OpenLineageService.java:281-282; {SERVICE_400}"
                )
    return None


NAMESPACE_PATTERN = re.compile(r"[a-zA-Z:;=/0-9_\-.@+]{1,1024}")  # common/models/NamespaceName.java:26
_NAMESPACE_FORMAT = re.compile(r"[^a-z:/A-Z0-9\-_.@+]")  # db/OpenLineageDao.java:833 formatNamespaceName


def _dataset_id_problem(dataset: dict) -> str | None:
    namespace, name = dataset.get("namespace"), dataset.get("name")
    if not NAMESPACE_PATTERN.fullmatch(namespace):
        return (
            f"namespace {namespace[:80]!r} is not a Marquez namespace (letters, digits and _ @ + - : = ; / . only, "
            "1 to 1,024 of them: NamespaceName.java:26)"
        )
    if not name.strip():
        return "the name is blank (DatasetName: checkNotBlank)"
    return None


def _job_id_problem(job: dict) -> str | None:
    if not job["name"].strip():
        return "job.name is blank (JobName: checkNotBlank)"
    if not NAMESPACE_PATTERN.fullmatch(_NAMESPACE_FORMAT.sub("_", job["namespace"])):
        return "job.namespace is empty or longer than 1,024 characters (NamespaceName.java:26)"
    return None


# ----------------------------------------------------------------------------- Jackson's binding
def _bind(value, kind, path: str, reading: Reading, validate: bool):
    """``value`` bound to ``kind`` as Jackson binds it: the bound value (JSON), or ``_BindError``."""
    if value is None:
        return None
    if isinstance(kind, Obj):
        return _bind_object(value, kind, path, reading, validate)
    if isinstance(kind, ListOf):
        if not isinstance(value, list):
            raise _BindError(path, f"{_a(value)} where Marquez reads a list")
        bound = []
        for index, item in enumerate(value):
            if item is None:
                raise _BindError(
                    f"{path}[{index}]", "null in a list Marquez reads element by element", NULL_ELEMENT_500
                )
            bound.append(_bind(item, kind.item, f"{path}[{index}]", reading, validate))
        return bound
    if kind == "any":
        return value
    if isinstance(value, dict | list):
        raise _BindError(path, f"{_a(value)} where Marquez reads a {'time' if kind == 'time' else 'string'}")
    if kind == "str":
        return _as_string(value, path, reading)
    if kind == "time":
        return _bind_time(value, path, reading)
    text = _as_string(value, path, reading)
    problem = java_uri_problem(text)
    if problem:
        raise _BindError(path, f"{text[:80]!r} is not a java.net.URI: {problem}")
    return text


def _bind_object(value, kind: Obj, path: str, reading: Reading, validate: bool) -> dict:
    if not isinstance(value, dict):
        raise _BindError(path or "$", f"{_a(value)} where Marquez reads an object ({kind.name})")
    bound = {}
    for key, item in value.items():
        at = f"{path}.{key}" if path else key
        known = kind.fields.get(key)
        if known is not None:
            bound[key] = _bind(item, known.kind, at, reading, validate)
        else:
            bound[key] = _bind(item, kind.values, at, reading, validate and kind.validate_values)
    if validate:
        for name, known in kind.fields.items():
            if known.required and value.get(name) is None:
                reading.missing.append((f"{path}.{name}" if path else name, known.line))
            if known.required and isinstance(value.get(name), str) and known.kind == "time" and bound[name] is None:
                reading.missing.append((f"{path}.{name}" if path else name, known.line))  # "" is read as null
    return bound


def _as_string(value, path: str, reading: Reading) -> str:
    """A JSON scalar as Jackson's ``StringDeserializer`` reads it: a number or a boolean as its text."""
    if isinstance(value, str):
        return value
    text = ("true" if value else "false") if isinstance(value, bool) else repr(value)
    reading.notes.append((path, f"a {_json_type(value)}, read as the string {text!r} (as Marquez's Jackson reads it)"))
    return text


def _a(value) -> str:
    kind = _json_type(value)
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _json_type(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "list", str: "string", int: "number", float: "number"}.get(type(value), "null")


def _bind_time(value, path: str, reading: Reading) -> str | None:
    if isinstance(value, bool):
        raise _BindError(path, "a boolean where Marquez reads a time")
    if isinstance(value, int | float):
        try:
            moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=value)
        except OverflowError:
            raise _BindError(path, f"{value!r} seconds since 1970 is outside the years 1 to 9999") from None
        text = moment.isoformat()
        reading.notes.append((path, f"a number, read as {text} (seconds since 1970, as Marquez's Jackson reads it)"))
        return text
    if not value.strip():
        return None  # InstantDeserializer: an empty string is null (then @NotNull, where required)
    moment = marquez_time(value)
    if moment is None:
        raise _BindError(path, f"{value[:80]!r} is not a time Marquez reads (FlexibleDateTimeDeserializer.java:28-35)")
    text = moment.isoformat()
    if not _same_instant(value, moment):
        reading.notes.append((path, f"{value[:80]!r} read as {text}, as Marquez's java.time reads it"))
        return text
    return value


_MARQUEZ_TIME = re.compile(
    r"\s*(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})[Tt](?P<hour>\d{2}):(?P<minute>\d{2})"
    r"(?::(?P<second>\d{2})(?:\.(?P<fraction>\d{0,9}))?)?"
    r"(?:(?P<utc>[Zz])|(?P<sign>[+-])(?P<oh>\d{2})(?::?(?P<om>\d{2})(?::?(?P<os>\d{2}))?)?)?\s*"
)


def marquez_time(text: str) -> datetime | None:
    """A time as ``FlexibleDateTimeDeserializer`` reads it (``ISO_LOCAL_DATE_TIME``, an optional offset parsed
    leniently, resolved SMART): None where it fails. SMART clamps a day past the month's end (2025-02-30 is
    2025-02-28) and reads 24:00 as the next midnight; a time without an offset is in the JVM's zone (Marquez's image:
    UTC, as here). A year outside 1 to 9999 is None: Marquez reads ``+10000-…``, the store cannot keep it."""
    found = _MARQUEZ_TIME.fullmatch(text)
    if found is None:
        return None
    part = {key: int(value) if value and value.isdigit() else value for key, value in found.groupdict().items()}
    year, month, day = part["year"], part["month"], part["day"]
    hour, minute, second = part["hour"], part["minute"], part["second"] or 0
    if not (1 <= month <= 12 and 1 <= day <= 31 and minute <= 59 and second <= 59 and year >= 1):
        return None
    day = min(day, calendar.monthrange(year, month)[1])
    fraction = (found["fraction"] or "").ljust(9, "0")
    nanos = int(fraction) if fraction else 0
    next_day = hour == 24 and minute == 0 and second == 0 and nanos == 0
    if hour > 23 and not next_day:
        return None
    offset = timedelta(0)
    if part["sign"]:
        offset = timedelta(hours=part["oh"], minutes=part["om"] or 0, seconds=part["os"] or 0)
        if offset > timedelta(hours=18) or (part["om"] or 0) > 59 or (part["os"] or 0) > 59:
            return None
        offset = -offset if part["sign"] == "-" else offset
    try:
        moment = datetime(year, month, day, 0 if next_day else hour, minute, second, nanos // 1000)
        return (moment + timedelta(days=1 if next_day else 0)).replace(tzinfo=timezone(offset))
    except (ValueError, OverflowError):
        return None


def _same_instant(text: str, moment: datetime) -> bool:
    """Whether the store reads ``text`` (``events.utc_time``) as the instant Marquez reads."""
    try:
        return utc_time(text) == utc_time(moment.isoformat())
    except ValueError:
        return False


# ----------------------------------------------------------------------------- java.net.URI
_URI_ILLEGAL = re.compile(r'[\x00-\x20\x7f"<>\\^`{|}]')
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")


def java_uri_problem(text: str) -> str | None:
    """Why ``new java.net.URI(text)`` would fail (RFC 2396 as Java parses it), or None. A model of its parser's
    main rules: the characters it refuses, ``%`` escapes, one ``#``, a scheme's syntax, an opaque URI's part after
    the scheme, an authority after ``//`` and brackets only around an IPv6 host."""
    if text == "":
        return None  # Jackson reads "" as the empty URI
    bad = _URI_ILLEGAL.search(text)
    if bad:
        return f"illegal character {bad.group()!r} at index {bad.start()}"
    if re.search(r"%(?![0-9A-Fa-f]{2})", text):
        return "a % not followed by two hex digits"
    if text.count("#") > 1:
        return "a second #"
    first = re.search(r"[/?#]", text)
    colon = text.find(":")
    if colon == 0:
        return "expected a scheme name at index 0"
    if colon > 0 and (first is None or colon < first.start()):
        if not _URI_SCHEME.fullmatch(text[:colon]):
            return "illegal character in the scheme name"
        rest = text[colon + 1 :]
        if not rest or rest.startswith("#"):
            return "expected a scheme-specific part after the scheme"
        if rest.startswith("//") and (len(rest) == 2 or rest[2] in "/?#"):
            return "expected an authority after //"
    if ("[" in text or "]" in text) and not re.match(r"^(?:[^:/?#]+:)?//[^/?#]*\[[0-9A-Fa-f:.]+\]", text):
        return "brackets outside an IPv6 host"
    return None
