"""Lineage of a real run of the three DAGs: schema-valid events, one connected graph, the run hierarchy, failures."""

from __future__ import annotations

import itertools
import json

import networkx as nx
import pytest

from include.airflow import runs
from include.core import naming
from include.lineage.events import load_events
from include.lineage.validation import EventValidator
from include.sources import downloads, sample_server
from tests.lineage_graph import dataset_lineage, dataset_node

pytestmark = pytest.mark.integration

DAG_IDS = {"ingest_yellow_taxi_data", "ingest_weather_data", "forecast_yellow_rides"}


def _of_the_three_dags(events: list[dict]) -> list[dict]:
    """Other tests run further DAGs (a test DAG among them) into the same event file."""
    return [e for e in events if e["job"]["name"].split(".", 1)[0] in DAG_IDS]


@pytest.fixture(scope="session")
def events(pipeline_run):
    return _of_the_three_dags(load_events(pipeline_run.paths.lineage_events))


@pytest.fixture(scope="session")
def spark_events(pipeline_run):
    return load_events(pipeline_run.paths.spark_lineage_events)


def _node(key: str) -> str:
    dataset_id, _ = naming.dataset_for_key(key)
    return dataset_node({"namespace": dataset_id.namespace, "name": dataset_id.name})


def _task_events(events, task: str, event_type: str = "COMPLETE") -> list[dict]:
    return [e for e in events if e["job"]["name"].endswith("." + task) and e["eventType"] == event_type]


def test_every_event_validates_against_the_official_schemas(events, spark_events):
    validator = EventValidator()
    result = validator.validate(events + spark_events)
    assert result.errors == []
    for facet in (
        "parent",
        "schema",
        "symlinks",
        "version",
        "catalog",
        "outputStatistics",
        "columnLineage",
        "dataQualityMetrics",
        "dataQualityAssertions",
        "fileFingerprint",
        "modelMetrics",
        "sourceCode",
        "sourceCodeLocation",
        "jobType",
    ):
        assert facet in result.facets_checked, f"no {facet} facet was emitted"
        assert facet not in result.facets_without_schema
    broken = json.loads(json.dumps(_task_events(events, "load_yellow_taxi_raw")[0]))
    broken["outputs"][0]["facets"]["symlinks"]["identifiers"] = [{"namespace": 1}]
    assert validator.validate([broken]).errors, "the validator must reject an invalid facet"


def test_graph_has_the_path_from_tlc_source_to_forecast(events, pipeline_run, monkeypatch):
    monkeypatch.setenv("TLC_BASE_URL", pipeline_run.source_env["TLC_BASE_URL"])
    graph = dataset_lineage(events)
    month = "2025-01"
    chain = [
        dataset_node(naming.source_url_id(downloads.tlc_url(month)).__dict__),
        _node(str(downloads.tlc_landed_path(month))),
        _node(naming.TAXI_RAW),
        _node(naming.HOURLY_ACTUALS),
        _node(naming.model_key("seasonal_naive")),
        _node(naming.HOURLY_FORECAST),
    ]
    for source, target in itertools.pairwise(chain):
        assert graph.has_edge(source, target), f"missing edge {source} -> {target}"


def test_graph_has_the_path_from_weather_source_to_weather_model(events, pipeline_run, monkeypatch):
    monkeypatch.setenv("NOAA_BASE_URL", pipeline_run.source_env["NOAA_BASE_URL"])
    graph = dataset_lineage(events)
    source = dataset_node(naming.source_url_id(downloads.noaa_url("prcp", "2025-01")).__dict__)
    assert nx.has_path(graph, source, _node(naming.WEATHER_RAW))
    assert nx.has_path(graph, _node(naming.WEATHER_RAW), _node(naming.model_key("weather")))
    assert nx.has_path(graph, source, _node(naming.HOURLY_FORECAST))
    assert not nx.has_path(graph, source, _node(naming.model_key("seasonal_naive")))


