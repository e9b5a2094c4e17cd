"""The jobs' MERGE of a DataFrame read from an Iceberg table, on a real local SparkSession and Iceberg catalog.

On Spark 4.1 a SQL ``MERGE ... USING <temp view of such a DataFrame>`` fails in planning (``No plan for
TableReference``, SPARK-57539); the jobs use ``DataFrame.mergeInto`` (``spark_jobs/common/tables.merge_source``).
Here: load_taxi's MERGE of new rows (its source a DataFrame read from an Iceberg table, as a re-load's is not, so
the rule holds for either) and merge_weather's. The tables are this test's own (the naming constants are
patched), so the pipeline's tables stay untouched.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import functions as F

from include.core import naming
from include.sources import sample_data
from spark_jobs import load_taxi, merge_weather
from spark_jobs.common.tables import ensure_table, qualified
from spark_jobs.common.weather import RAW_SCHEMA, parse_weather

MONTH = "2025-01"


@pytest.fixture
def own_tables(spark, monkeypatch):
    names = {
        "WEATHER_STAGING": "unit_merge_weather_staging",
        "WEATHER_RAW": "unit_merge_weather_raw",
        "TAXI_QUARANTINE": "unit_merge_taxi_source",
        "TAXI_RAW": "unit_merge_taxi_raw",
    }
    for constant, table in names.items():
        monkeypatch.setattr(naming, constant, table)
        spark.sql(f"DROP TABLE IF EXISTS {qualified(table)}")
    return names


def _stage_weather(spark, text: str) -> None:
    raw = spark.createDataFrame([line.split(",") + [None] for line in text.splitlines()], RAW_SCHEMA)
    staged = parse_weather(raw).withColumn("source_month", F.lit(MONTH))
    ensure_table(spark, naming.WEATHER_STAGING, staged.schema, partitioned_by="source_month")
    staged.writeTo(qualified(naming.WEATHER_STAGING)).overwritePartitions()


def test_merge_weather_inserts_then_updates_only_changed_rows(spark, own_tables):
    text = sample_data.weather_month_csv("prcp", 2025, 1)
    _stage_weather(spark, text)
    merge_weather.load(spark, merge_weather.extract(spark, MONTH))
    raw = spark.table(qualified(naming.WEATHER_RAW))
    assert raw.count() == len(text.splitlines())

    first = text.splitlines()[0].split(",")
    first[6] = "123.45"  # day_01 of the first county
    _stage_weather(spark, "\n".join([",".join(first), *text.splitlines()[1:]]))
    merge_weather.load(spark, merge_weather.extract(spark, MONTH))
    raw = spark.table(qualified(naming.WEATHER_RAW))
    assert raw.count() == len(text.splitlines())
    assert raw.where(F.col("region_code") == first[1]).first().day_01 == 123.45
    snapshots = spark.sql(f"SELECT operation FROM {qualified(naming.WEATHER_RAW)}.snapshots ORDER BY committed_at")
    operations = [row.operation for row in snapshots.collect()]
    assert operations == ["append", "overwrite"]


def test_load_taxi_merges_only_the_new_rows_of_the_month(spark, own_tables):
    schema = "unique_row_id string, tpep_pickup_datetime timestamp"
    source = spark.createDataFrame([("a", datetime(2025, 1, 5, 8)), ("b", datetime(2025, 1, 6, 8))], schema)
    # The rows read back from an Iceberg table: the plan shape SPARK-57539 breaks in a SQL MERGE over a temp view.
    ensure_table(spark, naming.TAXI_QUARANTINE, source.schema)
    source.writeTo(qualified(naming.TAXI_QUARANTINE)).append()
    ensure_table(spark, naming.TAXI_RAW, source.schema, partitioned_by="months(tpep_pickup_datetime)")
    existing = spark.createDataFrame([("a", datetime(2025, 1, 5, 8)), ("z", datetime(2024, 12, 6, 8))], schema)
    existing.writeTo(qualified(naming.TAXI_RAW)).append()
    load_taxi.merge_new_rows(spark, spark.table(qualified(naming.TAXI_QUARANTINE)), MONTH)
    assert sorted(row.unique_row_id for row in spark.table(qualified(naming.TAXI_RAW)).collect()) == ["a", "b", "z"]
