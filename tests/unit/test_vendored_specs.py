"""The vendored JSON schemas match their locks, drift is caught, and the validator needs nothing outside the clone."""

from __future__ import annotations

import json
import shutil
import uuid
from datetime import UTC, datetime

import pytest

from include.core import settings
from include.lineage import validation
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


def test_the_validator_loads_every_facet_schema_from_the_repository(monkeypatch):
    monkeypatch.delenv("OPENLINEAGE_SPEC_DIR", raising=False)
    spec = validation.spec_dir()
    assert spec.is_relative_to(settings.PROJECT_ROOT)
    validator = validation.EventValidator()
    facet_files = list((spec / "facets").glob("*.json")) + list((spec / "registry").glob("*/facets/*.json"))
    for path in facet_files:
        schema = json.loads(path.read_text())
        for key in schema.get("properties", {}):
            assert key in validator.facet_validators, f"{path.name}: facet {key} has no validator"
    event = {
        "eventType": "COMPLETE",
        "eventTime": datetime.now(UTC).isoformat(),
        "producer": "https://github.com/lineage-aware-pipelines/airflow-spark-iceberg",
        "schemaURL": validation.EVENT_SCHEMA_ID + "#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "test", "name": "job", "facets": {}},
        "inputs": [],
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
