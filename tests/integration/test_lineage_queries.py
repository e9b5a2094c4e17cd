"""The lineage store and every ``lineage`` query on the events of a real run of the three DAGs, through the installed
command; the HTTP endpoint receiving events through openlineage-python's real ``http`` transport. (A real DAG run
sending to ``lineage serve`` is tests/integration/test_lineage_serve_dag_run.py: it needs no shared run.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from include.core import naming
from include.core.contract import WEATHER_ELEMENTS
from include.lineage.events import load_events
from include.sources import downloads

pytestmark = pytest.mark.integration

LINEAGE = str(Path(sys.executable).parent / "lineage")
MONTH = "2025-01"


def lineage(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LINEAGE, *args], capture_output=True, text=True, input=stdin, env=os.environ.copy(), timeout=300
    )


def _ok(*args: str) -> str:
    completed = lineage(*args)
    assert completed.returncode == 0, f"lineage {' '.join(args)} failed ({completed.returncode}): {completed.stderr}"
    return completed.stdout


def _dataset_node(dataset_id: naming.DatasetId) -> str:
    return f"dataset:{dataset_id.namespace}:{dataset_id.name}"


@pytest.fixture(scope="session")
def ingested(pipeline_run, tmp_path_factory) -> dict:
    """`lineage ingest` (default: every event file under var/lineage/) into a store of its own, twice."""
    store = f"sqlite:///{tmp_path_factory.mktemp('lineage-store') / 'store.db'}"
    first = lineage("ingest", "--store", store)
    second = lineage("ingest", "--store", store)
    return {"store": store, "first": first, "second": second}


@pytest.fixture
def source_urls(pipeline_run, monkeypatch):
    monkeypatch.setenv("TLC_BASE_URL", pipeline_run.source_env["TLC_BASE_URL"])
    monkeypatch.setenv("NOAA_BASE_URL", pipeline_run.source_env["NOAA_BASE_URL"])
    return {
        "tlc": downloads.tlc_url(MONTH),
        "noaa": [downloads.noaa_url(element, MONTH) for element in WEATHER_ELEMENTS],
    }


def _distinct(events: list[dict]) -> int:
    """Distinct events: only the same event again is a duplicate. Not (run id, type, time): the Spark listener can
    emit two RUNNING events of one run in the same millisecond that differ in their facets (seen in CI), and the
    store keeps both."""
    return len({json.dumps(event, sort_keys=True) for event in events})


def test_ingest_reads_airflow_and_spark_events_and_stores_each_once(ingested, pipeline_run):
    airflow_events = load_events(pipeline_run.paths.lineage_events)
    spark_events = load_events(pipeline_run.paths.spark_lineage_events)
    assert ingested["first"].returncode == 0, ingested["first"].stderr
    assert f"{len(airflow_events) + len(spark_events)} events read" in ingested["first"].stdout
    assert f" {_distinct(airflow_events + spark_events)} new" in ingested["first"].stdout
    assert ", 0 new," in ingested["second"].stdout


def test_upstream_of_the_forecast_reaches_the_tlc_and_noaa_source_urls(ingested, source_urls, pipeline_run):
    as_of = ("--as-of", pipeline_run.finished_at)
    graph = json.loads(
        _ok("upstream", "nyc_taxi.yellow_rides_hourly_forecast", *as_of, "--json", "--store", ingested["store"])
    )["graph"]
    ids = {node["id"] for node in graph}
    assert _dataset_node(naming.source_url_id(source_urls["tlc"])) in ids
    for url in source_urls["noaa"]:
        assert _dataset_node(naming.source_url_id(url)) in ids
    for table in (naming.TAXI_RAW, naming.WEATHER_RAW, naming.HOURLY_ACTUALS):
        assert _dataset_node(naming.table_id(table)) in ids
    tree = _ok("upstream", "nyc_taxi.yellow_rides_hourly_forecast", *as_of, "--store", ingested["store"])
    assert source_urls["tlc"] in tree and "forecast_yellow_rides.train_model" in tree and "nyc_taxi.weather_raw" in tree


def test_impact_of_raw_taxi_includes_actuals_both_models_and_the_forecast(ingested, pipeline_run):
    """The current graph holds each job as its newest run: train_model last wrote the weather model, so the
    seasonal-naive model is impacted only through history (``--all-history``), as Marquez's current versions say."""
    history = json.loads(
        _ok("impact", "nyc_taxi.yellow_taxi_raw", "--all-history", "--json", "--store", ingested["store"])
    )
    as_of = ("--as-of", pipeline_run.finished_at)
    result = json.loads(_ok("impact", "nyc_taxi.yellow_taxi_raw", *as_of, "--json", "--store", ingested["store"]))
    ids = {node["id"] for node in result["graph"]}
    ever = {node["id"] for node in history["graph"]}
    for dataset_id in (
        naming.table_id(naming.HOURLY_ACTUALS),
        naming.model_id("weather"),
        naming.table_id(naming.HOURLY_FORECAST),
    ):
        assert _dataset_node(dataset_id) in ids and _dataset_node(dataset_id) in ever
    assert _dataset_node(naming.model_id("seasonal_naive")) in ever
    assert _dataset_node(naming.model_id("seasonal_naive")) not in ids, "an output the newest version dropped"
    assert _dataset_node(naming.table_id(naming.WEATHER_RAW)) not in ids
    rerun = {run["job"]["name"] for run in result["runs"]}
    assert {
        "forecast_yellow_rides.compute_hourly_actuals",
        "forecast_yellow_rides.train_model",
        "forecast_yellow_rides.write_forecast",
    } <= rerun
    text = _ok("impact", "nyc_taxi.yellow_taxi_raw", *as_of, "--store", ingested["store"])
    assert "nyc_taxi.yellow_rides_hourly_forecast" in text and "jobs to re-run" in text


