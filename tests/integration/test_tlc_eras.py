"""Every TLC yellow-taxi era, as a user backfilling history meets it.

- The stage job (spark-submit, as the DAG runs it) on one generated file of each era, and on files with nanosecond
  and zoned timestamps: every good row staged, pickup times equal to the file's New York wall-clock times; the
  2009-2010 layouts refused with a message naming the era and the first supported month.
- A run of a month before 2011-01 through `airflow dags test` fails at once, saying why (not a green no-op).
- `airflow backfill create` through a running scheduler over one file of each era: the runs succeed (2010-12 fails
  with its reason) and the raw table's per-month row counts equal the good rows of each file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from include.airflow import runs
from include.core import naming, settings
from include.sources import sample_data
from include.spark import submit
from spark_jobs.common.runner import BAD_INPUT_EXIT_CODE

# The module fixtures run nine spark-submits (and a scheduler for the backfills): minutes each on a loaded machine.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]
ROWS = 3_000
# month -> what the file is: one per ingestible era, plus the layouts pandas users write.
STAGED_FILES = {
    "2014-08": {},  # 2011-01..2018-06: int64 ids; improvement_surcharge, congestion_surcharge, airport_fee null-typed
    "2020-10": {},  # 2018-07..2023-01: passenger_count and RatecodeID as double
    "2023-02": {},  # 2023-02..2024-12: int32 ids, Airport_fee
    "2025-12": {},  # 2025-01..: cbd_congestion_fee
    "2024-03": {"timestamp_unit": "ns"},  # pandas' default: nanoseconds (and the spring DST change)
    "2024-11": {"time_zone": "America/New_York"},  # zoned instants (and the autumn DST change)
    "2021-06": {"timestamp_unit": "ns", "time_zone": "America/New_York"},
}
REFUSED_FILES = {"2009-05": "2009-2010 era", "2010-02": "2009-2010 era"}


def _submit(script: str, args: list[str]) -> subprocess.CompletedProcess:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    with pytest.MonkeyPatch.context() as env:  # local Spark, as the project's spark_default connection says
        env.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[*]"}')
        hook = SparkSubmitHook(**submit.spark_submit_kwargs(), application_args=args)
        command = hook._build_spark_submit_command(str(settings.SPARK_JOBS_DIR / script))
    assert command[command.index("--master") + 1] == "local[*]", command
    return subprocess.run(
        command, capture_output=True, text=True, timeout=900, env={**os.environ, **submit.spark_submit_env()}
    )


def _wall_clock(table: pa.Table, column: str) -> list:
    """The file's times as a New York clock showed them, in microseconds."""
    values = table[column]
    if values.type.tz is not None:
        values = pc.local_timestamp(pc.cast(values, pa.timestamp(values.type.unit, "America/New_York")))
    return pc.cast(values, pa.timestamp("us")).to_pylist()


@pytest.fixture(scope="module")
def staged_eras(paths, catalog, airflow_env):  # airflow_env: the spark_default connection the hook reads
    landing = paths.landing / "tlc"
    results = {}
    for month, layout in {**STAGED_FILES, **{m: {} for m in REFUSED_FILES}}.items():
        year, mm = map(int, month.split("-"))
        path = sample_data.write_taxi_month(landing, year, mm, ROWS, **layout)
        report = paths.var / "test-reports" / f"stage-{month}.json"
        completed = _submit("stage_taxi.py", ["--month", month, "--report", str(report)])
        results[month] = (path, completed, json.loads(report.read_text()) if report.exists() else {})
    return results


def _staged(catalog, month: str) -> pa.Table:
    table = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_STAGING}")
    return table.scan(row_filter=f"source_month == '{month}'").to_arrow()


@pytest.mark.parametrize("month", sorted(STAGED_FILES))
def test_every_ingestible_era_and_timestamp_layout_is_staged_with_new_york_wall_clock_times(
    staged_eras, catalog, month
):
    path, completed, report = staged_eras[month]
    assert completed.returncode == 0, completed.stderr[-3000:]
    source = pq.read_table(path)
    staged = _staged(catalog, month)
    assert report["staged_rows"] == staged.num_rows == source.num_rows == ROWS, "every good row staged"
    assert report["quarantined_rows"] == {}
    for column in ("tpep_pickup_datetime", "tpep_dropoff_datetime"):
        assert sorted(staged[column].cast(pa.timestamp("us")).to_pylist()) == sorted(_wall_clock(source, column))
    assert set(staged["PULocationID"].to_pylist()) == set(source["PULocationID"].to_pylist())


@pytest.mark.parametrize("month", sorted(REFUSED_FILES))
def test_2009_and_2010_files_are_refused_naming_the_era_and_the_first_supported_month(staged_eras, catalog, month):
    path, completed, report = staged_eras[month]
    assert completed.returncode == BAD_INPUT_EXIT_CODE
    message = report["error"]["message"]
    assert message.startswith(f"{path}: a TLC file of the 2009-2010 era")
    assert "The first supported month is 2011-01." in message
    assert _staged(catalog, month).num_rows == 0


def test_a_run_of_a_month_before_2011_fails_at_once_saying_why(paths, airflow_env):
    result = runs.dags_test(
        "ingest_yellow_taxi_data",
        "2010-07-01",
        {},
        env={"TLC_BASE_URL": "http://127.0.0.1:9"},
        log_file=paths.var / "test-logs" / "taxi-2010-06.log",
    )
    assert result.state == "failed"
    assert (
        "tlc 2010-06 cannot be ingested: the first supported month is 2011-01 (TLC's 2009-2010 yellow-taxi files "
        "have text pickup times and coordinates but no pickup zone"
    ) in result.log
    assert "Executing <Task(LakehouseSparkSubmitOperator)" not in result.log, "nothing after the refusal runs"


