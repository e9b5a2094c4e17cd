"""MERGE one staged TLC month into the raw table on unique_row_id: re-running a month changes nothing."""

from __future__ import annotations

import contextlib

from pyspark.sql import functions as F

from include.core import naming
from include.sources import downloads
from spark_jobs.common import audit, loaded_source, wap
from spark_jobs.common.iceberg_metadata import partition_metrics, total_records
from spark_jobs.common.report import assertion, column_metrics, table_column_metrics, write_report
from spark_jobs.common.runner import BadInputError, PublishBlockedError, month_job_args, run
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import (
    current_snapshot_id,
    ensure_table,
    merge_source,
    qualified,
    set_table_property,
    table_property,
    target_column,
    write_one_partition_per_job,
)
from spark_jobs.common.taxi import (
    ROW_ID_COLUMNS,
    ROW_ID_PROPERTY,
    ROW_ID_SCHEME,
    pickup_in_months,
    row_id,
    rows_and_distinct_ids,
)


def extract(spark, month: str):
    return spark.table(qualified(naming.TAXI_STAGING)).where(F.col("source_month") == month)


STAGED_METRIC_COLUMNS = ["unique_row_id", "PULocationID", "tpep_pickup_datetime"]
RAW_MONTH_PARTITION = "tpep_pickup_datetime_month"  # raw is partitioned by months(tpep_pickup_datetime)


def negative_values(spark, table: str, column: str, partition_path: str, rows) -> int:
    """Rows with a negative ``column``: 0 when every file's lower bound says so (metadata only), else counted."""
    lowest = partition_metrics(spark, table, partition_path, [column], bounds_of=(column,)).lower_bounds[column]
    if lowest is not None and lowest >= 0:
        return 0
    return rows.where(F.col(column) < 0).count()


def month_filter(month: str, alias: str | None = None) -> str:
    """Pickups inside the month: every staged row's pickup is (the quarantine rule), so only raw's partition of that
    month can hold a match, and a predicate on it lets Iceberg prune every other month's files."""
    year, number = map(int, month.split("-"))
    return pickup_in_months([(year, number)], f"{alias}.tpep_pickup_datetime" if alias else "tpep_pickup_datetime")


def migrate_row_ids(spark) -> None:
    """Rewrite the ids of a raw table written under an earlier ROW_ID_SCHEME: ids are a pure function of the
    canonical columns raw holds, so one rewrite makes them comparable with newly staged ids again (without it, a
    MERGE would insert every re-staged row a second time)."""
    table = qualified(naming.TAXI_RAW)
    columns = spark.table(table).columns
    selected = [row_id(ROW_ID_COLUMNS).alias(c) if c == "unique_row_id" else c for c in columns]
    spark.table(table).select(*selected).writeTo(table).option("fanout-enabled", "true").overwritePartitions()
    set_table_property(spark, naming.TAXI_RAW, ROW_ID_PROPERTY, ROW_ID_SCHEME)


def id_fingerprint(rows) -> tuple[int, int, int]:
    """(rows, and two sums of 64-bit hashes of their ids): equal for equal multisets of ids, and for different ones
    only by a chance of about 2^-128. Decimal sums: exact, and no overflow (an error under ANSI mode)."""
    wide = "decimal(38,0)"
    row = rows.agg(
        F.count(F.lit(1)),
        F.sum(F.xxhash64("unique_row_id").cast(wide)),
        F.sum(F.xxhash64(F.lit("fingerprint"), "unique_row_id").cast(wide)),
    ).first()
    return int(row[0]), int(row[1] or 0), int(row[2] or 0)


