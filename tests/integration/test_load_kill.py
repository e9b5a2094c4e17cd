"""A taxi load killed in the middle of its write leaves raw's main at its previous snapshot; the retry ends with the
right rows."""

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

# Three Spark applications, two of them 300,000-row loads: several minutes on a loaded 2-core machine.
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


def test_killed_load_leaves_the_previous_snapshot_and_the_retry_is_exact(paths, catalog):
    # A month loaded first, in this session's own var/ (not behind the shared pipeline run): raw has a snapshot for
    # the killed load to leave in place.
    sample_data.write_taxi_month(paths.landing / "tlc", 2024, 10, SEED_ROWS)
    _run("load_taxi.py", ["--month", SEED_MONTH])
    sample_data.write_taxi_month(paths.landing / "tlc", 2025, 10, ROWS)
    before = raw_state(catalog)
    snapshot_before, rows_before = before.snapshot_id, before.rows
    data_dir = Path(naming.table_location(naming.TAXI_RAW).removeprefix("file://")) / "data"
    files_before = {p for p in data_dir.rglob("*.parquet")}

    job = subprocess.Popen(
        _submit_command("load_taxi.py", ["--month", MONTH]),
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
    assert killed, "the load finished before its first data file was seen; raise ROWS"

    after_kill = raw_state(catalog)
    assert (after_kill.snapshot_id, after_kill.rows) == (snapshot_before, rows_before), (
        "a killed load must not move main"
    )

    _run("load_taxi.py", ["--month", MONTH])
    after_retry = raw_state(catalog)
    assert after_retry.snapshot_id != snapshot_before
    assert after_retry.rows == after_retry.distinct == rows_before + ROWS