def _train_runs(store: str) -> dict[str, dict]:
    train_runs = json.loads(_ok("runs", "forecast_yellow_rides.train_model", "--json", "--store", store))["runs"]
    return {Path(run["outputs"][0]["name"]).name: run for run in train_runs}


def test_diff_of_the_seasonal_naive_and_weather_runs_names_weather_raw_and_the_code_change(ingested):
    trains = _train_runs(ingested["store"])
    naive, weather = trains["seasonal_naive"], trains["weather"]
    assert naive["jobVersion"] != weather["jobVersion"]
    result = json.loads(_ok("diff", naive["id"], weather["id"], "--json", "--store", ingested["store"]))
    changes = result["changes"]
    assert [item["dataset"] for item in changes["inputs"]["added"]] == ["nyc_taxi.weather_raw"]
    assert changes["codeHash"][0] != changes["codeHash"][1] and "jobVersion" in changes
    assert changes["parameters"]["conf.model"] == ["seasonal_naive", "weather"]
    text = _ok("diff", naive["id"], weather["id"], "--store", ingested["store"])
    assert "+ nyc_taxi.weather_raw" in text and "code version changed" in text
    dag_runs = {run["parentRunId"] for run in (naive, weather)}
    assert len(dag_runs) == 2  # the two DAG runs, compared through their task runs
    dag_diff = json.loads(
        _ok("diff", naive["parentRunId"], weather["parentRunId"], "--json", "--store", ingested["store"])
    )
    assert "nyc_taxi.weather_raw" in [item["dataset"] for item in dag_diff["changes"]["inputs"]["added"]]
    assert "forecast_yellow_rides.train_model" in dag_diff["changes"]["tasks"]


def test_columns_of_forecasted_total_rides_reach_the_pickup_time(ingested, pipeline_run):
    forecast_outputs = [
        d
        for e in load_events(pipeline_run.paths.lineage_events)
        if e["eventType"] == "COMPLETE" and e["job"]["name"] == "forecast_yellow_rides.write_forecast"
        for d in e["outputs"]
    ]
    assert any("columnLineage" in d.get("facets", {}) for d in forecast_outputs), (
        "write_forecast's COMPLETE events carry no columnLineage: the extractor emitted identities only (see the "
        "task log for 'not ready within')"
    )
    graph = json.loads(
        _ok(
            "columns",
            "nyc_taxi.yellow_rides_hourly_forecast.forecasted_total_rides",
            "--json",
            "--store",
            ingested["store"],
        )
    )["graph"]
    raw = naming.table_id(naming.TAXI_RAW)
    assert f"datasetField:{raw.namespace}:{raw.name}:tpep_pickup_datetime" in {node["id"] for node in graph}
    text = _ok("columns", "nyc_taxi.yellow_rides_hourly_forecast.forecasted_total_rides", "--store", ingested["store"])
    assert (
        "nyc_taxi.yellow_rides_hourly_actuals.total_rides" in text
        and "nyc_taxi.yellow_taxi_raw.tpep_pickup_datetime" in text
    )


