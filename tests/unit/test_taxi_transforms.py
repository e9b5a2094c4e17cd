"""Transforms of the taxi side, on a real local SparkSession, compared with assertDataFrameEqual."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.errors import AnalysisException
from pyspark.sql import types as T
from pyspark.testing import assertDataFrameEqual

from include.sources import sample_data
from spark_jobs.common.errors import root_cause
from spark_jobs.common.taxi import (
    CANONICAL_COLUMNS,
    SchemaError,
    UnsupportedEraError,
    add_row_metadata,
    deduplicate,
    hex_digits,
    hourly_actuals,
    normalize_taxi_schema,
    row_id_hashes,
    rows_and_distinct_ids,
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
        [
            (
                1,
                datetime(2023, 5, 1, 8),
                datetime(2023, 5, 1, 9),
                1.0,
                2.0,
                1.0,
                "N",
                10,
                20,
                1,
                5.0,
                0.0,
                0.5,
                1.0,
                0.0,
                1.0,
                9.0,
                2.5,
                1.75,
            )
        ],
        "VendorID long, tpep_pickup_datetime timestamp_ntz, tpep_dropoff_datetime timestamp_ntz, passenger_count double, "
        "trip_distance double, RatecodeID double, store_and_fwd_flag string, PULocationID long, DOLocationID long, "
        "payment_type long, fare_amount double, extra double, mta_tax double, tip_amount double, tolls_amount double, "
        "improvement_surcharge double, total_amount double, congestion_surcharge double, airport_fee double",
    )
    normalized = normalize_taxi_schema(old, "yellow_tripdata_2023-05.parquet")
    expected = spark.createDataFrame(
        [
            (
                1,
                datetime(2023, 5, 1, 8),
                datetime(2023, 5, 1, 9),
                1,
                2.0,
                1,
                "N",
                10,
                20,
                1,
                5.0,
                0.0,
                0.5,
                1.0,
                0.0,
                1.0,
                9.0,
                2.5,
                1.75,
                None,
            )
        ],
        CANONICAL_SCHEMA,
    )
    assertDataFrameEqual(normalized, expected, checkRowOrder=True)
    assert schema_drift(old) == {
        "renamed": {"airport_fee": "Airport_fee"},
        "filled_with_null": ["cbd_congestion_fee"],
        "unexpected": [],
    }


def test_missing_required_column_names_the_file_and_column(spark):
    frame = spark.createDataFrame([_trip("2025-01-01 00:10:00", 5)], CANONICAL_SCHEMA).drop("PULocationID")
    with pytest.raises(
        SchemaError, match=r"yellow_tripdata_2025-01\.parquet: missing required column\(s\) PULocationID"
    ):
        normalize_taxi_schema(frame, "yellow_tripdata_2025-01.parquet")


def test_changed_column_type_names_the_column_and_both_types(spark):
    frame = spark.createDataFrame([_trip("2025-01-01 00:10:00", 5)], CANONICAL_SCHEMA)
    frame = frame.withColumn("total_amount", frame.total_amount.cast("string"))
    with pytest.raises(SchemaError, match=r"column total_amount has type string, expected double"):
        normalize_taxi_schema(frame, "f.parquet")


def test_unexpected_extra_column_is_reported_as_drift(spark):
    frame = spark.createDataFrame([_trip("2025-01-01 00:10:00", 5)], CANONICAL_SCHEMA).selectExpr(
        "*", "1 AS surprise_fee"
    )
    assert schema_drift(frame)["unexpected"] == ["surprise_fee"]


def test_row_id_is_stable_distinguishes_nulls_and_deduplicates(spark):
    rows = [_trip("2025-01-01 00:10:00", 5), _trip("2025-01-01 00:10:00", 5), _trip("2025-01-01 00:10:00", None)]
    frame = spark.createDataFrame(rows, CANONICAL_SCHEMA)
    with_ids = add_row_metadata(frame, "f.parquet", "2025-01", datetime(2025, 2, 1))
    ids = [row.unique_row_id for row in with_ids.collect()]
    assert ids[0] == ids[1] != ids[2]
    assert deduplicate(with_ids).count() == 2
    assert add_row_metadata(frame, "other.parquet", "2025-01", datetime(2026, 1, 1)).first().unique_row_id == ids[0]
    # Counted through the ids' hashes when they are all distinct, through the ids themselves when some repeat.
    assert rows_and_distinct_ids(with_ids) == (3, 2)
    assert rows_and_distinct_ids(deduplicate(with_ids)) == (2, 2)


def test_row_id_is_128_bits_and_tells_a_null_apart_from_a_value_in_the_next_column(spark):
    # Spark's xxhash64 skips null inputs: without the null mask, (1.0, null) and (null, 1.0) in two neighbouring
    # double columns would hash the same single value with the same seed.
    left = {**_trip("2025-01-01 00:10:00", 5), "fare_amount": 1.0, "extra": None}
    right = {**_trip("2025-01-01 00:10:00", 5), "fare_amount": None, "extra": 1.0}
    frame = spark.createDataFrame([left, right], CANONICAL_SCHEMA)
    ids = [row.unique_row_id for row in add_row_metadata(frame, "f.parquet", "2025-01", datetime(2025, 2, 1)).collect()]
    assert ids[0] != ids[1]
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids), ids
    assert all(i[:16] != i[16:] for i in ids), "the two 64-bit halves come from different chains"


def test_row_ids_of_many_distinct_rows_do_not_collide_in_either_half(spark):
    from pyspark.sql import functions as F

    frame = spark.range(50_000).select(
        *[
            (F.col("id") % 7).cast(dtype).alias(name) if name == "VendorID" else F.lit(None).cast(dtype).alias(name)
            for name, dtype in CANONICAL_COLUMNS
            if name not in ("tpep_pickup_datetime", "total_amount")
        ],
        F.timestamp_seconds(F.lit(1735689600) + F.col("id")).alias("tpep_pickup_datetime"),
        (F.col("id") / 100).alias("total_amount"),
    )
    ids = add_row_metadata(frame, "f.parquet", "2025-01", datetime(2025, 2, 1)).select(
        F.substring("unique_row_id", 1, 16).alias("high"), F.substring("unique_row_id", 17, 16).alias("low")
    )
    counts = ids.agg(F.countDistinct("high"), F.countDistinct("low"), F.count(F.lit(1))).first()
    assert tuple(counts) == (50_000, 50_000, 50_000)


LONG_EDGES = [0, 1, 15, 16, 2**32, 2**59, 2**60 - 1, 2**60, 2**60 + 1, 2**63 - 1, -1, -2, -(2**60), -(2**63)]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=1, max_size=200))
def test_hex_digits_are_a_longs_64_bits_as_16_upper_case_hex_digits(spark, values):
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(v,) for v in LONG_EDGES + values], "v long")
    got = [row.h for row in frame.select(hex_digits(F.col("v")).alias("h")).collect()]
    assert got == [f"{v & (2**64 - 1):016X}" for v in LONG_EDGES + values]


def test_a_row_id_is_its_two_hashes_as_32_hex_digits(spark):
    """Pinned against Python's own formatting of Spark's two hashes, over rows whose hashes are random: about one
    half in 32 needs padding, so 20,000 rows exercise it hundreds of times."""
    from pyspark.sql import functions as F

    frame = spark.range(20_000).select(
        *[
            (F.col("id") % 11).cast(dtype).alias(name)
            if name == "PULocationID"
            else F.lit(None).cast(dtype).alias(name)
            for name, dtype in CANONICAL_COLUMNS
            if name != "tpep_pickup_datetime"
        ],
        F.timestamp_seconds(F.lit(1735689600) + F.col("id")).alias("tpep_pickup_datetime"),
    )
    first, second = row_id_hashes()
    rows = add_row_metadata(frame, "f.parquet", "2025-01", datetime(2025, 2, 1)).select(
        "unique_row_id", first.alias("first"), second.alias("second")
    )
    mask = 2**64 - 1
    padded = 0
    for row in rows.collect():
        assert row.unique_row_id == f"{row.first & mask:016X}{row.second & mask:016X}"
        padded += (0 <= row.first < 2**60) + (0 <= row.second < 2**60)
    assert padded > 100, "too few halves below 2^60 to exercise the padding"


def test_hourly_actuals_counts_rides_per_zone_and_hour(spark):
    frame = spark.createDataFrame(
        [
            _trip("2025-01-01 00:10:00", 5),
            _trip("2025-01-01 00:50:00", 5),
            _trip("2025-01-01 01:00:00", 5),
            _trip("2025-01-01 00:20:00", 7),
            _trip("2025-01-01 00:30:00", None),
        ],
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
        spark.createDataFrame([good, null_zone, negative, outside, backwards], CANONICAL_SCHEMA),
        "f.parquet",
        "2025-01",
        datetime(2025, 2, 1),
    )
    kept, quarantined = split_quarantine(frame)
    assert [(r.PULocationID, r.total_amount) for r in kept.collect()] == [(5, 10.0)]
    assert "quarantine_reason" not in kept.columns
    assert sorted(r.quarantine_reason for r in quarantined.collect()) == [
        "dropoff_before_pickup",
        "negative_total",
        "null_pickup_zone",
        "pickup_outside_file_month",
    ]


def _staged_from_file(spark, path):
    """The file through the stage job's own read and normalisation."""
    from spark_jobs.load_taxi import extract

    frame, nanos = extract(spark, str(path))
    return normalize_taxi_schema(frame, str(path), nanos)


