"""merge_taxi's ways into raw, on a real Iceberg table (its own name, so the pipeline's tables are untouched)."""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from include.core import naming
from spark_jobs import merge_taxi
from spark_jobs.common.tables import current_snapshot_id, ensure_table, qualified, table_property
from spark_jobs.common.taxi import CANONICAL_COLUMNS, ROW_ID_PROPERTY, ROW_ID_SCHEME, add_row_metadata

SCHEMA = T.StructType([T.StructField(name, dtype) for name, dtype in CANONICAL_COLUMNS])


@pytest.fixture
def raw_table(spark, monkeypatch, request):
    name = f"raw_{request.node.name[:40]}"
    monkeypatch.setattr(naming, "TAXI_RAW", name)
    spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
    yield name
    spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")


def _staged(spark, month: str, pickups: list[str]):
    rows = []
    for i, pickup in enumerate(pickups):
        row = {name: None for name, _ in CANONICAL_COLUMNS}
        at = datetime.fromisoformat(pickup)
        row.update(VendorID=1, tpep_pickup_datetime=at, tpep_dropoff_datetime=at, PULocationID=i + 1, total_amount=5.0)
        rows.append(row)
    return add_row_metadata(spark.createDataFrame(rows, SCHEMA), "f.parquet", month, datetime(2025, 2, 1))


def _rows(spark, table: str) -> int:
    return spark.table(qualified(table)).count()


def test_an_empty_month_is_appended_and_a_loaded_month_merged_without_duplicates(spark, raw_table):
    january = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-04 11:00:00"])
    assert merge_taxi.load(spark, january, "2025-01") == "append"
    assert merge_taxi.load(spark, january, "2025-01") == "unchanged"
    assert _rows(spark, raw_table) == 2
    one_changed = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-04 11:00:01"])
    assert merge_taxi.load(spark, one_changed, "2025-01") == "merge", "same count, other ids: merged"
    assert _rows(spark, raw_table) == 3
    february = _staged(spark, "2025-02", ["2025-02-03 10:00:00"])
    assert merge_taxi.load(spark, february, "2025-02") == "append"
    more_january = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-04 11:00:00", "2025-01-09 09:00:00"])
    assert merge_taxi.load(spark, more_january, "2025-01") == "merge"
    assert _rows(spark, raw_table) == 5
    assert table_property(spark, raw_table, ROW_ID_PROPERTY) == ROW_ID_SCHEME


def test_append_fails_when_another_writer_added_to_the_month_since_it_looked(spark, raw_table):
    january = _staged(spark, "2025-01", ["2025-01-03 10:00:00"])
    ensure_table(spark, raw_table, january.schema, partitioned_by="months(tpep_pickup_datetime)")
    merge_taxi.append_to_empty_month(_staged(spark, "2025-02", ["2025-02-01 08:00:00"]), "2025-02", None)
    looked_at = current_snapshot_id(spark, raw_table)  # January empty here
    january.writeTo(qualified(raw_table)).append()  # another writer, after the look
    with pytest.raises(Exception, match="(?i)conflict"):
        merge_taxi.append_to_empty_month(january, "2025-01", looked_at)
    assert _rows(spark, raw_table) == 2


def test_raw_written_under_an_earlier_row_id_scheme_is_rewritten_before_a_merge(spark, raw_table):
    january = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-04 11:00:00"])
    # The previous scheme: SHA-256 over the values as text. Such a table has no row-id property.
    legacy = january.withColumn("unique_row_id", F.sha2(F.concat_ws("|", "VendorID", "PULocationID"), 256))
    ensure_table(spark, raw_table, legacy.schema, partitioned_by="months(tpep_pickup_datetime)")
    legacy.writeTo(qualified(raw_table)).append()
    assert table_property(spark, raw_table, ROW_ID_PROPERTY) is None

    assert merge_taxi.load(spark, january, "2025-01") == "unchanged", "the rewritten ids are the staged ones"
    assert _rows(spark, raw_table) == 2, "none added twice"
    ids = {row.unique_row_id for row in spark.table(qualified(raw_table)).collect()}
    assert ids == {row.unique_row_id for row in january.collect()}
    assert table_property(spark, raw_table, ROW_ID_PROPERTY) == ROW_ID_SCHEME


def test_counts_from_file_metrics_equal_counts_from_the_data(spark, raw_table, tmp_path):
    from spark_jobs.common.report import column_metrics, parquet_column_metrics, table_column_metrics

    january = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-04 11:00:00", "2025-01-05 12:00:00"])
    january = january.withColumn(
        "PULocationID", F.when(F.col("tpep_pickup_datetime") > "2025-01-04", None).otherwise(F.col("PULocationID"))
    )
    merge_taxi.load(spark, january.limit(1), "2025-01")
    merge_taxi.load(spark, january, "2025-01")  # a second data file in the month: metrics are summed over files
    merge_taxi.load(spark, _staged(spark, "2025-02", ["2025-02-03 10:00:00"]), "2025-02")
    january_partition = f"{merge_taxi.RAW_MONTH_PARTITION}=2025-01"
    raw_january = spark.table(qualified(raw_table)).where(merge_taxi.month_filter("2025-01"))
    columns = ["PULocationID", "tpep_pickup_datetime", "Airport_fee", "unique_row_id"]
    from_files = table_column_metrics(spark, raw_table, columns, january_partition)
    assert from_files == column_metrics(raw_january, columns)
    assert from_files["rowCount"] == 3 and from_files["columnMetrics"]["PULocationID"]["nullCount"] == 2

    assert merge_taxi.negative_values(spark, raw_table, "total_amount", january_partition, raw_january) == 0
    negative = _staged(spark, "2025-03", ["2025-03-01 10:00:00"]).withColumn("total_amount", F.lit(-2.5))
    merge_taxi.load(spark, negative, "2025-03")
    march = f"{merge_taxi.RAW_MONTH_PARTITION}=2025-03"
    raw_march = spark.table(qualified(raw_table)).where(merge_taxi.month_filter("2025-03"))
    assert merge_taxi.negative_values(spark, raw_table, "total_amount", march, raw_march) == 1

    path = tmp_path / "month.parquet"
    january.drop("unique_row_id").toPandas().to_parquet(path)
    assert parquet_column_metrics(path, ["pulocationid", "Airport_fee"]) == {
        "rowCount": 3,
        "columnMetrics": {"pulocationid": {"nullCount": 2}, "Airport_fee": {"nullCount": 3}},
    }
    assert parquet_column_metrics(path, ["no_such_column"]) is None