def test_forecast_dag_reads_the_very_datasets_the_ingest_dags_wrote(events):
    def ids(dag_prefix, side):
        return {
            (d["namespace"], d["name"])
            for e in events
            if e["job"]["name"].startswith(dag_prefix)
            for d in e.get(side) or []
        }

    written = ids("ingest_yellow_taxi_data.", "outputs") | ids("ingest_weather_data.", "outputs")
    read = ids("forecast_yellow_rides.compute_hourly_actuals", "inputs") | ids(
        "forecast_yellow_rides.train_model", "inputs"
    )
    raw_ids = {(naming.table_id(t).namespace, naming.table_id(t).name) for t in (naming.TAXI_RAW, naming.WEATHER_RAW)}
    assert raw_ids <= written and raw_ids <= read


def test_task_runs_are_children_of_their_dag_run_and_spark_runs_children_of_their_task_run(events, spark_events):
    dag_runs = {e["run"]["runId"]: e["job"]["name"] for e in events if e["job"]["name"] in DAG_IDS}
    task_runs = {}
    for event in events:
        if event["job"]["name"] in DAG_IDS:
            continue
        parent = event["run"]["facets"]["parent"]
        assert parent["run"]["runId"] in dag_runs, f"{event['job']['name']}: parent is not a DAG run"
        assert event["job"]["name"].startswith(parent["job"]["name"] + ".")
        task_runs[event["run"]["runId"]] = (event["job"]["name"], parent["run"]["runId"])
    task_names = {name for name, _ in task_runs.values()}
    spark_apps = [
        e
        for e in spark_events
        if e["eventType"] == "START"
        and e["run"]["facets"].get("spark_applicationDetails")
        and e["run"]["facets"].get("parent", {}).get("job", {}).get("name") in task_names
    ]
    assert {app["run"]["facets"]["parent"]["job"]["name"].rsplit(".", 1)[-1] for app in spark_apps} == {
        "load_yellow_taxi_raw",
        "stage_weather",
        "merge_weather_raw",
        "compute_hourly_actuals",
        "train_model",
        "write_forecast",
    }
    for app in spark_apps:
        parent = app["run"]["facets"]["parent"]
        task_name, dag_run_id = task_runs[parent["run"]["runId"]]
        assert parent["job"]["name"] == task_name
        assert parent["root"]["run"]["runId"] == dag_run_id


def test_switching_to_the_weather_model_adds_the_weather_input_and_changes_the_job_version(events):
    trains = _task_events(events, "train_model")
    by_model = {e["outputs"][0]["name"].rsplit("/", 1)[-1]: e for e in trains}
    naive, weather = by_model["seasonal_naive"], by_model["weather"]
    naive_inputs = {(d["namespace"], d["name"]) for d in naive["inputs"]}
    weather_inputs = {(d["namespace"], d["name"]) for d in weather["inputs"]}
    weather_raw = (naming.table_id(naming.WEATHER_RAW).namespace, naming.table_id(naming.WEATHER_RAW).name)
    assert weather_inputs - naive_inputs == {weather_raw}
    assert naive["job"]["facets"]["sourceCode"]["sourceCode"] != weather["job"]["facets"]["sourceCode"]["sourceCode"]
    naive_model, weather_model = naive["outputs"][0]["facets"], weather["outputs"][0]["facets"]
    assert naive_model["version"]["datasetVersion"] != weather_model["version"]["datasetVersion"]


def test_model_metrics_facets_carry_what_training_measured(events, pipeline_run):
    for train in _task_events(events, "train_model"):
        model = train["outputs"][0]["name"].rsplit("/", 1)[-1]
        saved = json.loads((naming.model_dir(model, pipeline_run.paths) / "model.json").read_text())
        facet = train["outputs"][0]["facets"]["modelMetrics"]
        assert (
            facet["modelName"],
            facet["modelVersion"],
            facet["mae"],
            facet["baselineMae"],
            facet["holdoutRows"],
        ) == (saved["model_name"], saved["model_version"], saved["mae"], saved["baseline_mae"], saved["holdout_rows"])
        assert train["outputs"][0]["facets"]["version"]["datasetVersion"] == saved["model_version"]