def test_column_matching_is_case_insensitive_like_spark(spark):
    frame = spark.createDataFrame([_trip("2025-01-01 00:10:00", 5)], CANONICAL_SCHEMA)
    frame = frame.withColumnRenamed("RatecodeID", "RateCodeID").withColumnRenamed("PULocationID", "pulocationid")
    normalized = normalize_taxi_schema(frame, "yellow_tripdata_2025-01.parquet")
    assert normalized.columns == [name for name, _ in CANONICAL_COLUMNS]
    assert normalized.first().PULocationID == 5
    assert schema_drift(frame)["renamed"] == {"RateCodeID": "RatecodeID", "pulocationid": "PULocationID"}


def test_two_columns_differing_only_by_case_are_refused(spark):
    frame = spark.createDataFrame([_trip("2025-01-01 00:10:00", 5)], CANONICAL_SCHEMA).selectExpr(
        "*", "1.0 AS airport_fee"
    )
    with pytest.raises(SchemaError, match=r"f\.parquet: columns Airport_fee and airport_fee both mean Airport_fee"):
        normalize_taxi_schema(frame, "f.parquet")


@pytest.mark.parametrize("year, era_columns", [(2009, "trip_pickup_datetime"), (2010, "pickup_datetime")])
def test_2009_and_2010_files_are_refused_naming_the_era_and_the_first_supported_month(
    spark, tmp_path, year, era_columns
):
    path = sample_data.write_taxi_month(tmp_path, year, 2, 200)
    with pytest.raises(UnsupportedEraError) as refused:
        _staged_from_file(spark, path)
    message = str(refused.value)
    assert message.startswith(f"{path}: a TLC file of the 2009-2010 era")
    assert era_columns in message and "PULocationID" in message
    assert message.endswith("The first supported month is 2011-01.")


