"""load_taxi's ways into raw, on a real Iceberg table (its own name, so the pipeline's tables are untouched)."""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from include.core import naming
from spark_jobs import load_taxi
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
    assert load_taxi.load(spark, january, "2025-01") == "append"
    assert load_taxi.load(spark, january, "2025-01") == "unchanged"
    assert _rows(spark, raw_table) == 2
    one_changed = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-04 11:00:01"])
    assert load_taxi.load(spark, one_changed, "2025-01") == "merge", "same count, other ids: merged"
    assert _rows(spark, raw_table) == 3
    february = _staged(spark, "2025-02", ["2025-02-03 10:00:00"])
    assert load_taxi.load(spark, february, "2025-02") == "append"
    more_january = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-04 11:00:00", "2025-01-09 09:00:00"])
    assert load_taxi.load(spark, more_january, "2025-01") == "merge"
    assert _rows(spark, raw_table) == 5
    assert table_property(spark, raw_table, ROW_ID_PROPERTY) == ROW_ID_SCHEME


def test_append_fails_when_another_writer_added_to_the_month_since_it_looked(spark, raw_table):
    january = _staged(spark, "2025-01", ["2025-01-03 10:00:00"])
    ensure_table(spark, raw_table, january.schema, partitioned_by="months(tpep_pickup_datetime)")
    load_taxi.append_to_empty_month(_staged(spark, "2025-02", ["2025-02-01 08:00:00"]), "2025-02", None)
    looked_at = current_snapshot_id(spark, raw_table)  # January empty here
    january.writeTo(qualified(raw_table)).append()  # another writer, after the look
    with pytest.raises(Exception, match="(?i)conflict"):
        load_taxi.append_to_empty_month(january, "2025-01", looked_at)
    assert _rows(spark, raw_table) == 2


def test_raw_written_under_an_earlier_row_id_scheme_is_rewritten_before_a_merge(spark, raw_table):
    january = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-04 11:00:00"])
    # The previous scheme: SHA-256 over the values as text. Such a table has no row-id property.
    legacy = january.withColumn("unique_row_id", F.sha2(F.concat_ws("|", "VendorID", "PULocationID"), 256))
    ensure_table(spark, raw_table, legacy.schema, partitioned_by="months(tpep_pickup_datetime)")
    legacy.writeTo(qualified(raw_table)).append()
    assert table_property(spark, raw_table, ROW_ID_PROPERTY) is None

    assert load_taxi.load(spark, january, "2025-01") == "unchanged", "the rewritten ids are the staged ones"
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
    load_taxi.load(spark, january.limit(1), "2025-01")
    load_taxi.load(spark, january, "2025-01")  # a second data file in the month: metrics are summed over files
    load_taxi.load(spark, _staged(spark, "2025-02", ["2025-02-03 10:00:00"]), "2025-02")
    january_partition = f"{load_taxi.RAW_MONTH_PARTITION}=2025-01"
    raw_january = spark.table(qualified(raw_table)).where(load_taxi.month_filter("2025-01"))
    columns = ["PULocationID", "tpep_pickup_datetime", "Airport_fee", "unique_row_id"]
    from_files = table_column_metrics(spark, raw_table, columns, january_partition)
    assert from_files == column_metrics(raw_january, columns)
    assert from_files["rowCount"] == 3 and from_files["columnMetrics"]["PULocationID"]["nullCount"] == 2

    assert load_taxi.negative_values(spark, raw_table, "total_amount", january_partition, raw_january) == 0
    negative = _staged(spark, "2025-03", ["2025-03-01 10:00:00"]).withColumn("total_amount", F.lit(-2.5))
    load_taxi.load(spark, negative, "2025-03")
    march = f"{load_taxi.RAW_MONTH_PARTITION}=2025-03"
    raw_march = spark.table(qualified(raw_table)).where(load_taxi.month_filter("2025-03"))
    assert load_taxi.negative_values(spark, raw_table, "total_amount", march, raw_march) == 1

    path = tmp_path / "month.parquet"
    january.drop("unique_row_id").toPandas().to_parquet(path)
    assert parquet_column_metrics(path, ["pulocationid", "Airport_fee"]) == {
        "rowCount": 3,
        "columnMetrics": {"pulocationid": {"nullCount": 2}, "Airport_fee": {"nullCount": 3}},
    }
    assert parquet_column_metrics(path, ["no_such_column"]) is None