def test_complete_events_carry_iceberg_facets_that_match_the_catalog(events, catalog):
    load = _task_events(events, "load_yellow_taxi_raw")[0]
    raw = load["outputs"][0]
    table = catalog.load_table(f"nyc_taxi.{naming.TAXI_RAW}")
    snapshot = table.snapshot_by_id(int(raw["facets"]["version"]["datasetVersion"]))
    assert snapshot is not None
    assert raw["outputFacets"]["outputStatistics"]["rowCount"] == int(snapshot.summary["added-records"]) > 0
    assert [f["name"] for f in raw["facets"]["schema"]["fields"]] == [f.name for f in table.schema().fields]
    assert raw["facets"]["symlinks"]["identifiers"][0] == {
        "namespace": naming.table_symlink(naming.TAXI_RAW).namespace,
        "name": f"nyc_taxi.{naming.TAXI_RAW}",
        "type": "TABLE",
    }
    checks = {a["assertion"]: a for a in raw["facets"]["dataQualityAssertions"]["assertions"]}
    assert {name: checks[name]["success"] for name in ("unique", "not_null", "non_negative")} == {
        "unique": True,
        "not_null": True,
        "non_negative": True,
    }
    # write-audit-publish: each expectation of include/quality/expectations.py, with severity and threshold
    days = checks["days_missing"]
    assert (days["success"], days["severity"], days["expected"], days["actual"]) == (True, "error", "<= 0", "0")
    file_metrics = load["inputs"][0]["inputFacets"]["dataQualityMetrics"]
    assert file_metrics["rowCount"] > 0 and file_metrics["columnMetrics"]["PULocationID"]["nullCount"] == 0
    # the file's checks where OpenLineage defines them and its consumers read them: an input facet
    file_checks = load["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert {a["assertion"] for a in file_checks} >= {"null_pickup_zone", "negative_total"}
    assert "dataQualityAssertions" not in load["inputs"][0]["facets"]
    actuals = _task_events(events, "compute_hourly_actuals")[0]["outputs"][0]["facets"]["columnLineage"]["fields"]
    # count(*) per pickup hour and zone: observed from the listener's dataset-level dependencies of the aggregation
    total_rides = {(f["field"], t["type"]) for f in actuals["total_rides"]["inputFields"] for t in f["transformations"]}
    assert {field for field, _ in total_rides} == {"tpep_pickup_datetime", "PULocationID"}
    assert ("PULocationID", "INDIRECT") in total_rides


def test_landed_file_carries_its_fingerprint_from_download_to_load(events, pipeline_run):
    landed = downloads.tlc_landed_path("2025-01", pipeline_run.paths)
    fingerprint = downloads.fingerprint_file(landed)
    download = _task_events(events, "download_tlc_month")[0]["outputs"][0]
    load = _task_events(events, "load_yellow_taxi_raw")[0]["inputs"][0]
    assert download["name"] == load["name"] == str(landed)
    assert (
        download["facets"]["fileFingerprint"]["fingerprint"]
        == load["facets"]["fileFingerprint"]["fingerprint"]
        == fingerprint
    )


def test_spark_listener_and_extractor_name_datasets_identically(events, spark_events, spark, pipeline_run, catalog):
    """The listener names the landed file the load task reads exactly as the extractor does. For Iceberg tables of a
    JDBC catalog openlineage-spark 1.53 names nothing (OpenLineage#4677), so the table's id is checked by reading
    the table from its metadata file, which the listener resolves without the catalog."""
    load_task = _task_events(events, "load_yellow_taxi_raw")[0]
    extractor_input = (load_task["inputs"][0]["namespace"], load_task["inputs"][0]["name"])
    parent_of = lambda e: e["run"]["facets"].get("parent", {})  # noqa: E731
    applications = {
        e["run"]["runId"]
        for e in spark_events
        if parent_of(e).get("job", {}).get("name") == "ingest_yellow_taxi_data.load_yellow_taxi_raw"
    }
    listener_inputs = {
        (d["namespace"], d["name"])
        for e in spark_events
        if e["run"]["runId"] in applications or parent_of(e).get("run", {}).get("runId") in applications
        for d in e.get("inputs") or []
    }
    assert extractor_input in listener_inputs

    before = len(load_events(pipeline_run.paths.spark_lineage_events))
    table = catalog.load_table(f"nyc_taxi.{naming.TAXI_RAW}")
    spark.read.format("iceberg").load(table.metadata_location).limit(1).collect()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)
    new_events = load_events(pipeline_run.paths.spark_lineage_events)[before:]
    listener = {(d["namespace"], d["name"]): d["facets"] for e in new_events for d in e.get("inputs") or []}
    raw_id = naming.table_id(naming.TAXI_RAW)
    assert (raw_id.namespace, raw_id.name) in listener
    assert listener[(raw_id.namespace, raw_id.name)]["version"]["datasetVersion"] == str(
        table.current_snapshot().snapshot_id
    )
    loaded = {(d["namespace"], d["name"]) for d in _task_events(events, "load_yellow_taxi_raw")[-1]["outputs"]}
    assert (raw_id.namespace, raw_id.name) in loaded


