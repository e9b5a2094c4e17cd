"""A Spark job killed in the middle of its MERGE leaves raw at its previous snapshot; the retry ends with the right rows."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from include.core import naming, settings
from include.sources import sample_data
from include.spark import submit
from tests.support import raw_state

# Five Spark applications, one of them a 300,000-row MERGE: more than 900 s on a loaded 2-core machine.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]
MONTH = "2025-10"
ROWS = 300_000
SEED_MONTH = "2024-10"
SEED_ROWS = 1_000


def _submit_command(script: str, args: list[str]) -> list[str]:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    os.environ.update(submit.spark_connection_outside_airflow())
    hook = SparkSubmitHook(**submit.spark_submit_kwargs(), application_args=args)
    return hook._build_spark_submit_command(str(settings.SPARK_JOBS_DIR / script))


def _run(script: str, args: list[str]) -> None:
    subprocess.run(
        _submit_command(script, args),
        check=True,
        capture_output=True,
        timeout=600,
        env={**os.environ, **submit.spark_submit_env()},
    )


def test_killed_merge_leaves_the_previous_snapshot_and_the_retry_is_exact(paths, catalog):
    # A month merged first, in this session's own var/ (not behind the shared pipeline run): raw has a snapshot for
    # the killed MERGE to leave in place.
    sample_data.write_taxi_month(paths.landing / "tlc", 2024, 10, SEED_ROWS)
    _run("stage_taxi.py", ["--month", SEED_MONTH])
    _run("merge_taxi.py", ["--month", SEED_MONTH])
    sample_data.write_taxi_month(paths.landing / "tlc", 2025, 10, ROWS)
    _run("stage_taxi.py", ["--month", MONTH])
    before = raw_state(catalog)
    snapshot_before, rows_before = before.snapshot_id, before.rows
    data_dir = Path(naming.table_location(naming.TAXI_RAW).removeprefix("file://")) / "data"
    files_before = {p for p in data_dir.rglob("*.parquet")}

    job = subprocess.Popen(
        _submit_command("merge_taxi.py", ["--month", MONTH]),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **submit.spark_submit_env()},
    )
    deadline = time.monotonic() + 300
    killed = False
    while time.monotonic() < deadline and job.poll() is None:
        if {p for p in data_dir.rglob("*.parquet")} - files_before:
            os.killpg(job.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.02)
    job.wait(timeout=60)
    assert killed, "the MERGE finished before its first data file was seen; raise ROWS"

    after_kill = raw_state(catalog)
    assert (after_kill.snapshot_id, after_kill.rows) == (snapshot_before, rows_before), "a killed MERGE must not commit"

    _run("merge_taxi.py", ["--month", MONTH])
    after_retry = raw_state(catalog)
    assert after_retry.snapshot_id != snapshot_before
    assert after_retry.rows == after_retry.distinct == rows_before + ROWS
