"""Lineage observed, not declared, through `airflow dags test` on real Spark and Iceberg (tests/dags/observed_lineage.py):

- a plain PySpark script on Airflow's stock SparkSubmitOperator, without inlets/outlets, gets the tables it read and
  wrote, their schema and its column lineage;
- the same script behind the project's operator declaring a table it does not read: COMPLETE names the table read,
  the ``lineageDrift`` facet and the drift alert name the declared one;
- a job edited between runs, its DAG unchanged: task-level lineage, the job version and `lineage diff` follow it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from include.airflow import runs
from include.core import naming, settings
from include.lineage.events import load_events

pytestmark = pytest.mark.integration

TEST_DAGS = settings.PROJECT_ROOT / "tests" / "dags"
LINEAGE = str(Path(sys.executable).parent / "lineage")

ZONE_TRIP_COUNTS = """\
# A plain PySpark job: no job report, nothing of the project's imported.
from pyspark.sql import SparkSession, functions as F

spark = SparkSession.builder.getOrCreate()
trips = spark.table("nyc_taxi.yellow_taxi_raw")
counts = trips.groupBy(F.col("PULocationID").alias("zone")).agg(F.count("*").alias("trips"))
counts.writeTo("nyc_taxi.zone_trip_counts").using("iceberg").createOrReplace()
spark.stop()
"""

EVOLVING = {
    "taxi only": """\
from pyspark.sql import SparkSession, functions as F

spark = SparkSession.builder.getOrCreate()
counts = spark.table("nyc_taxi.yellow_taxi_raw").groupBy("PULocationID").agg(F.count("*").alias("trips"))
counts.writeTo("nyc_taxi.zone_evolving").using("iceberg").createOrReplace()
spark.stop()
""",
    "taxi and weather": """\
from pyspark.sql import SparkSession, functions as F