def test_spark_listener_runs_join_the_airflow_graph_and_run_hierarchy(ingested, pipeline_run):
    landed = str(downloads.tlc_landed_path(MONTH, pipeline_run.paths))
    as_of = ("--as-of", pipeline_run.finished_at)
    graph = json.loads(_ok("downstream", landed, *as_of, "--json", "--store", ingested["store"]))["graph"]
    jobs = {node["data"]["name"] for node in graph if node["type"] == "JOB"}
    assert "ingest_yellow_taxi_data.load_yellow_taxi_raw" in jobs
    assert any(job.startswith("load_taxi.") for job in jobs), f"no Spark listener job reads the landed file: {jobs}"
    load_runs = json.loads(
        _ok("runs", "ingest_yellow_taxi_data.load_yellow_taxi_raw", "--json", "--store", ingested["store"])
    )["runs"]
    applications = json.loads(_ok("runs", "load_taxi", "--json", "--store", ingested["store"]))["runs"]
    assert applications and {app["parentRunId"] for app in applications} <= {run["id"] for run in load_runs}
    # Other modules load other months into the same var/: take the run that loaded this one (the forced re-ingest
    # of the unchanged file is recognised and starts no Spark application: not that one).
    parents = {app["parentRunId"] for app in applications}
    load_run = next(
        run for run in load_runs if landed in {item["name"] for item in run["inputs"]} and run["id"] in parents
    )
    dag_run = load_run["parentRunId"]  # DAG run -> task run -> Spark application
    impact = json.loads(_ok("impact", "--run", dag_run, "--json", "--store", ingested["store"]))
    touched = {run["id"] for run in impact["runs"]}
    assert load_run["id"] in touched and {app["id"] for app in applications} & touched
    assert "nyc_taxi.yellow_taxi_raw" in {v["label"] for v in impact["datasetVersions"]}


def test_clear_errors_exit_2(ingested, tmp_path):
    unknown = lineage("upstream", "nyc_taxi.yellow_rides_hourly_forcast", "--store", ingested["store"])
    assert (
        unknown.returncode == 2
        and "did you mean" in unknown.stderr
        and "nyc_taxi.yellow_rides_hourly_forecast" in unknown.stderr
    )
    empty = lineage(
        "upstream", "nyc_taxi.yellow_rides_hourly_forecast", "--store", f"sqlite:///{tmp_path / 'empty.db'}"
    )
    assert empty.returncode == 2 and "empty" in empty.stderr
    bad = tmp_path / "events.jsonl"
    bad.write_text(
        '{"eventTime": "2025-01-01T00:00:00Z", "eventType": "START", "run": {"runId": "r"}, "job": {"namespace": "n", "name": "j"}}\n'
        '{"eventTime": "yesterday", "run": {"runId": "r"}, "job": {"namespace": "n", "name": "j"}}\n'
    )
    unreadable = lineage("ingest", str(bad), "--store", f"sqlite:///{tmp_path / 'bad.db'}")
    assert unreadable.returncode == 2 and f"{bad}:2" in unreadable.stderr and "eventTime" in unreadable.stderr


def test_http_transport_delivers_real_events_to_lineage_serve(lineage_server, pipeline_run):
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    events = load_events(pipeline_run.paths.lineage_events)
    plain = HttpTransport(
        HttpConfig.from_dict({"type": "http", "url": lineage_server["url"], "endpoint": "api/v1/lineage"})
    )
    gzipped = HttpTransport(
        HttpConfig.from_dict(
            {"type": "http", "url": lineage_server["url"], "endpoint": "api/v1/lineage", "compression": "gzip"}
        )
    )
    for index, event in enumerate(events):
        (gzipped if index % 2 else plain).emit(event)
    plain.emit(events[0])  # a duplicate
    assert requests.get(f"{lineage_server['url']}/api/v1/health", timeout=5).json()["events"] == _distinct(events)
    forecast = naming.table_id(naming.HOURLY_FORECAST)
    response = requests.get(
        f"{lineage_server['url']}/api/v1/lineage",
        params={"nodeId": f"dataset:{forecast.namespace}:{forecast.name}", "depth": 50},
        timeout=30,
    )
    assert response.status_code == 200
    ids = {node["id"] for node in response.json()["graph"]}
    assert (
        _dataset_node(naming.table_id(naming.TAXI_RAW)) in ids
        and "job:nyc_taxi_pipeline:forecast_yellow_rides.write_forecast" in ids
    )
    missing = requests.get(
        f"{lineage_server['url']}/api/v1/lineage", params={"nodeId": "nyc_taxi.yellow_rides_hourly_forcast"}, timeout=30
    )
    assert missing.status_code == 404 and "nyc_taxi.yellow_rides_hourly_forecast" in missing.json()["detail"]