@pytest.fixture(scope="session")
def failed_run(pipeline_run):
    root = pipeline_run.paths.var / "bad-source"
    (root / "trip-data").mkdir(parents=True, exist_ok=True)
    (root / "trip-data" / "yellow_tripdata_2025-03.parquet").write_bytes(b"PAR1 this is not parquet at all")
    with sample_server.serve(root) as env:
        return runs.dags_test("ingest_yellow_taxi_data", "2025-04-01", {}, env=env)


def test_bad_input_fails_at_once_with_a_fail_event_carrying_the_error(failed_run, pipeline_run):
    assert failed_run.state == "failed"
    events = load_events(pipeline_run.paths.lineage_events)
    fails = [
        e
        for e in events
        if e["eventType"] == "FAIL"
        and e["job"]["name"] == "ingest_yellow_taxi_data.load_yellow_taxi_raw"
        and "yellow_tripdata_2025-03.parquet" in e["run"]["facets"]["errorMessage"]["message"]
    ]
    assert len(fails) == 1, "bad input must not be retried"
    message = fails[0]["run"]["facets"]["errorMessage"]["message"]
    assert "yellow_tripdata_2025-03.parquet" in message and "not a readable parquet file" in message
    # The FAIL carries what the task did before it failed (it read the file's footer and wrote nothing), and what
    # it was meant to write as its declaration: lineage observed, not declared
    drift = fails[0]["run"]["facets"]["lineageDrift"]
    assert naming.table_id(naming.TAXI_RAW).name in {d["name"] for d in drift["declaredOutputs"]}
    assert {d["name"] for d in fails[0]["outputs"]} <= {
        naming.table_id(t).name for t in (naming.TAXI_RAW, naming.TAXI_QUARANTINE)
    }


def test_task_events_are_emitted_from_a_thread_of_the_task_not_a_child_forked_per_event(pipeline_run):
    """`execute_in_thread = True`: the task process builds one client and reuses it. Forking instead builds a client
    in a fresh child for every event (0.1–0.2 s each on the task's critical path), one log line each."""
    log = pipeline_run.results["taxi"].log
    emitted = log.count("Successfully emitted OpenLineage")
    clients = log.count("OpenLineageClient will use")
    assert emitted >= 2 * 2, "a START and a COMPLETE for each of the taxi DAG's two tasks"
    # One client in the task process, one in the provider's pool for the DAG run's own events.
    assert 1 <= clients <= 2, (clients, emitted)
