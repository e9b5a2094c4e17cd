"""The vendored JSON schemas match their locks, drift is caught, and the validator needs nothing outside the clone."""

from __future__ import annotations

import json
import shutil
import uuid
from datetime import UTC, datetime

import pytest

from include.core import settings
from include.lineage import validation
from include.lineage.errors import InvalidEventError
from include.setup import vendored_specs


@pytest.mark.parametrize("folder", vendored_specs.VENDORED_DIRS, ids=lambda folder: folder.name)
def test_every_vendored_file_matches_its_lock(folder):
    assert vendored_specs.drift(folder) == []
    lock = vendored_specs.load_lock(folder)
    assert {"repository", "commit", "license"} <= set(lock["source"])
    assert len(lock["source"]["commit"]) == 40


def test_a_changed_a_missing_and_an_unlisted_file_are_each_reported_by_name(tmp_path):
    copy = tmp_path / "openlineage"
    shutil.copytree(vendored_specs.OPENLINEAGE_SPEC_DIR, copy)
    schema = copy / "facets" / "SchemaDatasetFacet.json"
    schema.write_text(schema.read_text().replace('"fields"', '"columns"', 1))
    (copy / "facets" / "ParentRunFacet.json").unlink()
    (copy / "facets" / "Extra.json").write_text("{}")
    problems = vendored_specs.drift(copy)
    assert len(problems) == 3
    assert any("SchemaDatasetFacet.json: SHA-256" in p for p in problems)
    assert any("ParentRunFacet.json: listed in lock.json but missing" in p for p in problems)
    assert any("Extra.json: not listed in lock.json" in p for p in problems)


def _bare_event() -> dict:
    return {
        "eventType": "COMPLETE",
        "eventTime": datetime.now(UTC).isoformat(),
        "producer": "https://github.com/lineage-aware-pipelines/airflow-spark-iceberg",
        "schemaURL": validation.EVENT_SCHEMA_ID + "#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "test", "name": "job", "facets": {}},
        "inputs": [],
        "outputs": [],
    }


def test_the_validator_loads_every_facet_schema_from_the_repository(monkeypatch):
    monkeypatch.delenv("OPENLINEAGE_SPEC_DIR", raising=False)
    spec = validation.spec_dir()
    assert spec.is_relative_to(settings.PROJECT_ROOT)
    validator = validation.EventValidator()
    facet_files = list((spec / "facets").glob("*.json")) + list((spec / "registry").glob("*/facets/*.json"))
    for path in facet_files:
        schema = json.loads(path.read_text())
        for key in schema.get("properties", {}):
            places = [kind for kind, facet_key in validator.facet_validators if facet_key == key]
            assert places, f"{path.name}: facet {key} has no validator"
    event = {
        **_bare_event(),
        "outputs": [
            {
                "namespace": "file",
                "name": "/tmp/t",
                "facets": {
                    "schema": {
                        "_producer": "p",
                        "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
                        "fields": [{"name": "a", "type": "int"}],
                    }
                },
            }
        ],
    }
    assert validator.validate([event]).errors == []
    event["outputs"][0]["facets"]["schema"]["fields"] = [{"type": "int"}]
    assert validator.validate([event]).errors, "a schema facet field without a name must be rejected"


@pytest.mark.parametrize("validator", [validation.EventValidator, validation.IngestValidator])
def test_a_spec_folder_without_the_event_schema_is_refused_naming_the_folder(tmp_path, validator):
    (tmp_path / "facets").mkdir()
    shutil.copy(vendored_specs.OPENLINEAGE_SPEC_DIR / "facets" / "SchemaDatasetFacet.json", tmp_path / "facets")
    with pytest.raises(FileNotFoundError, match=f"OpenLineage spec not found at {tmp_path}"):
        validator(tmp_path)


def test_both_validators_read_the_same_schemas_in_one_order_whatever_order_the_folder_lists(monkeypatch):
    """Where two schemas define one key for one place the later wins, so the order must not depend on the file
    system's."""
    monkeypatch.delenv("OPENLINEAGE_SPEC_DIR", raising=False)
    listed = validation.load_schemas()
    assert listed[0]["$id"] == validation.EVENT_SCHEMA_ID
    real_glob = type(validation.spec_dir()).glob
    monkeypatch.setattr(
        type(validation.spec_dir()), "glob", lambda self, pattern: reversed(list(real_glob(self, pattern)))
    )
    assert [schema["$id"] for schema in validation.load_schemas()] == [schema["$id"] for schema in listed]


def _event_with(place: str, key: str, facet: dict) -> dict:
    event = {**_bare_event(), "inputs": [{"namespace": "file", "name": "/tmp/in", "facets": {}, "inputFacets": {}}]}
    owner = {"run": event["run"]["facets"], "job": event["job"]["facets"]}.get(place)
    if owner is None:
        owner = event["inputs"][0][place]
    owner[key] = facet
    return event


