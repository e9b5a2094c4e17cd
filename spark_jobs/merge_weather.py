"""MERGE one staged weather month into the raw table on (region, year, month, element)."""

from __future__ import annotations

import operator
from functools import reduce

from pyspark.sql import functions as F

from include.core import naming
from include.sources import downloads
from spark_jobs.common import audit, wap
from spark_jobs.common.report import column_metrics, write_report
from spark_jobs.common.runner import PublishBlockedError, month_job_args, run
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import (
    current_snapshot_id,
    ensure_table,
    merge_source,
    qualified,
    row_count,
    target_column,
)
from spark_jobs.common.weather import DAY_COLUMNS, MERGE_KEYS


def extract(spark, month: str):
    return spark.table(qualified(naming.WEATHER_STAGING)).where(F.col("source_month") == month).drop("source_month")


def load(spark, staged) -> None:
    ensure_table(spark, naming.WEATHER_RAW, staged.schema, partitioned_by="year")
    raw = lambda column: target_column(naming.WEATHER_RAW, column)  # noqa: E731
    on = reduce(operator.and_, [raw(key) == F.col(f"staged.{key}") for key in MERGE_KEYS])
    changed = reduce(operator.or_, [~raw(day).eqNullSafe(F.col(f"staged.{day}")) for day in DAY_COLUMNS])
    # MERGE INTO raw USING staged ON keys WHEN MATCHED AND (a day changed) THEN UPDATE SET * WHEN NOT MATCHED THEN
    # INSERT * (tables.merge_source: why not SQL + a temp view)
    (
        merge_source(staged, "staged")
        .mergeInto(qualified(naming.WEATHER_RAW), on)
        .whenMatched(changed)
        .updateAll()
        .whenNotMatched()
        .insertAll()
        .merge()
    )


def main(argv: list[str] | None = None) -> None:
    args = month_job_args(__doc__, argv)

    spark = spark_session("merge_weather")
    staged = extract(spark, args.month)
    staging_snapshot = current_snapshot_id(spark, naming.WEATHER_STAGING)
    before = current_snapshot_id(spark, naming.WEATHER_RAW)
    # Write-audit-publish (spark_jobs/common/wap.py): main moves only if the month passes its expectations.
    ensure_table(spark, naming.WEATHER_RAW, staged.schema, partitioned_by="year")
    branch = wap.branch_name("weather", args.month)
    wap.open_branch(spark, naming.WEATHER_RAW, branch)
    load(spark, staged)
    verdict = audit.judge(naming.WEATHER_RAW, *audit.weather_month(spark, args.month))
    audited = wap.publish_or_block(spark, naming.WEATHER_RAW, branch, before, verdict)
    report = {
        "input_metrics": {
            naming.WEATHER_STAGING: column_metrics(staged, ["region_code", "year", "month", "meteorological_element"])
        },
        "inputs": {naming.WEATHER_STAGING: {"snapshot_id": staging_snapshot, "rows": staged.count()}},
        # The MERGE's source is materialised (tables.merge_source), so Spark's plan, and the listener, map raw's
        # columns to raw itself: the job says where each came from, column for column of the source it merged.
        "column_lineage": {
            naming.WEATHER_RAW: {
                column: [[naming.WEATHER_STAGING, column, "DIRECT", "IDENTITY"]] for column in staged.columns
            }
        },
        "assertions": {naming.WEATHER_RAW: audited["results"]},
        "audit": audited,
    }
    if not audited["published"]:
        message = wap.blocked_message(audited)
        report["outputs"] = {
            naming.WEATHER_RAW: {"previous_snapshot_id": before, "snapshot_id": audited["branch_snapshot_id"]}
        }
        write_report(args.report, {**report, "error": {"kind": "blocked", "message": message}}, spark)
        spark.stop()
        raise PublishBlockedError(message)
    ledger = downloads.IngestLedger()
    for element in downloads.WEATHER_ELEMENTS:
        landed = downloads.noaa_landed_path(element, args.month)
        ledger.record(landed.name, downloads.fingerprint_file(landed), naming.WEATHER_RAW)
    report["outputs"] = {
        naming.WEATHER_RAW: {
            "previous_snapshot_id": before,
            "snapshot_id": current_snapshot_id(spark, naming.WEATHER_RAW),
            "rows": row_count(spark, naming.WEATHER_RAW),
        }
    }
    write_report(args.report, report, spark)
    spark.stop()


if __name__ == "__main__":
    run(main)