@pytest.mark.parametrize(
    "unit, time_zone", [("ns", None), ("us", "America/New_York"), ("ns", "America/New_York"), ("us", "UTC")]
)
def test_nanosecond_and_zoned_timestamps_are_staged_as_new_york_wall_clock_time(spark, tmp_path, unit, time_zone):
    path = sample_data.write_taxi_month(tmp_path, 2024, 3, 2_000, timestamp_unit=unit, time_zone=time_zone)
    source = pq.read_table(path)
    expected = {}
    for column in ("tpep_pickup_datetime", "tpep_dropoff_datetime"):
        values = source[column]
        if time_zone is not None:  # what a New York clock showed at that instant
            values = pc.local_timestamp(pc.cast(values, pa.timestamp(unit, "America/New_York")))
        expected[column] = [
            v.replace(nanosecond=0) if hasattr(v, "nanosecond") else v
            for v in pc.cast(values, pa.timestamp("us")).to_pylist()
        ]
    staged = _staged_from_file(spark, path).select("tpep_pickup_datetime", "tpep_dropoff_datetime").collect()
    assert len(staged) == source.num_rows
    assert [row.tpep_pickup_datetime for row in staged] == expected["tpep_pickup_datetime"]
    assert [row.tpep_dropoff_datetime for row in staged] == expected["tpep_dropoff_datetime"]
    if time_zone in (None, "America/New_York"):  # the generator's New York times, back unchanged: all in March
        assert {t.month for t in expected["tpep_pickup_datetime"]} == {3}


