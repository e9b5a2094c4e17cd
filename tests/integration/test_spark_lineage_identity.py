"""One identity for every Iceberg table: the custom extractor (task level) and the OpenLineage Spark listener
(application level, a child run of the task) name the same tables the same way, and the listener names no
Iceberg-internal or temporary folder. Checked on the events of a real run of the three DAGs."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from include.core import naming, settings

pytestmark = pytest.mark.integration

SPARK_TASKS = {
    "ingest_yellow_taxi_data.load_yellow_taxi_raw",
    "ingest_weather_data.stage_weather",
    "ingest_weather_data.merge_weather_raw",
    "forecast_yellow_rides.compute_hourly_actuals",
    "forecast_yellow_rides.train_model",
    "forecast_yellow_rides.write_forecast",
}
TABLES = (
    naming.TAXI_QUARANTINE,
    naming.TAXI_RAW,
    naming.WEATHER_STAGING,
    naming.WEATHER_RAW,
    naming.HOURLY_ACTUALS,
    naming.HOURLY_FORECAST,
)


def _events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _symlinks(dataset: dict) -> frozenset:
    identifiers = dataset.get("facets", {}).get("symlinks", {}).get("identifiers", [])
    return frozenset((s["namespace"], s["name"], s["type"]) for s in identifiers)


MODEL_IDS = {(naming.model_id(m).namespace, naming.model_id(m).name) for m in ("seasonal_naive", "weather")}


def _table_datasets(datasets: list[dict]) -> dict[tuple[str, str], frozenset]:
    """(namespace, name) -> symlinks of the datasets that are Iceberg tables (they carry a TABLE symlink)."""
    return {(d["namespace"], d["name"]): _symlinks(d) for d in datasets if any(s[2] == "TABLE" for s in _symlinks(d))}


def _models(datasets: list[dict]) -> set[tuple[str, str]]:
    return {(d["namespace"], d["name"]) for d in datasets} & MODEL_IDS


def _output_statistics(task_event: dict, key: tuple[str, str]) -> tuple[int, int] | None:
    for dataset in task_event["outputs"]:
        if (dataset["namespace"], dataset["name"]) == key:
            statistics = dataset.get("outputFacets", {}).get("outputStatistics")
            return (statistics["rowCount"], statistics.get("fileCount", 0)) if statistics else None
    return None


@pytest.fixture(scope="module")
def spark_events(pipeline_run):
    """The listener's events of the shared run; none would make every loop below check nothing."""
    events = _events(pipeline_run.paths.spark_lineage_events)
    assert events, f"no Spark listener event in {pipeline_run.paths.spark_lineage_events}"
    return events


def _spark_runs_under(task_run_id: str, spark_events: list[dict]) -> set[str]:
    """The Spark application runs whose parent is the task run, and their Spark-job child runs."""
    children = defaultdict(set)
    for event in spark_events:
        parent = event.get("run", {}).get("facets", {}).get("parent", {}).get("run", {}).get("runId")
        if parent:
            children[parent].add(event["run"]["runId"])
    found, frontier = set(), {task_run_id}
    while frontier:
        frontier = {child for parent in frontier for child in children[parent]} - found
        found |= frontier
    return found


