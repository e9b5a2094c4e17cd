"""compute_actuals recomputes only the months raw changed in, on real Iceberg tables of their own names."""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import types as T
from pyspark.testing import assertDataFrameEqual

from include.core import naming, settings
from spark_jobs import compute_actuals, load_taxi
from spark_jobs.common.tables import current_snapshot_id, qualified
from spark_jobs.common.taxi import CANONICAL_COLUMNS, add_row_metadata, hourly_actuals

SCHEMA = T.StructType([T.StructField(name, dtype) for name, dtype in CANONICAL_COLUMNS])


@pytest.fixture
def tables(spark, monkeypatch):
    names = {"TAXI_RAW": "actuals_test_raw", "HOURLY_ACTUALS": "actuals_test_actuals"}
    for attribute, name in names.items():
        monkeypatch.setattr(naming, attribute, name)
        spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
    yield names
    for name in names.values():
        spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")


def _month(spark, month: str, pickups: list[tuple[str, int]]):
    rows = []
    for pickup, zone in pickups:
        row = {name: None for name, _ in CANONICAL_COLUMNS}
        at = datetime.fromisoformat(pickup)
        row.update(VendorID=1, tpep_pickup_datetime=at, tpep_dropoff_datetime=at, PULocationID=zone, total_amount=1.0)
        rows.append(row)
    return add_row_metadata(spark.createDataFrame(rows, SCHEMA), "f.parquet", month, datetime(2025, 3, 1))


def _actuals_files(spark, year: int, month: int) -> set[str]:
    files = spark.sql(f"SELECT file_path, partition FROM {qualified(naming.HOURLY_ACTUALS)}.files").collect()
    return {row.file_path for row in files if (row.partition.year, row.partition.month) == (year, month)}


def _expected(spark):
    return hourly_actuals(spark.table(qualified(naming.TAXI_RAW)))


def test_only_changed_months_are_recomputed_and_a_rollback_recomputes_all(spark, tables):
    load_taxi.load(spark, _month(spark, "2025-01", [("2025-01-02 08:10:00", 5), ("2025-01-02 08:20:00", 5)]), "2025-01")
    january_only = current_snapshot_id(spark, naming.TAXI_RAW)
    _, months, _ = compute_actuals.update_actuals(spark)
    assert months is None, "first run: every month"
    assertDataFrameEqual(spark.table(qualified(naming.HOURLY_ACTUALS)), _expected(spark))
    january_files = _actuals_files(spark, 2025, 1)

    load_taxi.load(spark, _month(spark, "2025-02", [("2025-02-03 09:00:00", 7)]), "2025-02")
    _, months, _ = compute_actuals.update_actuals(spark)
    assert months == [(2025, 2)]
    assert _actuals_files(spark, 2025, 1) == january_files, "January was not rewritten"
    assertDataFrameEqual(spark.table(qualified(naming.HOURLY_ACTUALS)), _expected(spark))

    unchanged = current_snapshot_id(spark, naming.HOURLY_ACTUALS)
    _, months, _ = compute_actuals.update_actuals(spark)
    assert months == [] and current_snapshot_id(spark, naming.HOURLY_ACTUALS) == unchanged

    catalog = settings.CatalogSettings.current().name
    spark.sql(
        f"CALL {catalog}.system.rollback_to_snapshot('{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}', {january_only})"
    )
    load_taxi.load(spark, _month(spark, "2025-01", [("2025-01-05 10:00:00", 9)]), "2025-01")
    _, months, _ = compute_actuals.update_actuals(spark)
    assert months is None, "the recorded raw snapshot is no longer raw's ancestor: recompute everything"
    january = spark.table(qualified(naming.HOURLY_ACTUALS)).where("year = 2025 AND month = 1")
    assertDataFrameEqual(january, _expected(spark).where("year = 2025 AND month = 1"))