def load(spark, staged, month: str, source: str | None = None) -> str:
    """Add the staged month's new rows to raw; returns how: ``append`` into an empty month, ``unchanged`` when raw's
    month already holds exactly the staged ids (an idempotent re-load: two one-column scans instead of a join),
    else ``merge``. The month's commit carries ``source``, the staged month's source identity (loaded_source)."""
    write_one_partition_per_job(spark)
    ensure_raw(spark, staged.schema)
    if table_property(spark, naming.TAXI_RAW, ROW_ID_PROPERTY) != ROW_ID_SCHEME:
        migrate_row_ids(spark)  # every month rewritten: a commit left untagged
    base = current_snapshot_id(spark, naming.TAXI_RAW)
    raw_month = spark.table(qualified(naming.TAXI_RAW)).where(month_filter(month))
    tagged = loaded_source.tagged_commits(spark, month, source) if source else contextlib.nullcontext()
    if not raw_month.limit(1).collect():
        with tagged:
            append_to_empty_month(staged, month, base)
        return "append"
    if id_fingerprint(staged) == id_fingerprint(raw_month):
        return "unchanged"
    with tagged:
        merge_new_rows(spark, staged, month)
    return "merge"


def already_merged(month: str) -> tuple[str | None, dict | None]:
    """(the staged month's source identity, and the report of a merge with nothing to do: raw's main already holds
    the month from that same source, read through pyiceberg before any Spark session starts; else None). Raises
    BadInputError when staging holds the month from a stage that stopped before its last commit."""
    from include.core import settings

    catalog = settings.pyiceberg_catalog()
    staging = loaded_source.month_state(catalog, naming.TAXI_STAGING, month)
    source = staging.identity
    if source is None:
        return None, None
    quarantine = loaded_source.month_state(catalog, naming.TAXI_QUARANTINE, month)
    if not loaded_source.load_completed(staging, quarantine, source):
        # Its repeated rows may not be removed yet: merging them would put them in raw. Retrying cannot help.
        raise BadInputError(
            f"{naming.TAXI_STAGING} holds {month} from a stage that did not complete (no {naming.TAXI_QUARANTINE} "
            f"commit names its snapshot {staging.month_snapshot_id}): run the stage of {month} again, then the merge"
        )
    raw = loaded_source.month_state(catalog, naming.TAXI_RAW, month)
    if raw.identity != source:
        return source, None
    return source, {
        "inputs": {naming.TAXI_STAGING: {"snapshot_id": staging.snapshot_id}},
        "outputs": {naming.TAXI_RAW: {"previous_snapshot_id": raw.snapshot_id, "snapshot_id": raw.snapshot_id}},
        "unchanged": f"{naming.TAXI_RAW} main already holds {month} from the staged source ({source}): nothing merged",
    }


def ensure_raw(spark, schema) -> None:
    ensure_table(
        spark,
        naming.TAXI_RAW,
        schema,
        partitioned_by="months(tpep_pickup_datetime)",
        properties={ROW_ID_PROPERTY: ROW_ID_SCHEME},
    )


def append_to_empty_month(staged, month: str, base_snapshot: int | None) -> None:
    """Nothing to match against: append, with Iceberg checking at commit that no other writer added rows to the
    month after ``base_snapshot`` (serializable isolation), as the MERGE would."""
    writer = staged.writeTo(qualified(naming.TAXI_RAW)).option("isolation-level", "serializable")
    if base_snapshot is not None:
        writer = writer.option("validate-from-snapshot-id", str(base_snapshot))
    writer.overwrite(F.expr(month_filter(month)))


def merge_new_rows(spark, staged, month: str) -> None:
    """MERGE INTO raw USING staged ON <the month> AND raw.unique_row_id = staged.unique_row_id WHEN NOT MATCHED THEN
    INSERT *, with ``DataFrame.mergeInto`` (``tables.merge_source``: Spark 4.1 fails it over a temp view)."""
    raw = qualified(naming.TAXI_RAW)
    on = F.expr(month_filter(month, raw)) & (
        target_column(naming.TAXI_RAW, "unique_row_id") == F.col("staged.unique_row_id")
    )
    merge_source(staged, "staged").mergeInto(raw, on).whenNotMatched().insertAll().merge()


def record_landed_file(month: str) -> None:
    landed = downloads.tlc_landed_path(month)
    if landed.exists():
        downloads.IngestLedger().record(landed.name, downloads.fingerprint_file(landed), naming.TAXI_RAW)