def _tags(schema: str, **extra) -> dict:
    url = f"https://openlineage.io/spec/facets/1-0-0/{schema}.json#/$defs/{schema}"
    return {"_producer": "p", "_schemaURL": url, "tags": [{"key": "pii", "value": "true"}], **extra}


# One key, one schema per place: ``tags`` of a dataset is a DatasetFacet (``_deleted`` a boolean), of a run a
# RunFacet (no ``_deleted`` at all). Checked against whichever schema of the key came last in the file system's order,
# one place was held to another's rule: on the development machine a run's ``tags`` with ``_deleted: "yes"`` was
# refused.
PLACED_FACETS = [
    ("facets", "tags", _tags("TagsDatasetFacet"), True),
    ("facets", "tags", _tags("TagsDatasetFacet", _deleted="yes"), False),
    ("run", "tags", _tags("TagsRunFacet", _deleted="yes"), True),
    ("job", "tags", _tags("TagsJobFacet", _deleted="yes"), False),
    ("job", "documentation", {"_producer": "p", "_schemaURL": "https://x", "description": "d"}, True),
    ("facets", "documentation", {"_producer": "p", "_schemaURL": "https://x", "description": 3}, False),
    # dataQualityAssertions extends InputDatasetFacet while its name says DatasetFacet: checked in both places
    ("inputFacets", "dataQualityAssertions", {"_producer": "p", "_schemaURL": "https://x", "assertions": []}, True),
    ("inputFacets", "dataQualityAssertions", {"_producer": "p", "_schemaURL": "https://x", "assertions": 1}, False),
    ("facets", "dataQualityAssertions", {"_producer": "p", "_schemaURL": "https://x", "assertions": [{}]}, False),
]


@pytest.mark.parametrize(("place", "key", "facet", "valid"), PLACED_FACETS)
def test_a_facet_is_checked_against_the_schema_of_its_place_by_both_validators(monkeypatch, place, key, facet, valid):
    monkeypatch.delenv("OPENLINEAGE_SPEC_DIR", raising=False)
    event = _event_with(place, key, facet)
    errors = validation.EventValidator().validate([event]).errors
    assert (errors == []) == valid, errors
    if valid:
        validation.IngestValidator().check(event)
    else:
        with pytest.raises(InvalidEventError, match=key):
            validation.IngestValidator().check(event)


def test_an_error_about_a_large_event_keeps_its_reason_and_stays_short(monkeypatch):
    """jsonschema-rs quotes the whole instance before the reason of a ``oneOf`` failure: for a 20 KB event the reason
    came after 20 KB of the event, and a cut that kept only the start dropped it."""
    monkeypatch.delenv("OPENLINEAGE_SPEC_DIR", raising=False)
    event = _event_with("job", "padding", {"_producer": "p", "_schemaURL": "https://x", "text": "x" * 20_000})
    event["inputs"] = None  # valid under neither RunEvent nor the others: a oneOf failure at $
    (error,) = validation.EventValidator().validate([event]).errors
    assert error.endswith("is not valid under any of the schemas listed in the 'oneOf' keyword"), error
    assert len(error) < 300, len(error)
    with pytest.raises(InvalidEventError) as refused:
        validation.IngestValidator().check(event)
    assert "at $.inputs: null is not of type" in str(refused.value) and len(str(refused.value)) < 300  # its event kind


def test_both_validators_check_the_facets_of_a_dataset_event(monkeypatch):
    """One walk over an event's facets (validation.facet_groups) serves both: lineage validate skipped a
    DatasetEvent's ``dataset.facets`` while lineage serve checked them."""
    monkeypatch.delenv("OPENLINEAGE_SPEC_DIR", raising=False)
    schema = {"_producer": "p", "_schemaURL": "https://x", "fields": [{"type": "int"}]}  # a field without its name
    event = {
        "eventTime": datetime.now(UTC).isoformat(),
        "producer": "https://github.com/lineage-aware-pipelines/airflow-spark-iceberg",
        "schemaURL": validation.EVENT_SCHEMA_ID + "#/$defs/DatasetEvent",
        "dataset": {"namespace": "file", "name": "/tmp/d", "facets": {"schema": schema}},
    }
    (error,) = validation.EventValidator().validate([event]).errors
    assert "facet schema" in error and '"name" is a required property' in error, error
    with pytest.raises(InvalidEventError, match="schema"):
        validation.IngestValidator().check(event)
    schema["fields"][0]["name"] = "a"
    assert validation.EventValidator().validate([event]).errors == []
    validation.IngestValidator().check(event)
