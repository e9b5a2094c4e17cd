"""Validate OpenLineage events against the official JSON schemas, offline, each facet against its own schema.

The official schemas are vendored in ``include/lineage/spec/openlineage/`` (provenance and SHA-256 in its
``lock.json``; ``$OPENLINEAGE_SPEC_DIR`` points elsewhere); the project's custom facets are in
``include/lineage/schemas/``. A facet key maps to the schema whose top-level ``properties`` defines it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from include.core import settings

PROJECT_SCHEMAS = settings.PROJECT_ROOT / "include" / "lineage" / "schemas"
EVENT_SCHEMA_ID = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


def spec_dir() -> Path:
    return Path(settings.OPENLINEAGE_SPEC_DIR.raw() or settings.VENDORED_OPENLINEAGE_SPEC_DIR)


@dataclass
class Validation:
    errors: list[str] = field(default_factory=list)
    facets_checked: dict[str, int] = field(default_factory=dict)
    facets_without_schema: set[str] = field(default_factory=set)


class EventValidator:
    def __init__(self, spec: Path | None = None):
        spec = spec or spec_dir()
        if not (spec / "OpenLineage.json").exists():
            raise FileNotFoundError(f"OpenLineage spec not found at {spec} (set OPENLINEAGE_SPEC_DIR)")
        files = [
            spec / "OpenLineage.json",
            *spec.glob("facets/*.json"),
            *spec.glob("registry/**/facets/*.json"),
            *PROJECT_SCHEMAS.glob("*.json"),
        ]
        schemas = [json.loads(path.read_text()) for path in files]
        self.registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas)
        self.facet_validators: dict[str, Draft202012Validator] = {}
        for schema in schemas:
            for key in schema.get("properties", {}):
                if schema["$id"] != EVENT_SCHEMA_ID:
                    self.facet_validators[key] = self._validator(f"{schema['$id']}#/properties/{key}")
        self.event_validator = self._validator(EVENT_SCHEMA_ID)
        self.base = {
            kind: self._validator(f"{EVENT_SCHEMA_ID}#/$defs/{kind}")
            for kind in ("RunFacet", "JobFacet", "DatasetFacet", "InputDatasetFacet", "OutputDatasetFacet")
        }

    def _validator(self, ref: str) -> Draft202012Validator:
        return Draft202012Validator({"$ref": ref}, registry=self.registry)

    def _facets(self, event: dict):
        yield "RunFacet", event.get("run", {}).get("facets", {})
        yield "JobFacet", event.get("job", {}).get("facets", {})
        for dataset in event.get("inputs") or []:
            yield "DatasetFacet", dataset.get("facets", {})
            yield "InputDatasetFacet", dataset.get("inputFacets", {})
        for dataset in event.get("outputs") or []:
            yield "DatasetFacet", dataset.get("facets", {})
            yield "OutputDatasetFacet", dataset.get("outputFacets", {})

    def validate(self, events: list[dict], result: Validation | None = None) -> Validation:
        result = result or Validation()
        for index, event in enumerate(events):
            where = f"event {index} ({event.get('eventType')} {event.get('job', {}).get('name')})"
            result.errors += [f"{where}: {e.message}" for e in self.event_validator.iter_errors(event)]
            for kind, facets in self._facets(event):
                for key, facet in (facets or {}).items():
                    validator = self.facet_validators.get(key)
                    if validator is None:
                        result.facets_without_schema.add(key)
                        validator = self.base[kind]
                    result.facets_checked[key] = result.facets_checked.get(key, 0) + 1
                    result.errors += [f"{where}: facet {key}: {e.message}" for e in validator.iter_errors(facet)]
        return result