def test_task_and_spark_listener_name_every_table_alike(pipeline_run, spark_events):
    airflow_events = _events(pipeline_run.paths.lineage_events)
    # The forced re-ingest of the unchanged file is recognised before any Spark session starts (test_pipeline): its
    # stage and merge have no Spark application, by design, and are left out here.
    recognised = pipeline_run.results["taxi_again"].run_id
    completes = [
        e
        for e in airflow_events
        if e["eventType"] == "COMPLETE"
        and e["job"]["name"] in SPARK_TASKS
        and (e["run"].get("facets", {}).get("airflow", {}).get("dagRun", {}).get("run_id")) != recognised
    ]
    assert {e["job"]["name"] for e in completes} == SPARK_TASKS
    models_written_by_spark, named_alike = set(), set()
    for task in completes:
        name = task["job"]["name"]
        runs = _spark_runs_under(task["run"]["runId"], spark_events)
        assert runs, f"{name}: no Spark application run under the task run"
        spark_inputs, spark_outputs, spark_models = {}, {}, set()
        for event in spark_events:
            if event["run"]["runId"] in runs:
                spark_inputs.update(_table_datasets(event.get("inputs", [])))
                spark_outputs.update(_table_datasets(event.get("outputs", [])))
                spark_models |= _models(event.get("outputs", []))
        task_inputs, task_outputs = _table_datasets(task["inputs"]), _table_datasets(task["outputs"])
        task_models = _models(task["outputs"])
        assert task_outputs or task_models, f"{name}: the task declares no table or model output"
        # A re-run that finds nothing to change commits nothing (and so the listener names no output): its COMPLETE
        # still names the table, with zero output statistics. Every task's first run writes its tables.
        assert spark_outputs.keys() <= task_outputs.keys(), name
        for key in task_outputs.keys() - spark_outputs.keys():
            assert _output_statistics(task, key) == (0, 0), (
                f"{name}: {key} written per its statistics, unnamed by Spark"
            )
        if task_outputs.keys() == spark_outputs.keys():
            named_alike.add(name)
        # every table the listener names as read is one the task declares (a MERGE also reads its target); a job
        # that only collects (the seasonal-naive model) names no input at all
        assert spark_inputs.keys() <= task_inputs.keys() | task_outputs.keys(), name
        assert spark_models <= task_models, f"{name}: the listener names a model the task does not: {spark_models}"
        models_written_by_spark |= spark_models
        spark_named = {**spark_inputs, **spark_outputs}
        for key, symlinks in {**task_inputs, **task_outputs}.items():
            if key in spark_named:
                assert symlinks == spark_named[key], f"{name}: symlinks of {key} differ"
    assert named_alike == SPARK_TASKS
    weather_model = (naming.model_id("weather").namespace, naming.model_id("weather").name)
    assert weather_model in models_written_by_spark, "the Spark-trained model is named by its final folder"


def test_listener_names_every_table_the_dags_write(spark_events):
    outputs = set()
    for event in spark_events:
        outputs |= set(_table_datasets(event.get("outputs", [])))
    expected = {(naming.table_id(t).namespace, naming.table_id(t).name) for t in TABLES}
    assert expected <= outputs


def test_no_internal_or_temporary_folder_is_a_dataset(pipeline_run, spark_events, catalog):
    warehouse = naming.storage_id(str(pipeline_run.paths.warehouse)).name
    # the DAGs' tables, and any other table of the catalog (a test's own job may have made one in the same var/)
    tables = {naming.table_id(t).name for t in TABLES} | {
        naming.table_id(name).name for _, name in catalog.list_tables(settings.ICEBERG_NAMESPACE)
    }
    models = {naming.model_id(m).name for m in ("seasonal_naive", "weather")}
    checked, in_warehouse, in_models = 0, set(), set()
    for event in spark_events:
        for dataset in event.get("inputs", []) + event.get("outputs", []):
            name = dataset["name"]
            checked += 1
            assert not name.endswith(("/data", "/metadata")) and ".tmp" not in name, f"internal folder {name}"
            if name.startswith(warehouse):
                assert name in tables, f"a warehouse path that is not a table: {name}"
                in_warehouse.add(name)
            if name.startswith(str(pipeline_run.paths.models)):
                assert name in models, f"a model path that is not the model's final folder: {name}"
                in_models.add(name)
    # not a loop over nothing: every table of the DAGs and the Spark-trained model were among the names checked
    assert checked, f"the {len(spark_events)} listener events name no dataset"
    assert in_warehouse == tables, f"tables named by the listener: {sorted(in_warehouse)}"
    assert naming.model_id("weather").name in in_models, f"models named by the listener: {sorted(in_models)}"
