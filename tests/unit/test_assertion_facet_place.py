"""Where the extractor puts a dataset's checks: OpenLineage defines ``dataQualityAssertions`` as an input facet (its
schema extends ``InputDatasetFacet``, in the vendored spec; openlineage-java's ``InputDatasetInputFacets`` and
DataHub's OpenLineage converter read it from ``inputFacets``; Marquez's ``DatasetFacetsDao`` types it, like
``dataQualityMetrics``, as an ``INPUT`` facet), and has no output place for it."""

from __future__ import annotations

import json

from openlineage.client.serde import Serde

from include.core.contract import JobReport
from include.lineage.emit.extraction import _dataset_facets
from include.lineage.validation import EventValidator, load_schemas

FILE = "/work/var/landing/tlc/yellow_tripdata_2025-01.parquet"
MODEL = "model:weather"
CHECK = {"assertion": "negative_total", "success": False, "column": "total_amount", "actual": "1", "expected": "0"}


def _no_catalog():
    raise AssertionError("a file or a model needs no catalog")


def test_the_spec_defines_data_quality_assertions_as_an_input_facet():
    schema = next(s for s in load_schemas() if "dataQualityAssertions" in s.get("properties", {}))
    definition = schema["$defs"]["DataQualityAssertionsDatasetFacet"]
    assert definition["allOf"][0]["$ref"].endswith("#/$defs/InputDatasetFacet")


def test_an_inputs_checks_are_an_input_facet_and_an_outputs_stay_among_its_facets():
    report = JobReport(assertions={FILE: [CHECK], MODEL: [CHECK]})
    facets, input_facets = _dataset_facets(FILE, "input", report, _no_catalog)
    assert "dataQualityAssertions" not in facets
    assert [a.assertion for a in input_facets["dataQualityAssertions"].assertions] == ["negative_total"]
    facets, output_facets = _dataset_facets(MODEL, "output", report, _no_catalog)
    assert "dataQualityAssertions" not in output_facets
    assert facets["dataQualityAssertions"].assertions[0].success is False


def test_both_places_validate_against_the_assertions_schema():
    report = JobReport(assertions={FILE: [CHECK]})
    _, input_facets = _dataset_facets(FILE, "input", report, _no_catalog)
    facet = json.loads(Serde.to_json(input_facets["dataQualityAssertions"]))
    validator = EventValidator()
    assert ("InputDatasetFacet", "dataQualityAssertions") in validator.facet_validators
    assert ("DatasetFacet", "dataQualityAssertions") in validator.facet_validators
    assert list(validator.facet_validators[("InputDatasetFacet", "dataQualityAssertions")].iter_errors(facet)) == []


def _load_run(hour: int, failed_checks: int) -> list[dict]:
    import uuid

    checks = [{**CHECK, "actual": str(failed_checks)}]
    facet = {"_producer": "p", "_schemaURL": "https://x", "assertions": checks}
    run_id = str(uuid.uuid4())
    return [
        {
            "eventType": event_type,
            "eventTime": f"2025-03-01T{hour:02d}:{minute}:00+00:00",
            "producer": "https://example.com/tests",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id, "facets": {}},
            "job": {"namespace": "ns", "name": "load", "facets": {}},
            "inputs": [
                {
                    "namespace": "file",
                    "name": FILE,
                    "facets": {},
                    "inputFacets": {"dataQualityAssertions": facet} if event_type == "COMPLETE" else {},
                }
            ],
            "outputs": [{"namespace": "warehouse", "name": "raw", "facets": {}}],
        }
        for event_type, minute in (("START", "00"), ("COMPLETE", "30"))
    ]


def test_the_lineage_page_shows_a_files_checks_from_the_latest_run_that_read_it(tmp_path):
    from include.lineage.api import data
    from include.lineage.queries import LineageQueries
    from include.lineage.store import LineageStore

    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest(_load_run(1, failed_checks=5) + _load_run(3, failed_checks=2))
        detail = data.node_detail(LineageQueries(store), f"dataset:file:{FILE}")
    (check,) = detail["dataQuality"]["dataQualityAssertions"]["assertions"]
    assert (check["assertion"], check["actual"]) == ("negative_total", "2"), "the latest reader's, not the first's"
    assert "_producer" not in detail["dataQuality"]["dataQualityAssertions"]