def main(argv: list[str] | None = None, write_audit_publish: bool = True) -> None:
    """``write_audit_publish=False``: MERGE straight into main, as before write-audit-publish (only the bench's side-by-side
    measure of its cost, ``bench/wap.py``, runs it)."""
    args = month_job_args(__doc__, argv)

    source, unchanged = already_merged(args.month)
    if unchanged is not None and not args.reprocess:
        print(f"merge_taxi: {unchanged['unchanged']}", flush=True)
        record_landed_file(args.month)
        write_report(args.report, unchanged)
        return
    spark = spark_session("merge_taxi")
    staged = extract(spark, args.month)
    staging_snapshot = current_snapshot_id(spark, naming.TAXI_STAGING)
    before = current_snapshot_id(spark, naming.TAXI_RAW)
    # Write-audit-publish: the month goes to a branch of its own; main moves only if the audit passes.
    ensure_raw(spark, staged.schema)
    if write_audit_publish:
        branch = wap.branch_name("taxi", args.month)
        wap.open_branch(spark, naming.TAXI_RAW, branch)
    load(spark, staged, args.month, source)
    if write_audit_publish:
        verdict = audit.judge(naming.TAXI_RAW, *audit.taxi_month(spark, args.month))
        audited = wap.publish_or_block(spark, naming.TAXI_RAW, branch, before, verdict)
    else:
        audited = {"published": True, "results": []}
    staged_metrics = table_column_metrics(
        spark, naming.TAXI_STAGING, STAGED_METRIC_COLUMNS, f"source_month={args.month}"
    ) or column_metrics(staged, STAGED_METRIC_COLUMNS)
    inputs = {naming.TAXI_STAGING: {"snapshot_id": staging_snapshot, "rows": staged_metrics["rowCount"]}}
    if not audited["published"]:
        message = wap.blocked_message(audited)
        write_report(
            args.report,
            {
                "input_metrics": {naming.TAXI_STAGING: staged_metrics},
                "assertions": {naming.TAXI_RAW: audited["results"]},
                "inputs": inputs,
                "outputs": {
                    naming.TAXI_RAW: {
                        "previous_snapshot_id": before,
                        "snapshot_id": audited["branch_snapshot_id"],
                        "rows": total_records(spark, naming.TAXI_RAW, audited["branch_snapshot_id"]),
                    }
                },
                "audit": audited,
                "error": {"kind": "blocked", "message": message},
            },
            spark,
        )
        spark.stop()
        raise PublishBlockedError(message)
    after = current_snapshot_id(spark, naming.TAXI_RAW)
    record_landed_file(args.month)
    # The month is all this run can have changed: checking it keeps a month's cost independent of history. Counts
    # and nulls come from Iceberg's file metrics; only the uniqueness of the ids needs the data (one column).
    raw_month = spark.table(qualified(naming.TAXI_RAW)).where(month_filter(args.month))
    in_month = f"{RAW_MONTH_PARTITION}={args.month}"
    metrics = table_column_metrics(spark, naming.TAXI_RAW, ["PULocationID"], in_month) or column_metrics(
        raw_month, ["PULocationID"]
    )
    rows, null_zones = metrics["rowCount"], metrics["columnMetrics"]["PULocationID"]["nullCount"]
    ids = rows_and_distinct_ids(raw_month)[1]
    negative_totals = negative_values(spark, naming.TAXI_RAW, "total_amount", in_month, raw_month)
    write_report(
        args.report,
        {
            "input_metrics": {naming.TAXI_STAGING: staged_metrics},
            "assertions": {
                naming.TAXI_RAW: [
                    assertion("unique", ids == rows, "unique_row_id", ids, rows),
                    assertion("not_null", not null_zones, "PULocationID", null_zones, 0),
                    assertion("non_negative", not negative_totals, "total_amount", negative_totals, 0),
                    *audited["results"],
                ]
            },
            "inputs": inputs,
            "outputs": {
                naming.TAXI_RAW: {
                    "previous_snapshot_id": before,
                    "snapshot_id": after,
                    "rows": total_records(spark, naming.TAXI_RAW, after),
                }
            },
            "audit": audited if "branch" in audited else None,
        },
        spark,
    )
    spark.stop()


if __name__ == "__main__":
    run(main)
