"""`airflow backfill create` through a running scheduler over one TLC file of each era, as a user backfilling history
meets it: the runs succeed (2010-12 fails with its reason) and the raw table's per-month row counts equal the good
rows of each file. (Staging each era's layout is tests/integration/test_tlc_eras.py: a module of its own, so that two
workers can take the two.)"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

from include.core import naming, settings
from include.sources import sample_data

# A scheduler and nine DAG runs: minutes each on a loaded machine.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]


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
    airflow.assert_stopped_like_ctrl_c_should()


def test_backfill_over_every_era_ingests_each_file_exactly(backfilled):
    backfill_runs, counts, _ = backfilled
    ingested = ["2011-01", "2023-01", "2023-02", "2024-12", "2025-01"]
    assert {month: backfill_runs[month]["state"] for month in ingested} == dict.fromkeys(ingested, "success")
    assert counts == dict.fromkeys(ingested, BACKFILL_ROWS), "per-month raw rows equal each file's good rows"


def test_backfill_of_a_2010_month_fails_with_its_reason(backfilled):
    backfill_runs, counts, task_instances = backfilled
    assert backfill_runs["2010-12"]["state"] == "failed"
    states = {ti["task_id"]: ti["state"] for ti in task_instances}
    assert states["download_tlc_month"] == "failed" and states["load_yellow_taxi_raw"] in ("upstream_failed", None)
    assert "2010-12" not in counts