def test_root_cause_of_a_spark_failure_is_the_innermost_java_error(spark, tmp_path):
    path = tmp_path / "nanos.parquet"
    pq.write_table(pa.table({"t": pa.array([1_700_000_000_000_000_123], pa.timestamp("ns"))}), path)
    spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "false")
    # Spark 4 raises it from the read itself (schema inference), as a PySpark AnalysisException whose message ends
    # in the SQL state; Spark 3.5 raised it inside a job, wrapped ("Job aborted ...").
    with pytest.raises(AnalysisException) as failure:
        spark.read.parquet(str(path)).collect()
    assert "SQLSTATE: 42846" in str(failure.value)
    assert root_cause(failure.value) == "AnalysisException: Illegal Parquet type: INT64 (TIMESTAMP(NANOS,false))."


def test_root_cause_drops_spark_4s_error_class_prefix_and_sql_state_suffix():
    error = RuntimeError("[CANNOT_READ_FILE_FOOTER] Could not read footer for file x.parquet. SQLSTATE: KD001\nmore")
    assert root_cause(error) == "RuntimeError: Could not read footer for file x.parquet."
    wrapped = RuntimeError("Job aborted.\nCaused by: org.apache.spark.SparkException: [X.Y] Bad value. SQLSTATE: 22003")
    assert root_cause(wrapped) == "org.apache.spark.SparkException: [X.Y] Bad value."


def test_an_unreadable_file_is_bad_input_naming_the_file_and_the_innermost_cause(spark, tmp_path):
    from spark_jobs.common.runner import BadInputError
    from spark_jobs.load_taxi import extract

    path = tmp_path / "yellow_tripdata_2025-09.parquet"
    path.write_bytes(b"PAR1 not parquet")
    with pytest.raises(BadInputError) as refused:
        extract(spark, str(path))
    message = str(refused.value)
    assert message.startswith(f"{path}: not a readable parquet file (")
    assert "An error occurred while calling" not in message
    assert "not a Parquet file" in message


@pytest.mark.parametrize("row_group_size", [7, 1000])
def test_the_footers_row_count_is_sparks_count(spark, tmp_path, row_group_size):
    """load_taxi takes the file's row count from its footer (``parquet_column_metrics``) instead of scanning it: the
    same number, over any number of row groups."""
    from spark_jobs.common.report import parquet_column_metrics

    path = tmp_path / "yellow_tripdata_2025-01.parquet"
    pq.write_table(pa.table({"VendorID": pa.array(range(50), pa.int32())}), path, row_group_size=row_group_size)
    assert pq.ParquetFile(path).metadata.num_row_groups == -(-50 // row_group_size)
    assert parquet_column_metrics(path, ["VendorID"])["rowCount"] == spark.read.parquet(str(path)).count() == 50
