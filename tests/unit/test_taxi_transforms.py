"""Transforms of the taxi side, on a real local SparkSession, compared with assertDataFrameEqual."""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import types as T
from pyspark.testing import assertDataFrameEqual

from spark_jobs.common.taxi import (
    CANONICAL_COLUMNS,
    SchemaError,
    add_row_metadata,
    deduplicate,
    hourly_actuals,
    normalize_taxi_schema,
    schema_drift,
    split_quarantine,
)

CANONICAL_SCHEMA = T.StructType([T.StructField(name, dtype) for name, dtype in CANONICAL_COLUMNS])


def _trip(pickup: str, zone: int | None, total: float = 10.0) -> dict:
    row = {name: None for name, _ in CANONICAL_COLUMNS}
    row.update(
        VendorID=1,
        tpep_pickup_datetime=datetime.fromisoformat(pickup),
        tpep_dropoff_datetime=datetime.fromisoformat(pickup),
        PULocationID=zone,
        DOLocationID=1,
        payment_type=1,
        trip_distance=1.0,
        total_amount=total,
    )
    return row


def test_2023_file_is_normalised_to_the_2025_schema_explicitly(spark):
    old = spark.createDataFrame(
        [(1, datetime(2023, 5, 1, 8), datetime(2023, 5, 1, 9), 1.0, 2.0, 1.0, "N", 10, 20, 1, 5.0, 0.0, 0.5, 1.0, 0.0, 1.0, 9.0, 2.5, 1.75)],
        "VendorID long, tpep_pickup_datetime timestamp, tpep_dropoff_datetime timestamp, passenger_count double, "
        "trip_distance double, RatecodeID double, store_and_fwd_flag string, PULocationID long, DOLocationID long, "
        "payment_type long, fare_amount double, extra double, mta_tax double, tip_amount double, tolls_amount double, "
        "improvement_surcharge double, total_amount double, congestion_surcharge double, airport_fee double",
    )
    normalized = normalize_taxi_schema(old, "yellow_tripdata_2023-05.parquet")
    expected = spark.createDataFrame(
        [(1, datetime(2023, 5, 1, 8), datetime(2023, 5, 1, 9), 1, 2.0, 1, "N", 10, 20, 1, 5.0, 0.0, 0.5, 1.0, 0.0, 1.0, 9.0, 2.5, 1.75, None)],
        CANONICAL_SCHEMA,
    )
    assertDataFrameEqual(normalized, expected, checkRowOrder=True)
    assert schema_drift(old) == {"renamed": {"airport_fee": "Airport_fee"}, "filled_with_null": ["cbd_congestion_fee"], "unexpected": []}


def test_missing_required_column_names_the_file_and_column(spark):
    frame = spark.createDataFrame([_trip("2025-01-01 00:10:00", 5)], CANONICAL_SCHEMA).drop("PULocationID")
    with pytest.raises(SchemaError, match=r"yellow_tripdata_2025-01\.parquet: missing required column\(s\) PULocationID"):
        normalize_taxi_schema(frame, "yellow_tripdata_2025-01.parquet")


def test_changed_column_type_names_the_column_and_both_types(spark):
    frame = spark.createDataFrame([_trip("2025-01-01 00:10:00", 5)], CANONICAL_SCHEMA)
    frame = frame.withColumn("total_amount", frame.total_amount.cast("string"))
    with pytest.raises(SchemaError, match=r"column total_amount has type string, expected double"):
        normalize_taxi_schema(frame, "f.parquet")


def test_unexpected_extra_column_is_reported_as_drift(spark):
    frame = spark.createDataFrame([_trip("2025-01-01 00:10:00", 5)], CANONICAL_SCHEMA).selectExpr("*", "1 AS surprise_fee")
    assert schema_drift(frame)["unexpected"] == ["surprise_fee"]


def test_row_id_is_stable_distinguishes_nulls_and_deduplicates(spark):
    rows = [_trip("2025-01-01 00:10:00", 5), _trip("2025-01-01 00:10:00", 5), _trip("2025-01-01 00:10:00", None)]
    frame = spark.createDataFrame(rows, CANONICAL_SCHEMA)
    with_ids = add_row_metadata(frame, "f.parquet", "2025-01", datetime(2025, 2, 1))
    ids = [row.unique_row_id for row in with_ids.collect()]
    assert ids[0] == ids[1] != ids[2]
    assert deduplicate(with_ids).count() == 2
    assert add_row_metadata(frame, "other.parquet", "2025-01", datetime(2026, 1, 1)).first().unique_row_id == ids[0]


def test_hourly_actuals_counts_rides_per_zone_and_hour(spark):
    frame = spark.createDataFrame(
        [_trip("2025-01-01 00:10:00", 5), _trip("2025-01-01 00:50:00", 5), _trip("2025-01-01 01:00:00", 5),
         _trip("2025-01-01 00:20:00", 7), _trip("2025-01-01 00:30:00", None)],
        CANONICAL_SCHEMA,
    )
    expected = spark.createDataFrame(
        [(2025, 1, 1, 0, 5, 2), (2025, 1, 1, 1, 5, 1), (2025, 1, 1, 0, 7, 1)],
        "year int, month int, day int, hour int, pulocationid int, total_rides long",
    )
    assertDataFrameEqual(hourly_actuals(frame), expected)


def test_row_level_problems_go_to_quarantine_with_a_reason_and_good_rows_stay(spark):
    good = _trip("2025-01-05 10:00:00", 5)
    null_zone = _trip("2025-01-05 10:00:00", None)
    negative = _trip("2025-01-05 11:00:00", 5, total=-3.0)
    outside = _trip("2024-12-31 23:59:00", 5)
    backwards = {**_trip("2025-01-05 12:00:00", 5), "tpep_dropoff_datetime": datetime(2025, 1, 5, 11, 0)}
    frame = add_row_metadata(
        spark.createDataFrame([good, null_zone, negative, outside, backwards], CANONICAL_SCHEMA), "f.parquet", "2025-01", datetime(2025, 2, 1)
    )
    kept, quarantined = split_quarantine(frame)
    assert [(r.PULocationID, r.total_amount) for r in kept.collect()] == [(5, 10.0)]
    assert "quarantine_reason" not in kept.columns
    assert sorted(r.quarantine_reason for r in quarantined.collect()) == [
        "dropoff_before_pickup", "negative_total", "null_pickup_zone", "pickup_outside_file_month"]
