"""DataHub's OpenLineage endpoint (the README's DataHub line: ``/openapi/openlineage/api/v1/lineage``) checks each event
with its own rules, read in datahub-project/datahub (``metadata-service/openapi-servlet/.../openlineage/validation/
JsonSchemaOpenLineageRequestValidator.java`` and ``OpenLineageSchemaCatalog.java``, commit 15d7b26 as stored; DataHub
could not be run here): the event, facets aside and ``schemaURL`` filled in, against OpenLineage **2-0-2**'s
``OpenLineage.json``; each standard facet against its schema at its attachment point (run, job, dataset, input,
output), a missing ``_producer``/``_schemaURL`` filled in first; a standard facet's key at another attachment point is
an error (``attachment``); a custom facet must be an object; ``schemaURL``, ``_producer`` and ``_schemaURL`` must be
absolute URIs. The same 2-0-2 schema is the one vendored in ``include/lineage/spec/openlineage/``, so the rules run here
with the vendored schemas.

What they say of the project's events: an output's ``dataQualityAssertions`` among its ``facets`` (where the
project keeps an output table's checks, docs/lineage.md) is a standard key of the input attachment only, so DataHub
refuses such an event; the same facet among an input's ``inputFacets`` passes."""

from __future__ import annotations

import json
import uuid

from include.lineage.validation import EVENT_SCHEMA_ID, CompiledSchemas, facet_groups

PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/2.20.3"
DATAHUB_ROOT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json"  # OpenLineageSchemaCatalog.ROOT_SCHEMA_URI
# DataHub's standard facets by attachment point (OpenLineageSchemaCatalog.addRunFacets ... addOutputFacets), by the
# place facet_groups gives them
STANDARD = {
    "RunFacet": {
        "externalQuery", "gcp_dataproc", "extractionError", "parent", "nominalTime", "tags", "errorMessage",
        "environmentVariables", "gcp_composer_run", "executionParameters", "jobDependencies", "processing_engine",
    },
    "JobFacet": {
        "jobType", "sourceCode", "gcp_lineage", "sql", "gcp_composer_job", "ownership", "sourceCodeLocation", "tags",
        "documentation",
    },
    "DatasetFacet": {
        "hierarchy", "dataSource", "version", "datasetType", "storage", "columnLineage", "lifecycleStateChange",
        "dataQualityMetrics", "tags", "documentation", "schema", "ownership", "catalog", "symlinks",
    },
    "InputDatasetFacet": {"dataQualityAssertions", "inputStatistics", "dataQualityMetrics", "subset", "icebergScanReport"},
    "OutputDatasetFacet": {"outputStatistics", "subset", "icebergCommitReport"},
}  # fmt: skip


def datahub_errors(event: dict, schemas: CompiledSchemas) -> list[tuple[str, str]]:
    """(path, rule) of every error DataHub's validator reports for ``event``, with the vendored schemas."""
    envelope = json.loads(json.dumps(event))
    envelope.setdefault("schemaURL", DATAHUB_ROOT_SCHEMA)
    for _path, _kind, facets in facet_groups(envelope):
        if isinstance(facets, dict):
            facets.clear()
    errors = [
        (f"$.{'.'.join(map(str, e.instance_path))}", "schema")
        for e in schemas.compile(EVENT_SCHEMA_ID).iter_errors(envelope)
    ]
    standard_keys = set().union(*STANDARD.values())
    for path, kind, facets in facet_groups(event):
        for key, facet in (facets or {}).items():
            at = f"$.{path}.{key}"
            if key in STANDARD[kind]:
                facet = {"_producer": DATAHUB_ROOT_SCHEMA, "_schemaURL": DATAHUB_ROOT_SCHEMA, **facet}
                validator = schemas.facets.get((kind, key))  # DataHub bundles 1.45.0's facets; the vendored, newer
                errors += [(at, "schema") for _ in (validator.iter_errors(facet) if validator else ())]
            elif key in standard_keys:
                errors.append((at, "attachment"))
            elif not isinstance(facet, dict):
                errors.append((at, "type"))
    return errors


def _complete(outputs: list[dict], inputs: list[dict] | None = None) -> dict:
    return {
        "eventType": "COMPLETE",
        "eventTime": "2025-02-01T00:00:00Z",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "nyc_taxi_pipeline", "name": "ingest_weather_data.merge_weather_raw", "facets": {}},
        "inputs": inputs or [],
        "outputs": outputs,
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


ASSERTIONS = {
    "_producer": PRODUCER,
    "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DataQualityAssertionsDatasetFacet.json",
    "assertions": [{"assertion": "rows_not_null", "success": True, "column": "county"}],
}


def test_datahub_checks_events_against_the_vendored_openlineage_2_0_2():
    assert EVENT_SCHEMA_ID == DATAHUB_ROOT_SCHEMA


def test_datahub_refuses_an_outputs_data_quality_assertions_among_its_facets_and_takes_them_as_input_facets():
    schemas = CompiledSchemas()
    table = {"namespace": "file", "name": "/warehouse/nyc_taxi/weather_raw"}
    as_output = _complete([{**table, "facets": {"dataQualityAssertions": ASSERTIONS}}])
    assert datahub_errors(as_output, schemas) == [("$.outputs[0].facets.dataQualityAssertions", "attachment")]
    as_input = _complete([], [{**table, "inputFacets": {"dataQualityAssertions": ASSERTIONS}}])
    assert datahub_errors(as_input, schemas) == []
    custom = _complete([{**table, "facets": {"fileFingerprint": "sha256"}}])
    assert datahub_errors(custom, schemas) == [("$.outputs[0].facets.fileFingerprint", "type")]
