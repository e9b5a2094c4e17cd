"""Measure an audited snapshot into the observations ``include/quality/expectations.py`` judges.

Each function reads the table as the session sees it: during write-audit-publish the session's ``spark.wap.branch``
points its reads at the audit branch (``spark_jobs/common/wap.py``), so the month measured is the month as it would
be published. One aggregation pass over the month (partition-pruned) per table; history is read from Iceberg's file
list (record counts per partition), never scanned.
"""

from __future__ import annotations

import calendar

from pyspark.sql import functions as F

from include.core import contract, naming
from include.quality import expectations
from spark_jobs.common.iceberg_metadata import _each, partition_metrics
from spark_jobs.common.tables import java_table, qualified, table_exists
from spark_jobs.common.taxi import pickup_in_months
from spark_jobs.common.wap import refresh

RAW_MONTH_PARTITION = "tpep_pickup_datetime_month"


def month_record_counts(spark, table: str, ref: str = "main") -> dict[str, int]:
    """Rows per partition path (``tpep_pickup_datetime_month=2025-01``) of ``ref``'s snapshot, from the file list."""
    iceberg = java_table(spark, table)
    if iceberg.snapshot(ref) is None:
        return {}
    specs, counts = iceberg.specs(), {}
    tasks = iceberg.newScan().useRef(ref).planFiles()
    try:
        for task in _each(tasks):
            data_file = task.file()
            path = specs.get(data_file.specId()).partitionToPath(data_file.partition())
            counts[path] = counts.get(path, 0) + data_file.recordCount()
    finally:
        tasks.close()
    return counts


def raw_month_counts(spark, month: str):
    """The audit's one pass over raw taxi's ``month`` as the session reads it (the audit branch during
    write-audit-publish): rows, the days with a pickup (``day_bits``: bit d set for day d), and the counts of each
    rule's offending rows."""
    refresh(spark, naming.TAXI_RAW)  # the branch as the job's write left it
    year, number = map(int, month.split("-"))
    raw = spark.table(qualified(naming.TAXI_RAW)).where(pickup_in_months([(year, number)], "tpep_pickup_datetime"))
    duration = F.col("tpep_dropoff_datetime").cast("long") - F.col("tpep_pickup_datetime").cast("long")
    share = lambda condition: F.sum(F.when(condition, 1).otherwise(0))  # noqa: E731
    return raw.agg(
        F.count(F.lit(1)).alias("rows"),
        # The days with a pickup as bits of one number (bit d: day d), not a distinct count: a distinct aggregate
        # beside the others makes Spark expand and group every row by the day first.
        F.expr("bit_or(shiftleft(CAST(1 AS BIGINT), dayofmonth(tpep_pickup_datetime)))").alias("day_bits"),
        share(F.col("PULocationID").isNull()).alias("null_zone"),
        share(F.col("tpep_dropoff_datetime").isNull()).alias("null_dropoff"),
        share(F.col("total_amount").isNull()).alias("null_total"),
        share((F.col("fare_amount") < 0) | (F.col("fare_amount") > 1000)).alias("fare"),
        share((F.col("trip_distance") < 0) | (F.col("trip_distance") > 500)).alias("distance"),
        share((duration < 0) | (duration > 24 * 3600)).alias("duration"),
    ).first()


