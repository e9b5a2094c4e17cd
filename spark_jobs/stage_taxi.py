"""Stage one landed TLC month: normalise schema drift, add row ids, replace that month in the staging table."""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import functions as F

from include import naming, sources
from spark_jobs.common.errors import root_cause
from spark_jobs.common.report import assertion, column_metrics, write_report
from spark_jobs.common.runner import BadInputError, month_job_args, run
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import (
    current_snapshot_id,
    ensure_table,
    qualified,
    snapshot_summary,
    write_one_partition_per_job,
)
from spark_jobs.common.taxi import (
    ROW_ID_PROPERTY,
    ROW_ID_SCHEME,
    add_row_metadata,
    deduplicate,
    normalize_taxi_schema,
    schema_drift,
    split_flagged,
    with_quarantine_reason,
)

KEY_COLUMNS = ["tpep_pickup_datetime", "PULocationID", "total_amount"]
QUARANTINE_COLUMNS = {
    "null_pickup_zone": "PULocationID",
    "negative_total": "total_amount",
    "pickup_outside_file_month": "tpep_pickup_datetime",
    "dropoff_before_pickup": "tpep_dropoff_datetime",
}


def nanosecond_timestamps(path: str) -> dict[str, bool]:
    """Columns the file's footer stores as nanosecond timestamps (Spark 3.5 cannot read them as timestamps), each with
    whether it is zoned (``isAdjustedToUTC=true``). Empty when the footer is unreadable: Spark's read then says why."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException):
        return {}
    return {
        field.name: field.type.tz is not None
        for field in schema
        if pa.types.is_timestamp(field.type) and field.type.unit == "ns"
    }


def extract(spark, path: str):
    """(the file as Spark reads it, its nanosecond timestamp columns). Raises BadInputError naming the file and the
    innermost cause when Spark cannot read it."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    nanos = nanosecond_timestamps(path)
    # Read nanosecond timestamps as longs and convert them explicitly (normalize_taxi_schema).
    spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", str(bool(nanos)).lower())
    try:
        df = spark.read.parquet(path)
        df.limit(1).collect()
    except (PySparkException, Py4JJavaError) as error:
        raise BadInputError(f"{path}: not a readable parquet file ({root_cause(error)})") from error
    return df, nanos


def transform(df, source: str, month: str, ingest_timestamp, nanosecond_columns: dict[str, bool] | None = None):
    """Every row normalised, with its row id and its ``quarantine_reason`` (null for a good row); not deduplicated
    (``ids_by_reason`` says whether that is needed)."""
    normalized = normalize_taxi_schema(df, source, nanosecond_columns)
    return with_quarantine_reason(add_row_metadata(normalized, source.rsplit("/", 1)[-1], month, ingest_timestamp))


def ids_by_reason(flagged) -> tuple[dict[str | None, int], int]:
    """({quarantine reason or None for good rows: distinct row ids}, rows that repeat an earlier row), from a shuffle
    of the ids alone. Copies of a row share its id and so its reason."""
    per_id = flagged.groupBy("unique_row_id").agg(
        F.count(F.lit(1)).alias("copies"), F.first("quarantine_reason").alias("reason")
    )
    rows = per_id.groupBy("reason").agg(F.count(F.lit(1)).alias("ids"), F.sum("copies").alias("rows")).collect()
    return {row.reason: row.ids for row in rows}, sum(row.rows - row.ids for row in rows)


def load(spark, staged, quarantined, month: str) -> None:
    write_one_partition_per_job(spark)
    ensure_table(
        spark,
        naming.TAXI_STAGING,
        staged.schema,
        partitioned_by="source_month",
        properties={ROW_ID_PROPERTY: ROW_ID_SCHEME},
    )
    ensure_table(spark, naming.TAXI_QUARANTINE, quarantined.schema, partitioned_by="source_month")
    staged.writeTo(qualified(naming.TAXI_STAGING)).overwritePartitions()
    # Replace this month's quarantine even when it is now empty.
    spark.sql(f"DELETE FROM {qualified(naming.TAXI_QUARANTINE)} WHERE source_month = '{month}'")
    quarantined.writeTo(qualified(naming.TAXI_QUARANTINE)).append()


def main(argv: list[str] | None = None) -> None:
    args = month_job_args(__doc__, argv)

    landed = sources.tlc_landed_path(args.month)
    if not landed.exists():
        raise FileNotFoundError(f"{landed}: no landed file for month {args.month}; run the download task first")
    spark = spark_session("stage_taxi")
    source, nanos = extract(spark, str(landed))
    drift = schema_drift(source)
    flagged = transform(source, str(landed), args.month, datetime.now(UTC), nanos)
    # Counting ids first shuffles the ids only; the rows are shuffled (de-duplicated) only when a file repeats one.
    reasons, repeated_rows = ids_by_reason(flagged)
    staged_rows = reasons.pop(None, 0)
    staged, quarantined = split_flagged(deduplicate(flagged) if repeated_rows else flagged)
    load(spark, staged, quarantined, args.month)
    written = snapshot_summary(spark, naming.TAXI_STAGING, current_snapshot_id(spark, naming.TAXI_STAGING))
    write_report(
        args.report,
        {
            "source_fingerprints": {str(landed): sources.fingerprint_file(landed)},
            "source_rows": source.count(),
            "staged_rows": staged_rows,
            "schema_drift": drift,
            "input_metrics": {
                str(landed): column_metrics(
                    source, [c for c in KEY_COLUMNS if c.lower() in {s.lower() for s in source.columns}]
                )
            },
            "quarantined_rows": reasons,
            "assertions": {
                naming.TAXI_STAGING: [
                    assertion(
                        "unique",
                        int(written.get("added-records", -1)) == staged_rows,
                        "unique_row_id",
                        written.get("added-records"),
                        staged_rows,
                    ),
                ],
                str(landed): [
                    assertion(rule, reasons.get(rule, 0) == 0, column, reasons.get(rule, 0), 0)
                    for rule, column in QUARANTINE_COLUMNS.items()
                ],
            },
            "outputs": {
                naming.TAXI_STAGING: {
                    "snapshot_id": current_snapshot_id(spark, naming.TAXI_STAGING),
                    "rows": staged_rows,
                },
                naming.TAXI_QUARANTINE: {
                    "snapshot_id": current_snapshot_id(spark, naming.TAXI_QUARANTINE),
                    "rows": sum(reasons.values()),
                },
            },
        },
        spark,
    )
    spark.stop()


if __name__ == "__main__":
    run(main)