spark = SparkSession.builder.getOrCreate()
counts = spark.table("nyc_taxi.yellow_taxi_raw").groupBy("PULocationID").agg(F.count("*").alias("trips"))
weather = spark.table("nyc_taxi.weather_raw").agg(F.max("day_01").alias("wettest_first_day"))
counts.crossJoin(weather).writeTo("nyc_taxi.zone_evolving").using("iceberg").createOrReplace()
spark.stop()
""",
}


def _ids(datasets: list[dict]) -> set[tuple[str, str]]:
    return {(d["namespace"], d["name"]) for d in datasets}


def _id(key: str) -> tuple[str, str]:
    dataset_id, _ = naming.dataset_for_key(key)
    return dataset_id.namespace, dataset_id.name


def _complete(events: list[dict], job: str) -> dict:
    [event] = [e for e in events if e["job"]["name"] == job and e["eventType"] == "COMPLETE"]
    return event


def _dags_test(paths, dag_id: str, logical_date: str) -> list[dict]:
    before = len(load_events(paths.lineage_events))
    result = runs.dags_test(
        dag_id,
        logical_date,
        env={"AIRFLOW__CORE__DAGS_FOLDER": str(TEST_DAGS)},
        log_file=paths.var / "test-logs" / f"{dag_id}-{logical_date[:13]}.log",
    )
    assert result.succeeded, f"{dag_id} ended {result.state}; log: {paths.var / 'test-logs'}"
    return load_events(paths.lineage_events)[before:]


@pytest.fixture(scope="module")
def plain_script_events(pipeline_run):
    jobs = pipeline_run.paths.var / "byo-jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / "zone_trip_counts.py").write_text(ZONE_TRIP_COUNTS)
    alerts = pipeline_run.paths.var / "alerts"
    before = {path.name for path in alerts.rglob("*.json")} if alerts.exists() else set()
    events = _dags_test(pipeline_run.paths, "observed_lineage", "2025-02-02")
    new_alerts = [p for p in alerts.rglob("*.json") if p.name not in before] if alerts.exists() else []
    return events, [json.loads(p.read_text()) for p in new_alerts]


def test_a_plain_script_on_a_stock_operator_gets_what_it_read_and_wrote(plain_script_events):
    events, _ = plain_script_events
    complete = _complete(events, "observed_lineage.stock_plain_script")
    print("stock operator's COMPLETE:", json.dumps({k: complete[k] for k in ("inputs", "outputs")}, indent=1)[:4000])
    assert _ids(complete["inputs"]) == {_id(naming.TAXI_RAW)}
    assert _ids(complete["outputs"]) == {_id("zone_trip_counts")}
    [output] = complete["outputs"]
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == ["zone", "trips"]
    zone = output["facets"]["columnLineage"]["fields"]["zone"]["inputFields"]
    assert {(f["namespace"], f["name"], f["field"]) for f in zone} == {(*_id(naming.TAXI_RAW), "PULocationID")}
    assert "lineageDrift" not in complete["run"]["facets"], "a task that declares nothing cannot drift"


def test_a_declared_input_the_task_did_not_read_is_drift_not_lineage(plain_script_events):
    events, alerts = plain_script_events
    complete = _complete(events, "observed_lineage.declared_elsewhere")
    assert _ids(complete["inputs"]) == {_id(naming.TAXI_RAW)}, "the table really read, not the declared one"
    assert _ids(complete["outputs"]) == {_id("zone_trip_counts")}
    drift = complete["run"]["facets"]["lineageDrift"]
    assert drift["drifted"] is True and drift["observed"] is True
    assert _ids(drift["declaredNotRead"]) == {_id(naming.WEATHER_RAW)}
    assert _ids(drift["readNotDeclared"]) == {_id(naming.TAXI_RAW)}
    start = [
        e for e in events if e["job"]["name"] == "observed_lineage.declared_elsewhere" and e["eventType"] == "START"
    ]
    for event in start:
        assert event["inputs"] == [] and event["outputs"] == [], "START carries the declaration as a facet only"
        assert event["run"]["facets"]["lineageDrift"]["observed"] is False
    [alert] = [a for a in alerts if a.get("kind") == "drift"]
    print("drift alert:", alert.get("text", alert))
    assert alert["task_id"] == "declared_elsewhere"
    text = json.dumps(alert)
    assert naming.WEATHER_RAW in text and naming.TAXI_RAW in text


def _lineage(*args: str) -> str:
    completed = subprocess.run([LINEAGE, *args], capture_output=True, text=True, env=os.environ.copy(), timeout=300)
    assert completed.returncode == 0, f"lineage {' '.join(args)}: {completed.stderr}"
    return completed.stdout


def test_a_job_edited_with_its_dag_unchanged_shows_in_lineage_its_version_and_diff(pipeline_run, tmp_path):
    jobs = pipeline_run.paths.var / "byo-jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    completes = []
    for day, version in (("03", "taxi only"), ("04", "taxi and weather"), ("05", "taxi only")):
        (jobs / "evolving.py").write_text(EVOLVING[version])
        completes.append(
            _complete(_dags_test(pipeline_run.paths, "evolving_job", f"2025-02-{day}"), "evolving_job.evolving")
        )
    inputs = [_ids(event["inputs"]) for event in completes]
    taxi, weather = _id(naming.TAXI_RAW), _id(naming.WEATHER_RAW)
    assert inputs == [{taxi}, {taxi, weather}, {taxi}], "one more table read, then one fewer"
    store = f"sqlite:///{tmp_path / 'store.db'}"
    _lineage("ingest", "--store", store)
    runs_ = [event["run"]["runId"] for event in completes]
    added = json.loads(_lineage("diff", "--store", store, "--json", runs_[0], runs_[1]))
    removed = json.loads(_lineage("diff", "--store", store, "--json", runs_[1], runs_[2]))
    print("lineage diff (one more table):", json.dumps(added["changes"], indent=1)[:3000])
    assert added["changes"]["jobVersion"], "new code, new inputs: a new job version"
    assert {(d["namespace"], d["name"]) for d in added["changes"]["inputs"]["added"]} == {weather}
    assert {(d["namespace"], d["name"]) for d in removed["changes"]["inputs"]["removed"]} == {weather}
