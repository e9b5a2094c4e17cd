"""Every TLC yellow-taxi era, as a user backfilling history meets it.

- The load job (spark-submit, as the DAG runs it) on one generated file of each era, and on files with nanosecond
  and zoned timestamps: every good row in raw, pickup times equal to the file's New York wall-clock times; the
  2009-2010 layouts refused with a message naming the era and the first supported month.
- A run of a month before 2011-01 through `airflow dags test` fails at once, saying why (not a green no-op).

The backfill over every era through a running scheduler is tests/integration/test_tlc_backfill.py.
"""

from __future__ import annotations

import json
import os
import subprocess

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
        report = paths.var / "test-reports" / f"load-{month}.json"
        completed = _submit("load_taxi.py", ["--month", month, "--report", str(report)])
        results[month] = (path, completed, json.loads(report.read_text()) if report.exists() else {})
    return results


def _staged(catalog, month: str) -> pa.Table:
    table = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}")
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
