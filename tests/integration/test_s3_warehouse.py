"""The warehouse on an object store: an S3-compatible server (moto's, from PyPI) on 127.0.0.1, Iceberg's S3FileIO
(``iceberg-aws-bundle``) in Spark and in the local REST catalog server, pyarrow's S3 in pyiceberg.

What a user sets, and nothing else: ``ICEBERG_WAREHOUSE=s3://bucket/prefix``, ``S3_ENDPOINT`` and the standard AWS
variables. The taxi DAG writes through it and the forecast DAG reads through it; the extractor and the Spark listener
name every table ``s3://bucket`` + key, and no credential appears in any event or report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import boto3
import pytest
import requests

from include.core import naming, settings
from include.sources import sample_server
from tests.integration.isolated_var import IsolatedVar
from tests.support import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]  # module fixtures run several DAGs

BUCKET = "lakehouse-scaleout"
PREFIX = "warehouse"
ACCESS_KEY = "AKIASCALEOUTTEST0001"
SECRET_KEY = "s3-secret-Zq7wK2pX9vN4mR8tL1yB"  # planted: must never reach lineage
MONTH = (2025, 1)
ROWS = 5_000
TABLES = (naming.TAXI_QUARANTINE, naming.TAXI_RAW, naming.HOURLY_ACTUALS, naming.HOURLY_FORECAST)
SPARK_TASKS = {
    "ingest_yellow_taxi_data.load_yellow_taxi_raw",
    "forecast_yellow_rides.compute_hourly_actuals",
    "forecast_yellow_rides.train_model",
    "forecast_yellow_rides.write_forecast",
}


class S3Server:
    """moto's S3-compatible server on 127.0.0.1, one bucket."""

    def __init__(self, log: Path):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as stream:
            self.process = subprocess.Popen(
                [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=stream,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                requests.get(self.endpoint, timeout=1)
                break
            except requests.RequestException:
                if self.process.poll() is not None:
                    raise RuntimeError(f"moto_server exited; log {log}") from None
                time.sleep(0.3)
        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )
        self.client.create_bucket(Bucket=BUCKET)

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def s3(paths):
    server = S3Server(paths.var / "logs" / "moto-server.log")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3_run(paths, s3):
    run = IsolatedVar(
        paths.var / "s3-warehouse",
        {
            "ICEBERG_WAREHOUSE": f"s3://{BUCKET}/{PREFIX}",
            "S3_ENDPOINT": s3.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": "us-east-1",
        },
    ).setup()
    source_root = paths.var / "s3-source"
    sample_server.publish_months(source_root, [MONTH], ROWS)
    try:
        with sample_server.serve(source_root) as source_env:
            run.dags_test("taxi", "ingest_yellow_taxi_data", "2025-02-01", env=source_env)
            run.dags_test(
                "forecast",
                "forecast_yellow_rides",
                "2025-02-01T01:00:00+00:00",
                {"model": "seasonal_naive"},
                source_env,
            )
        yield run
    finally:
        run.stop()


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _table_ids(datasets: list[dict]) -> set[tuple[str, str]]:
    """(namespace, name) of the datasets that are Iceberg tables (they carry a TABLE symlink)."""
    return {
        (d["namespace"], d["name"])
        for d in datasets
        if any(s["type"] == "TABLE" for s in d.get("facets", {}).get("symlinks", {}).get("identifiers", []))
    }


def test_tables_live_in_the_bucket_and_nothing_in_the_local_warehouse(s3_run, s3):
    for table in TABLES:
        keys = s3.keys(f"{PREFIX}/{settings.ICEBERG_NAMESPACE}/{table}/")
        assert any(key.endswith(".metadata.json") for key in keys), table
        if table != naming.TAXI_QUARANTINE:
            assert any("/data/" in key and key.endswith(".parquet") for key in keys), table
    local_warehouse = s3_run.paths.warehouse
    assert not any(local_warehouse.rglob("*.parquet")), "no table data may land in the local warehouse"


def test_pyiceberg_reads_what_the_dags_wrote_through_s3(s3_run):
    raw = s3_run.table(naming.TAXI_RAW)
    quarantine = s3_run.table(naming.TAXI_QUARANTINE)
    assert raw.num_rows + quarantine.num_rows == ROWS
    actuals = s3_run.table(naming.HOURLY_ACTUALS)
    assert sum(actuals["total_rides"].to_pylist()) == sum(
        1 for zone in raw["PULocationID"].to_pylist() if zone is not None
    )
    forecast = s3_run.table(naming.HOURLY_FORECAST)
    assert forecast.num_rows > 0 and set(forecast["model_name"].to_pylist()) == {"seasonal_naive"}
    table = s3_run.catalog().load_table(f"nyc_taxi.{naming.TAXI_RAW}")
    assert table.location() == f"s3://{BUCKET}/{PREFIX}/nyc_taxi/{naming.TAXI_RAW}"


def test_extractor_and_spark_listener_name_tables_by_bucket_and_key(s3_run):
    airflow_events = _events(s3_run.paths.lineage_events)
    spark_events = _events(s3_run.paths.spark_lineage_events)
    completes = [e for e in airflow_events if e["eventType"] == "COMPLETE" and e["job"]["name"] in SPARK_TASKS]
    assert {e["job"]["name"] for e in completes} == SPARK_TASKS
    expected = {(f"s3://{BUCKET}", f"{PREFIX}/nyc_taxi/{table}") for table in TABLES}
    task_tables = set().union(*(_table_ids(e["inputs"]) | _table_ids(e["outputs"]) for e in completes))
    assert task_tables == expected
    children, outputs_of = defaultdict(set), defaultdict(set)
    for event in spark_events:
        run_id = event["run"]["runId"]
        children[event["run"].get("facets", {}).get("parent", {}).get("run", {}).get("runId")].add(run_id)
        outputs_of[run_id] |= _table_ids(event.get("outputs", []))
    for task in completes:
        runs, frontier = set(), {task["run"]["runId"]}
        while frontier:  # the Spark application under the task run, and its Spark jobs
            frontier = {child for parent in frontier for child in children[parent]} - runs
            runs |= frontier
        assert runs, f"{task['job']['name']}: no Spark run under the task run"
        assert _table_ids(task["outputs"]) <= set().union(*(outputs_of[run] for run in runs)), task["job"]["name"]
    assert set().union(*outputs_of.values()) <= expected


def test_no_credential_in_any_event_or_report(s3_run):
    leaked = [
        str(path)
        for path in s3_run.paths.lineage.rglob("*")
        if path.is_file() and SECRET_KEY.encode() in path.read_bytes()
    ]
    assert leaked == []
    assert s3_run.paths.lineage_events.stat().st_size > 0 and s3_run.paths.spark_lineage_events.stat().st_size > 0