def taxi_month(spark, month: str, file_rows: int, added_rows: int) -> tuple[dict, dict]:
    """(observations, notes) of raw taxi's ``month`` as the session reads it (the audit branch), of the month's
    quarantine partition, and of what the load wrote: ``file_rows`` the landed file's rows, ``added_rows`` the rows
    the load's commits added to raw in all (total records of the branch's snapshot less main's)."""
    year, number = map(int, month.split("-"))
    days = calendar.monthrange(year, number)[1]
    row = raw_month_counts(spark, month)
    rows = row["rows"] or 0
    rate = lambda count: (count or 0) / rows if rows else 0.0  # noqa: E731

    # From Iceberg's file list (the month's partition is replaced whole by each load), not a Spark query: the
    # OpenLineage listener would name the quarantine table an input of the load, which does not declare it.
    quarantined = (
        partition_metrics(spark, naming.TAXI_QUARANTINE, f"source_month={month}", []).rows
        if table_exists(spark, naming.TAXI_QUARANTINE)
        else 0
    )

    history = month_record_counts(spark, naming.TAXI_RAW)
    # Rows the load added outside the month's partition: raw is partitioned by the pickup's month, so a row whose
    # pickup is outside the file's month would land in another month, unseen by every check of this one. From
    # metadata: what the branch added in all, less what the month gained.
    month_gain = rows - history.get(f"{RAW_MONTH_PARTITION}={month}", 0)
    trailing = []
    for previous in expectations.trailing_months(month):
        previous_rows = history.get(f"{RAW_MONTH_PARTITION}={previous}")
        if previous_rows:
            y, m = map(int, previous.split("-"))
            trailing.append(previous_rows / calendar.monthrange(y, m)[1])
    notes = {}
    ratio = expectations.ratio_to_trailing_median(rows / days, trailing)
    if ratio is None:
        notes["daily_rows_ratio"] = f"no published month among {', '.join(expectations.trailing_months(month))}"
    observations = {
        "rows": rows,
        "daily_rows_ratio": ratio,
        "quarantine_rate": quarantined / file_rows if file_rows else 0.0,
        "days_missing": days - (row["day_bits"] or 0).bit_count(),
        "null_rate_PULocationID": rate(row["null_zone"]),
        "null_rate_tpep_dropoff_datetime": rate(row["null_dropoff"]),
        "null_rate_total_amount": rate(row["null_total"]),
        "fare_out_of_range_rate": rate(row["fare"]),
        "distance_out_of_range_rate": rate(row["distance"]),
        "duration_out_of_range_rate": rate(row["duration"]),
        "pickups_outside_month": max(added_rows - month_gain, 0),
    }
    return observations, notes


def weather_month(spark, month: str) -> tuple[dict, dict]:
    """(observations, notes) of raw weather's NYC rows of ``month`` as the session reads it."""
    refresh(spark, naming.WEATHER_RAW)
    year, number = map(int, month.split("-"))
    nyc = (
        spark.table(qualified(naming.WEATHER_RAW))
        .where((F.col("year") == year) & (F.col("month") == number))
        .where(F.col("region_code").isin(*contract.NYC_COUNTIES))
        .select("region_code", "meteorological_element", *contract.WEATHER_DAY_COLUMNS)
        .collect()
    )
    expected = {(code, element) for code in contract.NYC_COUNTIES for element in contract.WEATHER_ELEMENTS}
    present = {(r.region_code, r.meteorological_element) for r in nyc}
    observed_days = [
        index + 1
        for r in nyc
        for index, day in enumerate(contract.WEATHER_DAY_COLUMNS)
        if r[day] is not None and r[day] != contract.WEATHER_MISSING_VALUE
    ]
    last_day = max(observed_days, default=0)
    shares = []
    for r in nyc:
        values = [r[day] for day in contract.WEATHER_DAY_COLUMNS[:last_day]]
        missing = sum(1 for v in values if v is None or v == contract.WEATHER_MISSING_VALUE)
        shares.append(missing / last_day if last_day else 1.0)
    observations = {
        "nyc_series_missing": len(expected - present),
        "max_missing_share": max(shares, default=1.0),
        "last_observed_day": last_day,
    }
    return observations, {}


def forecast_run(spark, model: str, run_id: str, zones: int, hours: int) -> tuple[dict, dict]:
    """(observations, notes) of the forecast rows ``run_id`` wrote for ``model``, as the session reads them."""
    refresh(spark, naming.HOURLY_FORECAST)
    rows = spark.table(qualified(naming.HOURLY_FORECAST)).where(
        (F.col("model_name") == model) & (F.col("run_id") == run_id)
    )
    rides = F.col("forecasted_total_rides")
    row = rows.agg(
        F.sum(F.when(rides < 0, 1).otherwise(0)).alias("negative"),
        F.sum(F.when(rides.isNull() | F.isnan(rides), 1).otherwise(0)).alias("nan"),
        F.countDistinct("year", "month", "day", "hour", "pulocationid").alias("zone_hours"),
    ).first()
    observations = {
        "negative_rides": row["negative"] or 0,
        "nan_rides": row["nan"] or 0,
        "zone_hours_missing": max(zones * hours - (row["zone_hours"] or 0), 0),
    }
    return observations, {}


def judge(table: str, observations: dict, notes: dict) -> dict:
    """The audit's verdict as the job report's ``audit`` section (without the branch facts)."""
    results = expectations.evaluate(table, observations, notes)
    return {
        "table": table,
        "observations": observations,
        "results": [result.to_assertion() for result in results],
        "blocking": [result.message for result in expectations.blocking_failures(results)],
        "warnings": [result.message for result in expectations.warnings(results)],
    }