# Backfills over era boundaries: (from, to) logical dates, inclusive; a run dated the 1st ingests that month.
BACKFILLS = [("2010-12-01", "2011-01-01"), ("2023-01-01", "2023-02-01"), ("2024-12-01", "2025-01-01")]
BACKFILL_ROWS = 2_000


def _backfill_runs(airflow, dag_id: str) -> list[dict]:
    return [run for run in airflow.runs(dag_id) if run["run_type"] == "backfill"]


def _wait_until_backfills_complete(airflow, dag_id: str, timeout: float = 300) -> None:
    """The scheduler marks a backfill complete a little after its last run ends; Airflow allows one running backfill
    per DAG, so the next `backfill create` must wait for that."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        backfills = airflow.api("GET", "backfills", params={"dag_id": dag_id})["backfills"]
        if all(backfill["completed_at"] for backfill in backfills):
            return
        time.sleep(5)
    raise TimeoutError(f"a backfill of {dag_id} is still running; log {airflow.log_path}")


def _create_backfill(command_env: dict, start: str, end: str, attempts: int = 3) -> subprocess.CompletedProcess:
    """`airflow backfill create`, run again as a user would when SQLite refused it with `database is locked` (Trap 14
    in docs/versions-and-traps.md: it creates its runs inside a savepoint, which SQLite may refuse at once while the scheduler writes; the
    whole command is rolled back, nothing is created)."""
    for _ in range(attempts):
        created = subprocess.run(
            [
                str(Path(sys.executable).parent / "airflow"),
                "backfill",
                "create",
                "--dag-id",
                "ingest_yellow_taxi_data",
                "--from-date",
                start,
                "--to-date",
                end,
            ],
            env=command_env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if created.returncode == 0 or "database is locked" not in created.stdout + created.stderr:
            return created
        time.sleep(5)
    return created


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory):
    from tests.integration.running_airflow import RunningAirflow

    var_dir = settings.Paths.current().var / "airflow-eras"
    airflow = RunningAirflow(var_dir, taxi_rows=1_000)
    months = sorted({start[:7] for start, _ in BACKFILLS} | {end[:7] for _, end in BACKFILLS})
    for month in months:
        year, mm = map(int, month.split("-"))
        sample_data.write_taxi_month(airflow.paths.var / "sample-source" / "trip-data", year, mm, BACKFILL_ROWS)
    airflow.start()
    try:
        airflow.wait_for_dag("ingest_yellow_taxi_data")
        airflow.api("PATCH", "dags/ingest_yellow_taxi_data", json={"is_paused": False})
        airflow.api("PATCH", "dags/forecast_yellow_rides", json={"is_paused": True})
        command_env = {**airflow.env, **settings.airflow_env(airflow.paths)}
        for start, end in BACKFILLS:
            created = _create_backfill(command_env, start, end)
            assert created.returncode == 0, created.stdout + created.stderr
            deadline = time.monotonic() + 1500
            while time.monotonic() < deadline:
                backfill_runs = [
                    r
                    for r in _backfill_runs(airflow, "ingest_yellow_taxi_data")
                    if start <= r["logical_date"][:10] <= end
                ]
                if len(backfill_runs) == 2 and all(r["state"] in ("success", "failed") for r in backfill_runs):
                    break
                time.sleep(10)
            else:
                raise TimeoutError(f"backfill {start}..{end} did not finish; log {airflow.log_path}")
            _wait_until_backfills_complete(airflow, "ingest_yellow_taxi_data")
        backfill_runs = {r["logical_date"][:7]: r for r in _backfill_runs(airflow, "ingest_yellow_taxi_data")}
        with pytest.MonkeyPatch.context() as env:
            env.setenv("PIPELINE_VAR_DIR", str(airflow.paths.var))
            env.setenv("ICEBERG_REST_PORT", airflow.env["ICEBERG_REST_PORT"])
            raw = settings.pyiceberg_catalog().load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}")
            months_of_rows = raw.scan(selected_fields=("source_month",)).to_arrow()["source_month"]
        counts = {row["values"]: row["counts"] for row in pc.value_counts(months_of_rows).to_pylist()}
        refused = airflow.task_instances("ingest_yellow_taxi_data", backfill_runs["2010-12"]["dag_run_id"])
        yield backfill_runs, counts, refused
    finally:
        airflow.stop()


def test_backfill_over_every_era_ingests_each_file_exactly(backfilled):
    backfill_runs, counts, _ = backfilled
    ingested = ["2011-01", "2023-01", "2023-02", "2024-12", "2025-01"]
    assert {month: backfill_runs[month]["state"] for month in ingested} == dict.fromkeys(ingested, "success")
    assert counts == dict.fromkeys(ingested, BACKFILL_ROWS), "per-month raw rows equal each file's good rows"


def test_backfill_of_a_2010_month_fails_with_its_reason(backfilled):
    backfill_runs, counts, task_instances = backfilled
    assert backfill_runs["2010-12"]["state"] == "failed"
    states = {ti["task_id"]: ti["state"] for ti in task_instances}
    assert states["download_tlc_month"] == "failed" and states["stage_yellow_taxi"] in ("upstream_failed", None)
    assert "2010-12" not in counts
