"""Stage one landed TLC month: normalise schema drift, add row ids, replace that month in the staging table."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from pyspark.sql import functions as F

from include.core import naming, settings
from include.sources import downloads
from spark_jobs.common import loaded_source, taxi
from spark_jobs.common.errors import root_cause
from spark_jobs.common.report import assertion, column_metrics, parquet_column_metrics, write_report
from spark_jobs.common.runner import BadInputError, month_job_args, run
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import (
    current_snapshot_id,
    ensure_table,
    qualified,
    write_one_partition_per_job,
)
from spark_jobs.common.taxi import (
    ROW_ID_PROPERTY,
    ROW_ID_SCHEME,
    add_row_metadata,
    deduplicate,
    normalize_taxi_schema,
    rows_and_distinct_ids,
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
    """Columns the file's footer stores as nanosecond timestamps (Spark 3.5 and 4.1 cannot read them as timestamps), each with
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
    (``remove_repeated_rows`` does that to staging after the write, when needed; ``load_quarantine`` before)."""
    normalized = normalize_taxi_schema(df, source, nanosecond_columns)
    return with_quarantine_reason(add_row_metadata(normalized, source.rsplit("/", 1)[-1], month, ingest_timestamp))


def remove_repeated_rows(spark, month: str) -> tuple[int, int]:
    """Remove, in place, rows of the month in staging that repeat another row (same id: every column equal); returns
    (rows, distinct ids) as they are afterwards. Checking reads the written id column only, so a file's rows are
    shuffled only when it repeats one."""
    rows = spark.table(qualified(naming.TAXI_STAGING)).where(F.col("source_month") == month)
    counts = rows_and_distinct_ids(rows)
    if counts[0] != counts[1]:
        deduplicate(rows).writeTo(qualified(naming.TAXI_STAGING)).overwritePartitions()
        counts = rows_and_distinct_ids(
            spark.table(qualified(naming.TAXI_STAGING)).where(F.col("source_month") == month)
        )
    return counts


def load_staging(spark, staged) -> None:
    write_one_partition_per_job(spark)
    ensure_table(
        spark,
        naming.TAXI_STAGING,
        staged.schema,
        partitioned_by="source_month",
        properties={ROW_ID_PROPERTY: ROW_ID_SCHEME},
    )
    staged.writeTo(qualified(naming.TAXI_STAGING)).overwritePartitions()


def load_quarantine(spark, quarantined, month: str) -> None:
    """Replace this month's quarantine, even when it is now empty, in one commit: the stage's last (loaded_source
    tags it with the staging snapshot it completes). Its few rows are deduplicated before the write, so no commit
    follows it."""
    write_one_partition_per_job(spark)
    ensure_table(spark, naming.TAXI_QUARANTINE, quarantined.schema, partitioned_by="source_month")
    deduplicate(quarantined).writeTo(qualified(naming.TAXI_QUARANTINE)).overwrite(F.col("source_month") == month)


STAGED_TABLES = (naming.TAXI_STAGING, naming.TAXI_QUARANTINE)


def already_staged(month: str, landed, fingerprint: str, identity: str) -> dict | None:
    """The report of a stage that has nothing to do: staging and quarantine already hold ``month`` from this very
    file and code (loaded_source), read through pyiceberg before any Spark session starts. None otherwise."""
    catalog = settings.pyiceberg_catalog()
    states = {table: loaded_source.month_state(catalog, table, month) for table in STAGED_TABLES}
    # Staging and quarantine both from this source is not enough: a stage stopped before its last commit leaves
    # staging tagged but its repeated rows maybe not removed. The quarantine's commit must name staging's.
    if not loaded_source.load_completed(states[naming.TAXI_STAGING], states[naming.TAXI_QUARANTINE], identity):
        return None
    return {
        "source_fingerprints": {str(landed): fingerprint},
        "outputs": {
            table: {"previous_snapshot_id": state.snapshot_id, "snapshot_id": state.snapshot_id}
            for table, state in states.items()
        },
        "unchanged": (
            f"{', '.join(STAGED_TABLES)} already hold {month} from {landed.name} with the same content and staging "
            f"code ({identity}): nothing staged"
        ),
    }


def main(argv: list[str] | None = None) -> None:
    args = month_job_args(__doc__, argv)

    landed = downloads.tlc_landed_path(args.month)
    if not landed.exists():
        raise FileNotFoundError(f"{landed}: no landed file for month {args.month}; run the download task first")
    fingerprint = downloads.fingerprint_file(landed)
    identity = loaded_source.source_identity(fingerprint, sys.modules[__name__], taxi)
    unchanged = None if args.reprocess else already_staged(args.month, landed, fingerprint, identity)
    if unchanged is not None:
        print(f"stage_taxi: {unchanged['unchanged']}", flush=True)
        write_report(args.report, unchanged)
        return
    spark = spark_session("stage_taxi")
    source, nanos = extract(spark, str(landed))
    drift = schema_drift(source)
    staged, quarantined = split_flagged(transform(source, str(landed), args.month, datetime.now(UTC), nanos))
    with loaded_source.tagged_commits(spark, args.month, identity):
        load_staging(spark, staged)
        staged_rows, staged_ids = remove_repeated_rows(spark, args.month)
    # This month's own last staging commit, not staging's current snapshot: in a backfill, other months' stages
    # commit in between. Read as already_staged reads it (pyiceberg), so both name the same commit.
    staging_snapshot = loaded_source.month_state(
        settings.pyiceberg_catalog(), naming.TAXI_STAGING, args.month
    ).month_snapshot_id
    with loaded_source.tagged_commits(spark, args.month, identity, completes_snapshot=staging_snapshot):
        load_quarantine(spark, quarantined, args.month)
    reasons = {
        row.quarantine_reason: row["count"]
        for row in spark.table(qualified(naming.TAXI_QUARANTINE))
        .where(F.col("source_month") == args.month)
        .groupBy("quarantine_reason")
        .count()
        .collect()
    }
    key_columns = [c for c in KEY_COLUMNS if c.lower() in {s.lower() for s in source.columns}]
    write_report(
        args.report,
        {
            "source_fingerprints": {str(landed): fingerprint},
            "source_rows": source.count(),
            "staged_rows": staged_rows,
            "schema_drift": drift,
            "input_metrics": {
                str(landed): parquet_column_metrics(landed, key_columns) or column_metrics(source, key_columns)
            },
            "quarantined_rows": reasons,
            "assertions": {
                naming.TAXI_STAGING: [
                    assertion("unique", staged_ids == staged_rows, "unique_row_id", staged_ids, staged_rows),
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
