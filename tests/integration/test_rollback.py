"""`lineage rollback` on a real run: after the good month of the shared run, a bad re-ingest corrupts raw (every trip
again with its pickup an hour later), the forecast DAG runs on it, then the rollback plan is printed, refused once a
table moved on, planned again and applied: raw, actuals and forecast are back to their earlier snapshots and rows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from include.airflow import runs
from include.core import naming, settings
from include.sources import sample_data, sample_server
from tests.integration.conftest import MONTH

pytestmark = pytest.mark.integration

TABLES = (naming.TAXI_RAW, naming.HOURLY_ACTUALS, naming.HOURLY_FORECAST)
LINEAGE = str(Path(sys.executable).parent / "lineage")
BAD_INGEST_DATE = "2025-02-01T00:10:00+00:00"


def _state(catalog, table: str) -> tuple[int, int]:
    loaded = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{table}")
    return loaded.current_snapshot().snapshot_id, loaded.scan().to_arrow().num_rows


def _corrupt_copy(source_root: Path, target: Path) -> None:
    shutil.copytree(source_root, target)
    taxi_file = target / "trip-data" / sample_data.taxi_file_name(*MONTH)
    trips = pq.read_table(taxi_file)
    for column in ("tpep_pickup_datetime", "tpep_dropoff_datetime"):
        index = trips.schema.get_field_index(column)
        shifted = pc.add(trips[column], pa.scalar(timedelta(hours=1), type=pa.duration(trips[column].type.unit)))
        trips = trips.set_column(index, column, shifted)
    pq.write_table(trips, taxi_file)


def _lineage(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LINEAGE, *args], capture_output=True, text=True, env={**os.environ}, timeout=600)


def _newest_run_id(paths: settings.Paths, job: str) -> str:
    """The OpenLineage run id of the newest run of a job, from the events Airflow wrote."""
    starts = [json.loads(line) for line in paths.lineage_events.read_text().splitlines() if line.strip()]
    starts = [e for e in starts if e["job"]["name"] == job and e["eventType"] == "START"]
    return max(starts, key=lambda e: e["eventTime"])["run"]["runId"]


def test_rollback_returns_every_table_downstream_of_a_bad_ingest_to_its_earlier_snapshot(
    pipeline_run, catalog, tmp_path
):
    paths = pipeline_run.paths
    good = {table: _state(catalog, table) for table in TABLES}
    _corrupt_copy(paths.var / "source", tmp_path / "source")
    with sample_server.serve(tmp_path / "source") as env:
        # January again (the data interval of any moment of Feb 1 up to the next month), as a run of its own: the
        # provider derives task run ids from the logical date, so a rerun at INGEST_DATE would reuse the good run's ids
        bad = runs.dags_test(
            "ingest_yellow_taxi_data", BAD_INGEST_DATE, {"force": True}, env=env, log_file=tmp_path / "bad.log"
        )
        assert bad.succeeded, f"bad re-ingest ended {bad.state}; log {tmp_path / 'bad.log'}"
        forecast = runs.dags_test(
            "forecast_yellow_rides",
            "2025-02-01T05:00:00+00:00",
            {"model": "weather"},
            env=env,
            log_file=tmp_path / "forecast.log",
        )
        assert forecast.succeeded, f"forecast ended {forecast.state}; log {tmp_path / 'forecast.log'}"
    corrupted = {table: _state(catalog, table) for table in TABLES}
    assert corrupted[naming.TAXI_RAW][1] > good[naming.TAXI_RAW][1], "the bad re-ingest must have added wrong rows"
    assert all(corrupted[t][0] != good[t][0] for t in TABLES)
    bad_run = _newest_run_id(paths, "ingest_yellow_taxi_data.load_yellow_taxi_raw")  # the run that loaded the bad file

    planned = _lineage("rollback", "--run", bad_run, "--json")
    assert planned.returncode == 0, planned.stderr
    steps = {step["table"]: step for step in json.loads(planned.stdout)["tables"]}
    for table in TABLES:
        step = steps[f"{settings.ICEBERG_NAMESPACE}.{table}"]
        assert (step["current_snapshot_id"], step["target_snapshot_id"]) == (corrupted[table][0], good[table][0]), table
    assert f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_QUARANTINE}" in steps, (
        "the bad run's own quarantine is rolled back too"
    )
    assert f"{settings.ICEBERG_NAMESPACE}.{naming.WEATHER_RAW}" not in steps, "weather was not touched by the bad data"
    assert any(item["name"].endswith("/models/weather") for item in json.loads(planned.stdout)["not_iceberg"])

    # a commit after the plan: the kept plan is refused and nothing changes
    forecast_table = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.HOURLY_FORECAST}")
    forecast_table.append(forecast_table.scan(limit=1).to_arrow())
    refused = _lineage("rollback", "--run", bad_run, "--apply")
    assert refused.returncode == 2 and "moved on since the plan" in refused.stderr, refused.stdout + refused.stderr
    assert _state(catalog, naming.TAXI_RAW) == corrupted[naming.TAXI_RAW], "a refused rollback changes nothing"

    replanned = _lineage("rollback", "--run", bad_run)
    assert replanned.returncode == 0 and "yellow_rides_hourly_forecast" in replanned.stdout, replanned.stderr
    applied = _lineage("rollback", "--run", bad_run, "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert {table: _state(catalog, table) for table in TABLES} == good

    recorded = [
        json.loads(line) for line in paths.lineage_events.read_text().splitlines() if '"lineage.rollback"' in line
    ]
    complete = [e for e in recorded if e["eventType"] == "COMPLETE"][-1]
    assert complete["run"]["facets"]["rollback"]["badRunId"] == bad_run
    versions = {o["name"].rsplit("/", 1)[-1]: o["facets"]["version"]["datasetVersion"] for o in complete["outputs"]}
    assert {table: int(versions[table]) for table in TABLES} == {table: good[table][0] for table in TABLES}