def test_a_files_repeated_rows_are_appended_then_removed_and_never_merged_twice(spark, raw_table):
    """The load appends a file's good rows as they come (no shuffle before the write) and removes repeats on the
    written ids; into a month that already holds rows, the repeats are removed before the MERGE, which would insert
    each unmatched source row."""
    january = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-04 11:00:00"])
    repeated = january.unionByName(january.limit(1))
    assert load_taxi.load(spark, repeated, "2025-01") == "append"
    assert _rows(spark, raw_table) == 3, "appended as they came"
    assert load_taxi.remove_repeated_rows(spark, "2025-01") == (2, 2)
    assert _rows(spark, raw_table) == 2
    assert load_taxi.remove_repeated_rows(spark, "2025-01") == (2, 2), "nothing left to remove"

    assert load_taxi.load(spark, repeated, "2025-01") == "unchanged", "the same rows, repeats aside"
    new = _staged(spark, "2025-01", ["2025-01-09 09:00:00"])
    assert load_taxi.load(spark, repeated.unionByName(new).unionByName(new), "2025-01") == "merge"
    assert _rows(spark, raw_table) == 3, "the new row once, however often the file repeats it"


def test_the_audit_counts_rows_a_load_added_outside_its_month_and_the_days_without_a_pickup(spark, raw_table):
    """Raw is partitioned by the pickup's month: a row whose pickup is outside the file's month would land in another
    month's partition, unseen by every check of the month. The audit tells it from metadata: the rows added in all,
    less what the month gained."""
    from spark_jobs.common import audit, wap
    from spark_jobs.common.iceberg_metadata import total_records

    december = _staged(spark, "2024-12", ["2024-12-30 10:00:00"])
    load_taxi.load(spark, december, "2024-12")
    before = current_snapshot_id(spark, raw_table)
    wap.open_branch(spark, raw_table, "audit_taxi_202501_unit")
    # Day 31 too: its bit is the 32nd of the audit's days, past an int's.
    january = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-04 11:00:00", "2025-01-31 23:00:00"])
    stray = _staged(spark, "2025-01", ["2024-12-31 23:00:00"])  # a pickup outside the month, let through
    load_taxi.load(spark, january, "2025-01")
    stray.writeTo(qualified(raw_table)).append()
    wap.refresh(spark, raw_table)
    branch = wap.ref_snapshot_id(spark, raw_table, "audit_taxi_202501_unit")
    added = total_records(spark, raw_table, branch) - total_records(spark, raw_table, before)
    observations, _ = audit.taxi_month(spark, "2025-01", file_rows=4, added_rows=added)
    wap.close_session_branch(spark)
    assert added == 4
    assert observations["rows"] == 3
    assert observations["pickups_outside_month"] == 1
    assert observations["days_missing"] == 31 - 3, "days 3, 4 and 31 have a pickup"


def test_work_beside_runs_during_an_append_only(spark, raw_table):
    """load_taxi writes the quarantine beside raw's append of an empty month (``beside``); after a MERGE or an
    unchanged month the caller writes it, once raw's month is final, so ``load`` must not have run it."""
    import threading

    ran: list[tuple[str, bool]] = []
    appending = threading.Event()

    def beside(label: str):
        def work():
            # The append's own thread is inside load() while this runs: its Spark job is the write.
            ran.append((label, threading.current_thread() is not threading.main_thread()))
            appending.set()

        return work

    january = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-04 11:00:00"])
    assert load_taxi.load(spark, january, "2025-01", beside=beside("append")) == "append"
    assert appending.is_set() and ran == [("append", True)], "run in a thread of its own, and waited for"
    assert load_taxi.load(spark, january, "2025-01", beside=beside("unchanged")) == "unchanged"
    more = _staged(spark, "2025-01", ["2025-01-03 10:00:00", "2025-01-09 09:00:00"])
    assert load_taxi.load(spark, more, "2025-01", beside=beside("merge")) == "merge"
    assert ran == [("append", True)], "neither a MERGE nor an unchanged month runs it"

    def failing():
        raise RuntimeError("the quarantine's write failed")

    february = _staged(spark, "2025-02", ["2025-02-03 10:00:00"])
    with pytest.raises(RuntimeError, match="quarantine's write failed"):
        load_taxi.load(spark, february, "2025-02", beside=failing)
