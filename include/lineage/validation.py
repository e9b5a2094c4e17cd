"""Validate OpenLineage events against the official JSON schemas, offline, each facet against its own schema.

The official schemas are vendored in ``include/lineage/spec/openlineage/`` (provenance and SHA-256 in its
``lock.json``; ``$OPENLINEAGE_SPEC_DIR`` points elsewhere); the project's custom facets are in
``include/lineage/schemas/``. A facet key maps to the schema whose top-level ``properties`` defines it.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema_rs

from include.core import settings
from include.core.jsontext import json_bytes

PROJECT_SCHEMAS = settings.PROJECT_ROOT / "include" / "lineage" / "schemas"
EVENT_SCHEMA_ID = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


def spec_dir() -> Path:
    return Path(settings.OPENLINEAGE_SPEC_DIR.raw() or settings.VENDORED_OPENLINEAGE_SPEC_DIR)


@dataclass
class Validation:
    errors: list[str] = field(default_factory=list)
    facets_checked: dict[str, int] = field(default_factory=dict)
    facets_without_schema: set[str] = field(default_factory=set)


def load_schemas(spec: Path | None = None) -> list[dict]:
    """The event schema, then every facet schema (the spec's own, its registry's, the project's), parsed, in an
    order that is the same on every machine: where two schemas define one key for the same place, the later wins."""
    spec = spec or spec_dir()
    if not (spec / "OpenLineage.json").exists():
        raise FileNotFoundError(f"OpenLineage spec not found at {spec} (set OPENLINEAGE_SPEC_DIR)")
    files = [
        spec / "OpenLineage.json",
        *sorted(spec.glob("facets/*.json")),
        *sorted(spec.glob("registry/**/facets/*.json")),
        *sorted(PROJECT_SCHEMAS.glob("*.json")),
    ]
    return [json.loads(path.read_text()) for path in files]


_FACET_KINDS = (  # suffix of a facet's $defs name -> where in an event it belongs (longest suffix first)
    ("InputDatasetFacet", "InputDatasetFacet"),
    ("OutputDatasetFacet", "OutputDatasetFacet"),
    ("DatasetFacet", "DatasetFacet"),
    ("JobFacet", "JobFacet"),
    ("RunFacet", "RunFacet"),
)


def _facet_kind(ref: str) -> str | None:
    name = ref.rsplit("/", 1)[-1]
    return next((kind for suffix, kind in _FACET_KINDS if name.endswith(suffix)), None)


def _facet_places(schema: dict, ref: str) -> set[str]:
    """Where a facet whose property refers to ``ref`` may stand: what its name says and what its definition extends.
    They differ once in the spec: ``DataQualityAssertionsDatasetFacet`` extends ``InputDatasetFacet`` (an input
    facet, where consumers read it) while its name says a dataset facet (where producers also put it)."""
    places = {_facet_kind(ref)}
    if ref.startswith("#/$defs/"):
        definition = schema.get("$defs", {}).get(ref.rsplit("/", 1)[-1], {})
        places |= {_facet_kind(part["$ref"]) for part in definition.get("allOf", []) if "$ref" in part}
    return places - {None}


def facet_schema_refs(schemas: list[dict]) -> dict[tuple[str, str], str]:
    """(the kind of facet, its key) -> the JSON reference of the schema that defines it there. One key can have a
    schema per place (``ownership`` of a job and of a dataset, ``tags`` of a run, a job and a dataset, the data
    quality metrics of a dataset and of an input), told apart by the ``$defs`` its property refers to."""
    refs: dict[tuple[str, str], str] = {}
    for schema in schemas:
        if schema["$id"] == EVENT_SCHEMA_ID:
            continue
        for key, prop in schema.get("properties", {}).items():
            targets = [prop.get("$ref", "")] + [item.get("$ref", "") for item in prop.get("anyOf", [])]
            for kind in set().union(*(_facet_places(schema, target) for target in targets if target)):
                refs[(kind, key)] = f"{schema['$id']}#/properties/{key}"
    return refs


def facet_groups(event: dict):
    """(path, kind, facets) of every facets object of an event, where OpenLineage puts them; ``facets`` as found
    (None when absent, any type when the event is malformed)."""
    run, job = event.get("run"), event.get("job")
    if isinstance(run, dict):
        yield "run.facets", "RunFacet", run.get("facets")
    if isinstance(job, dict):
        yield "job.facets", "JobFacet", job.get("facets")
    if isinstance(event.get("dataset"), dict):
        yield "dataset.facets", "DatasetFacet", event["dataset"].get("facets")
    for side, own, kind in (
        ("inputs", "inputFacets", "InputDatasetFacet"),
        ("outputs", "outputFacets", "OutputDatasetFacet"),
    ):
        datasets = event.get(side)
        if not isinstance(datasets, list):
            continue
        for index, dataset in enumerate(datasets):
            if isinstance(dataset, dict):
                yield f"{side}[{index}].facets", "DatasetFacet", dataset.get("facets")
                yield f"{side}[{index}].{own}", kind, dataset.get(own)


class CompiledSchemas:
    """The vendored schemas compiled once with jsonschema_rs, offline (no schema is ever fetched): each facet's
    schema by (kind, key), and any definition of the event schema."""

    def __init__(self, spec: Path | None = None):
        schemas = load_schemas(spec)
        self.registry = jsonschema_rs.Registry([(s["$id"], s) for s in schemas], retriever=_offline)
        by_ref: dict[str, jsonschema_rs.Draft202012Validator] = {}
        self.facets: dict[tuple[str, str], jsonschema_rs.Draft202012Validator] = {}
        for place, ref in facet_schema_refs(schemas).items():
            if ref not in by_ref:
                by_ref[ref] = self.compile(ref)
            self.facets[place] = by_ref[ref]

    def compile(self, ref: str) -> jsonschema_rs.Draft202012Validator:
        return jsonschema_rs.Draft202012Validator({"$ref": ref}, registry=self.registry, retriever=_offline)

    def definition(self, name: str) -> jsonschema_rs.Draft202012Validator:
        return self.compile(f"{EVENT_SCHEMA_ID}#/$defs/{name}")


class EventValidator:
    """What ``lineage validate`` checks: every event against the event schema and each facet against the schema of
    its place, every problem reported (``lineage serve`` stops at the first: IngestValidator)."""

    def __init__(self, spec: Path | None = None):
        schemas = CompiledSchemas(spec)
        self.facet_validators = schemas.facets
        self.event_validator = schemas.compile(EVENT_SCHEMA_ID)
        self.base = {
            kind: schemas.definition(kind)
            for kind in ("RunFacet", "JobFacet", "DatasetFacet", "InputDatasetFacet", "OutputDatasetFacet")
        }

    def validate(
        self, events: list[dict], result: Validation | None = None, places: list[str] | None = None
    ) -> Validation:
        """Each event against the event schema and each facet against its own; ``places`` names where each event
        came from (``file:line``) in the errors, else its index does."""
        result = result or Validation()
        for index, event in enumerate(events):
            place = places[index] if places is not None else f"event {index}"
            where = f"{place} ({event.get('eventType')} {event.get('job', {}).get('name')})"
            result.errors += [_problem(where, e) for e in self.event_validator.iter_errors(event)]
            for _path, kind, facets in facet_groups(event):
                for key, facet in facets.items() if isinstance(facets, dict) else ():
                    validator = self.facet_validators.get((kind, key))
                    if validator is None:
                        result.facets_without_schema.add(key)
                        validator = self.base[kind]
                    result.facets_checked[key] = result.facets_checked.get(key, 0) + 1
                    result.errors += [_problem(f"{where}: facet {key}", e) for e in validator.iter_errors(facet)]
        return result


# ---------------------------------------------------------------- on ingest (``lineage serve``)
_EVENT_KINDS = ("RunEvent", "JobEvent", "DatasetEvent")
_VALID_FACETS_KEPT = 20_000


def _offline(uri: str):
    raise ValueError(f"{uri} is not among the vendored schemas (no schema is fetched)")


def _problem(where: str, error) -> str:
    return f"{where}: {_at_path(error)}"


def _at_path(error, longest: int = 200) -> str:
    """Where in the instance and what is wrong. A message that quotes a large instance (a whole event or facet) keeps
    its start and its end, where the reason is ("... is not valid under any of the schemas listed in ...")."""
    message = error.message
    if len(message) > longest:
        half = (longest - 5) // 2
        message = f"{message[:half]} ... {message[-half:]}"
    return f"at {_json_path(error.instance_path)}: {message}"


def _json_path(path) -> str:
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


def _first_error(validator, instance, most: int = 3) -> str | None:
    """What is wrong, up to ``most`` problems, each at its JSON path; None when nothing is."""
    if validator.is_valid(instance):
        return None
    problems = []
    for error in validator.iter_errors(instance):
        problems.append(_at_path(error))
        if len(problems) >= most:
            break
    return "; ".join(problems)


class IngestValidator:
    """What ``lineage serve`` checks of every event before storing it, built once (the schemas compiled once):

    - the event against the vendored ``OpenLineage.json`` (``RunEvent``, ``JobEvent`` or ``DatasetEvent``), its
      facets aside;
    - each standard facet (one the vendored facet schemas, the registry's or the project's define, in the place of
      the event it belongs to) against its own schema; a custom facet need only be a JSON object; a facet
      ``{"_deleted": true}`` only against the base facet;
    - the limits: inputs plus outputs, and each facet's size as JSON.

    :meth:`check` raises InvalidEventError naming the facet and the JSON path of what is wrong."""

    def __init__(self, spec: Path | None = None):
        schemas = CompiledSchemas(spec)
        self.events = {kind: schemas.definition(kind) for kind in _EVENT_KINDS}
        self.base = schemas.definition("BaseFacet")
        self.facets = schemas.facets
        # Facets found valid, by (kind, key, digest of their canonical JSON): a run's schema and column lineage
        # come again with every event of every run of a job, and are checked once.
        self._valid: OrderedDict[tuple[str, str, bytes], None] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _without_facets(event: dict) -> dict:
        """A copy of the event whose facet objects are empty (their content is checked facet by facet)."""

        def bare(owner, *keys):
            if not isinstance(owner, dict):
                return owner
            copy = dict(owner)
            for key in keys:
                if isinstance(copy.get(key), dict):
                    copy[key] = {}
            return copy

        stripped = dict(event)
        stripped["run"] = bare(event.get("run"), "facets") if "run" in event else None
        stripped["job"] = bare(event.get("job"), "facets") if "job" in event else None
        stripped["dataset"] = bare(event.get("dataset"), "facets") if "dataset" in event else None
        for side, own in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
            if isinstance(event.get(side), list):
                stripped[side] = [bare(dataset, "facets", own) for dataset in event[side]]
        return {key: value for key, value in stripped.items() if key in event}

    def check(self, event, max_datasets: int | None = None, max_facet_bytes: int | None = None) -> None:
        from include.lineage.errors import InvalidEventError

        if not isinstance(event, dict):
            raise InvalidEventError(f"an OpenLineage event is a JSON object, not {type(event).__name__}")
        check_limits(event, max_datasets, max_facet_bytes)
        kind = "RunEvent" if "run" in event else "DatasetEvent" if "dataset" in event else "JobEvent"
        problem = _first_error(self.events[kind], self._without_facets(event))
        if problem is not None:
            raise InvalidEventError(f"not an OpenLineage {kind} (OpenLineage.json) {problem}")
        for path, facet_kind, facets in facet_groups(event):
            if not isinstance(facets, dict):
                continue  # absent (the event's schema refused any other type)
            for key, facet in facets.items():
                where = f"facet {key!r} at {path}.{key}"
                if not isinstance(facet, dict):
                    raise InvalidEventError(f"{where} is a {type(facet).__name__}, not a facet object")
                problem = self.facet_problem(facet_kind, key, facet)
                if problem is not None:
                    raise InvalidEventError(f"{where} does not match its schema {problem}")

    def facet_problem(self, facet_kind: str, key: str, facet) -> str | None:
        """What is wrong with one facet in its place (``facet_kind``: ``RunFacet``, ``JobFacet``, ``DatasetFacet``,
        ``InputDatasetFacet`` or ``OutputDatasetFacet``), or None: not an object, or a standard facet that does not
        match its schema (up to three problems, each at its JSON path); a custom facet need only be an object."""
        if not isinstance(facet, dict):
            return f"a {_json_type(facet)}, not a facet object"
        validator = self.facets.get((facet_kind, key))
        if validator is None:
            return None  # a custom facet: an object is all OpenLineage asks of it here
        if facet.get("_deleted") is True:
            validator = self.base
        seen = (facet_kind, key, hashlib.blake2b(json_bytes(facet, sort_keys=True), digest_size=16).digest())
        with self._lock:
            known = seen in self._valid
            if known:
                self._valid.move_to_end(seen)
        if known:
            return None
        problem = _first_error(validator, facet)
        if problem is None:
            with self._lock:
                self._valid[seen] = None
                while len(self._valid) > _VALID_FACETS_KEPT:
                    self._valid.popitem(last=False)
        return problem

    def problems(self, event: dict, kind: str) -> list[Problem]:
        """Everything the spec refuses in ``event`` read as a ``kind`` (``RunEvent``, ``DatasetEvent``, ``JobEvent``),
        reported, not raised (``lineage serve`` keeps such an event and leaves out of its reading what is invalid):
        the event's own fields against the event schema (facets aside), then each facet in its place."""
        found = [
            Problem(_dotted(error.instance_path), None, _at_path(error).partition(": ")[2])
            for error in itertools.islice(self.events[kind].iter_errors(self._without_facets(event)), 20)
        ]
        for path, facet_kind, facets in facet_groups(event):
            for key, facet in facets.items() if isinstance(facets, dict) else ():
                problem = self.facet_problem(facet_kind, key, facet)
                if problem is not None:
                    rule = problem if not isinstance(facet, dict) else f"does not match its schema {problem}"
                    found.append(Problem(f"{path}.{key}", key, rule))
        return found


@dataclass(frozen=True)
class Problem:
    """What the spec refuses in an event: ``path`` where (``outputs[0].facets.schema``, ``eventType``), ``facet`` the
    facet's key (None for the event's own fields), ``rule`` why."""

    path: str
    facet: str | None
    rule: str

    def as_json(self) -> dict:
        return {"path": self.path, "facet": self.facet, "rule": self.rule}


def _dotted(path) -> str:
    """A jsonschema instance path as the event's dotted path (``outputs[0].name``); ``$`` for the event itself."""
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")
    return text or "$"


def _json_type(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "list", str: "string", int: "number", float: "number"}.get(type(value), "null")


def check_limits(event: dict, max_datasets: int | None, max_facet_bytes: int | None) -> None:
    """The limits ``lineage serve`` keeps whatever the event holds: inputs plus outputs, and each facet's size as
    JSON. InvalidEventError names the setting."""
    from include.lineage.errors import InvalidEventError

    datasets = sum(len(event[side]) for side in ("inputs", "outputs") if isinstance(event.get(side), list))
    if max_datasets is not None and datasets > max_datasets:
        raise InvalidEventError(
            f"the event has {datasets:,} inputs and outputs; the limit is {max_datasets:,} (LINEAGE_MAX_EVENT_DATASETS)"
        )
    if max_facet_bytes is None:
        return
    for path, _kind, facets in facet_groups(event):
        for key, facet in facets.items() if isinstance(facets, dict) else ():
            size = len(json_bytes(facet))  # compact UTF-8 JSON
            if size > max_facet_bytes:
                raise InvalidEventError(
                    f"facet {key!r} at {path}.{key} is {size:,} bytes as JSON; the limit is {max_facet_bytes:,} "
                    "(LINEAGE_MAX_FACET_BYTES)"
                )


@functools.lru_cache(maxsize=1)
def ingest_validator() -> IngestValidator:
    """The schemas compiled once per process."""
    return IngestValidator()


def check_incoming(event) -> None:
    """What every event arriving from outside is checked against before the store takes it, the same in
    ``lineage serve`` (a 400) and ``lineage consume`` (a dead letter): the vendored OpenLineage schemas, event and
    standard facets, and the limits ``LINEAGE_MAX_EVENT_DATASETS`` and ``LINEAGE_MAX_FACET_BYTES``.
    InvalidEventError names the facet and the JSON path of what is wrong."""
    ingest_validator().check(
        event,
        max_datasets=settings.LINEAGE_MAX_EVENT_DATASETS.integer(),
        max_facet_bytes=settings.LINEAGE_MAX_FACET_BYTES.integer(),
    )
