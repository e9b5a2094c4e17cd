"""MERGE one staged TLC month into the raw table on unique_row_id: re-running a month changes nothing."""

from __future__ import annotations

from pyspark.sql import functions as F

from include import naming, sources
from spark_jobs.common.report import assertion, column_metrics, write_report
from spark_jobs.common.runner import month_job_args, run
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import current_snapshot_id, ensure_table, merge_source, qualified, target_column


def extract(spark, month: str):
    return spark.table(qualified(naming.TAXI_STAGING)).where(F.col("source_month") == month)


def month_range(month: str) -> tuple[str, str]:
    """[first instant of the month, first instant of the next) as timestamp literals."""
    year, mm = map(int, month.split("-"))
    return f"{year:04d}-{mm:02d}-01 00:00:00", f"{year + (mm == 12):04d}-{mm % 12 + 1:02d}-01 00:00:00"


def load(spark, staged, month: str) -> None:
    ensure_table(spark, naming.TAXI_RAW, staged.schema, partitioned_by="months(tpep_pickup_datetime)")
    # Every staged row's pickup is inside its file's month (the quarantine rule), so only raw's partition of that
    # month can hold a match: the predicate on raw lets Iceberg prune every other month's files from the MERGE.
    start, end = month_range(month)
    pickup = target_column(naming.TAXI_RAW, "tpep_pickup_datetime")
    on = (
        (pickup >= F.expr(f"TIMESTAMP '{start}'"))
        & (pickup < F.expr(f"TIMESTAMP '{end}'"))
        & (target_column(naming.TAXI_RAW, "unique_row_id") == F.col("staged.unique_row_id"))
    )
    # MERGE INTO raw USING staged ON ... WHEN NOT MATCHED THEN INSERT * (tables.merge_source: why not SQL + a view)
    merge_source(staged, "staged").mergeInto(qualified(naming.TAXI_RAW), on).whenNotMatched().insertAll().merge()


def main(argv: list[str] | None = None) -> None:
    args = month_job_args(__doc__, argv)

    spark = spark_session("merge_taxi")
    staged = extract(spark, args.month)
    staging_snapshot = current_snapshot_id(spark, naming.TAXI_STAGING)
    before = current_snapshot_id(spark, naming.TAXI_RAW)
    load(spark, staged, args.month)
    landed = sources.tlc_landed_path(args.month)
    if landed.exists():
        sources.IngestLedger().record(landed.name, sources.fingerprint_file(landed), naming.TAXI_RAW)
    raw = spark.table(qualified(naming.TAXI_RAW))
    checks = raw.agg(
        F.count(F.lit(1)).alias("rows"),
        F.countDistinct("unique_row_id").alias("ids"),
        F.sum(F.col("PULocationID").isNull().cast("long")).alias("null_zones"),
        F.sum((F.col("total_amount") < 0).cast("long")).alias("negative_totals"),
    ).first()
    write_report(
        args.report,
        {
            "input_metrics": {
                naming.TAXI_STAGING: column_metrics(staged, ["unique_row_id", "PULocationID", "tpep_pickup_datetime"])
            },
            "assertions": {
                naming.TAXI_RAW: [
                    assertion("unique", checks.ids == checks.rows, "unique_row_id", checks.ids, checks.rows),
                    assertion("not_null", not checks.null_zones, "PULocationID", checks.null_zones or 0, 0),
                    assertion(
                        "non_negative", not checks.negative_totals, "total_amount", checks.negative_totals or 0, 0
                    ),
                ]
            },
            "inputs": {naming.TAXI_STAGING: {"snapshot_id": staging_snapshot, "rows": staged.count()}},
            "outputs": {
                naming.TAXI_RAW: {
                    "previous_snapshot_id": before,
                    "snapshot_id": current_snapshot_id(spark, naming.TAXI_RAW),
                    "rows": checks.rows,
                }
            },
        },
    )
    spark.stop()


if __name__ == "__main__":
    run(main)
