"""The custom extractor on what it is for: a stock SparkSubmitOperator with inlets/outlets Assets, run for real by
``airflow dags test`` of a test DAG folder, gets the same datasets and Iceberg facets as the project's operator."""

from __future__ import annotations

import pytest

from include.airflow import runs
from include.core import naming, settings
from include.lineage.events import load_events

pytestmark = pytest.mark.integration

TEST_DAGS = settings.PROJECT_ROOT / "tests" / "dags"
ICEBERG_DATASET_FACETS = {"schema", "symlinks", "catalog", "version"}


@pytest.fixture(scope="module")
def complete_events(pipeline_run):
    before = len(load_events(pipeline_run.paths.lineage_events))
    result = runs.dags_test(
        "stock_spark_submit",
        "2025-02-01",
        env={"AIRFLOW__CORE__DAGS_FOLDER": str(TEST_DAGS)},
        log_file=pipeline_run.paths.var / "test-logs" / "stock_spark_submit.log",
    )
    assert result.succeeded, f"stock_spark_submit ended {result.state}; log: {pipeline_run.paths.var / 'test-logs'}"
    events = load_events(pipeline_run.paths.lineage_events)[before:]
    by_task = {}
    for task in ("project_operator", "stock_operator"):
        [by_task[task]] = [
            e for e in events if e["job"]["name"] == f"stock_spark_submit.{task}" and e["eventType"] == "COMPLETE"
        ]
    return by_task


def _ids(datasets) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def test_stock_operator_gets_the_same_datasets_as_the_project_operator(complete_events):
    project, stock = complete_events["project_operator"], complete_events["stock_operator"]
    staging, raw = naming.table_id(naming.WEATHER_STAGING), naming.table_id(naming.WEATHER_RAW)
    assert _ids(stock["inputs"]) == _ids(project["inputs"]) == [(staging.namespace, staging.name)]
    assert _ids(stock["outputs"]) == _ids(project["outputs"]) == [(raw.namespace, raw.name)]


def test_stock_operator_gets_the_iceberg_facets_read_from_the_catalog(complete_events, catalog):
    project, stock = complete_events["project_operator"], complete_events["stock_operator"]
    for side in ("inputs", "outputs"):
        stock_facets, project_facets = stock[side][0]["facets"], project[side][0]["facets"]
        assert ICEBERG_DATASET_FACETS <= set(stock_facets), f"{side}: {sorted(stock_facets)}"
        for facet in ("schema", "symlinks", "catalog"):
            assert {k: v for k, v in stock_facets[facet].items() if not k.startswith("_")} == {
                k: v for k, v in project_facets[facet].items() if not k.startswith("_")
            }, f"{side}: {facet} differs"
    assert "outputStatistics" in stock["outputs"][0]["outputFacets"]
    raw = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.WEATHER_RAW}")
    stock_version = int(stock["outputs"][0]["facets"]["version"]["datasetVersion"])
    assert raw.snapshot_by_id(stock_version) is not None, "the version is a snapshot of the table"
    assert stock["job"]["facets"]["sourceCode"]["sourceCode"] == project["job"]["facets"]["sourceCode"]["sourceCode"]
