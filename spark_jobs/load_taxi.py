"""Load one landed TLC month into the raw table, its rows written once: normalise schema drift, add row ids, write
the good rows to an audit branch of raw (write-audit-publish: the branch is the staging area) and the flagged ones to
the quarantine, audit the branch, then publish it to ``main`` or keep it blocked. Re-running a month changes nothing.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from pyspark.sql import functions as F

from include.core import naming, object_store, settings
from include.sources import downloads
from spark_jobs.common import audit, loaded_source, taxi, wap
from spark_jobs.common.errors import root_cause
from spark_jobs.common.iceberg_metadata import partition_metrics, total_records
from spark_jobs.common.report import (
    assertion,
    column_metrics,
    parquet_column_metrics,
    table_column_metrics,
    write_report,
)
from spark_jobs.common.runner import BadInputError, PublishBlockedError, month_job_args, run
from spark_jobs.common.session import running_beside, spark_session
from spark_jobs.common.tables import (
    current_snapshot_id,
    ensure_table,
    merge_source,
    qualified,
    ref_snapshot_id,
    set_table_property,
    table_property,
    target_column,
    write_one_partition_per_job,
)
from spark_jobs.common.taxi import (
    ROW_ID_COLUMNS,
    ROW_ID_PROPERTY,
    ROW_ID_SCHEME,
    add_row_metadata,
    deduplicate,
    normalize_taxi_schema,
    pickup_in_months,
    row_id,
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
RAW_MONTH_PARTITION = "tpep_pickup_datetime_month"  # raw is partitioned by months(tpep_pickup_datetime)


# --- The file ---------------------------------------------------------------------------------------------------


def nanosecond_timestamps(path: str) -> dict[str, bool]:
    """Columns the file's footer stores as nanosecond timestamps (Spark 3.5 and 4.1 cannot read them as timestamps), each with
    whether it is zoned (``isAdjustedToUTC=true``). Empty when the footer is unreadable: Spark's read then says why."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(object_store.readable(path))  # a landed file here, or on the object store
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
    (``remove_repeated_rows`` does that to the written month, when needed; ``write_quarantine`` before its write)."""
    normalized = normalize_taxi_schema(df, source, nanosecond_columns)
    return with_quarantine_reason(add_row_metadata(normalized, source.rsplit("/", 1)[-1], month, ingest_timestamp))


# --- Raw's month --------------------------------------------------------------------------------------------------


def month_filter(month: str, alias: str | None = None) -> str:
    """Pickups inside the month: every good row's pickup is (the quarantine rule), so only raw's partition of that
    month can hold a match, and a predicate on it lets Iceberg prune every other month's files."""
    year, number = map(int, month.split("-"))
    return pickup_in_months([(year, number)], f"{alias}.tpep_pickup_datetime" if alias else "tpep_pickup_datetime")


def raw_month(spark, month: str):
    """Raw's rows of ``month`` as the session reads them: the audit branch during write-audit-publish."""
    return spark.table(qualified(naming.TAXI_RAW)).where(month_filter(month))


def ensure_raw(spark, schema) -> None:
    ensure_table(
        spark,
        naming.TAXI_RAW,
        schema,
        partitioned_by="months(tpep_pickup_datetime)",
        properties={ROW_ID_PROPERTY: ROW_ID_SCHEME},
    )


def migrate_row_ids(spark) -> None:
    """Rewrite the ids of a raw table written under an earlier ROW_ID_SCHEME: ids are a pure function of the
    canonical columns raw holds, so one rewrite makes them comparable with newly computed ids again (without it, a
    MERGE would insert every re-loaded row a second time)."""
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


def month_is_empty(spark, month: str) -> bool:
    """Whether raw's month (as the session reads it) holds no row: a first load appends."""
    return not raw_month(spark, month).limit(1).collect()


def load(
    spark, rows, month: str, tags: Mapping[str, str] | None = None, beside: Callable[[], object] | None = None
) -> str:
    """Add the month's new rows to raw; returns how: ``append`` into an empty month (every row, repeats included:
    ``remove_repeated_rows`` finds them on the written ids), ``unchanged`` when raw's month already holds exactly the
    rows' distinct ids (a forced re-load: two one-column scans instead of a join), else ``merge``. The month's
    commits carry ``tags`` (loaded_source.commit_tags). ``beside``: Spark work run in a thread while an append
    writes the month (``running_beside``), not run otherwise: the caller runs it after a MERGE or an unchanged
    month. It starts only once every quick query of the load has ended (below)."""
    write_one_partition_per_job(spark)
    ensure_raw(spark, rows.schema)
    if table_property(spark, naming.TAXI_RAW, ROW_ID_PROPERTY) != ROW_ID_SCHEME:
        migrate_row_ids(spark)  # every month rewritten: a commit left untagged
    base = current_snapshot_id(spark, naming.TAXI_RAW)
    tagged = loaded_source.tagged_commits(spark, tags) if tags else contextlib.nullcontext()
    if month_is_empty(spark, month):
        # The thread starts with raw's write, after the probes above: while the OpenLineage listener analyses a large
        # write's plan, a quick statement that starts and ends meanwhile loses its START event (Trap 36).
        with tagged, running_beside(beside, "beside raw's write") if beside else contextlib.nullcontext():
            append_to_empty_month(rows, month, base)
        return "append"
    distinct = deduplicate(rows)  # a MERGE inserts every unmatched source row: a repeated new row twice
    if id_fingerprint(distinct) == id_fingerprint(raw_month(spark, month)):
        return "unchanged"
    with tagged:
        merge_new_rows(spark, distinct, month)
    return "merge"


def append_to_empty_month(rows, month: str, base_snapshot: int | None) -> None:
    """Nothing to match against: append, with Iceberg checking at commit that no other writer added rows to the
    month after ``base_snapshot`` (serializable isolation), as the MERGE would."""
    writer = rows.writeTo(qualified(naming.TAXI_RAW)).option("isolation-level", "serializable")
    if base_snapshot is not None:
        writer = writer.option("validate-from-snapshot-id", str(base_snapshot))
    writer.overwrite(F.expr(month_filter(month)))


def merge_new_rows(spark, rows, month: str) -> None:
    """MERGE INTO raw USING rows ON <the month> AND raw.unique_row_id = rows.unique_row_id WHEN NOT MATCHED THEN
    INSERT *, with ``DataFrame.mergeInto`` (``tables.merge_source``: Spark 4.1 fails it over a temp view)."""
    raw = qualified(naming.TAXI_RAW)
    on = F.expr(month_filter(month, raw)) & (
        target_column(naming.TAXI_RAW, "unique_row_id") == F.col("loaded.unique_row_id")
    )
    merge_source(rows, "loaded").mergeInto(raw, on).whenNotMatched().insertAll().merge()


def remove_repeated_rows(spark, month: str) -> tuple[int, int]:
    """Remove, in place, rows of raw's month (as the session reads it: the audit branch) that repeat another row
    (same id: every column equal); returns (rows, distinct ids) as they are afterwards. The check reads the written
    id column only, so a file's rows are shuffled only when it repeats one; it is also the month's uniqueness check.
    The table is refreshed first: after the first write into a table that had no snapshot, the session's cached
    metadata still points the branch at its empty snapshot (wap.refresh), and the count would be 0 of 0."""
    wap.refresh(spark, naming.TAXI_RAW)
    counts = rows_and_distinct_ids(raw_month(spark, month))
    if counts[0] != counts[1]:
        wap.refresh(spark, naming.TAXI_RAW)
        deduplicate(raw_month(spark, month)).writeTo(qualified(naming.TAXI_RAW)).overwrite(F.expr(month_filter(month)))
        wap.refresh(spark, naming.TAXI_RAW)
        counts = rows_and_distinct_ids(raw_month(spark, month))
    return counts


def negative_values(spark, table: str, column: str, partition_path: str, rows) -> int:
    """Rows with a negative ``column``: 0 when every file's lower bound says so (metadata only), else counted."""
    lowest = partition_metrics(spark, table, partition_path, [column], bounds_of=(column,)).lower_bounds[column]
    if lowest is not None and lowest >= 0:
        return 0
    return rows.where(F.col(column) < 0).count()


# --- The quarantine -----------------------------------------------------------------------------------------------


def ensure_quarantine(spark, schema) -> None:
    ensure_table(spark, naming.TAXI_QUARANTINE, schema, partitioned_by="source_month")


def write_quarantine(spark, quarantined, month: str, tags: Mapping[str, str] | None = None) -> None:
    """Replace this month's quarantine, even when it is now empty, in one commit carrying ``tags`` (as write
    options: it may commit while raw's writes run in another thread). Its few rows are deduplicated before the write.
    The quarantine is not audited: without ``write.wap.enabled`` Iceberg writes it to its ``main`` whatever audit
    branch the session writes raw to (pinned by tests/unit/test_wap_branches.py). The table must exist
    (``ensure_quarantine``): one Spark query, the write, so nothing quick runs beside raw's write."""
    write_one_partition_per_job(spark)
    writer = deduplicate(quarantined).writeTo(qualified(naming.TAXI_QUARANTINE))
    loaded_source.tagged_write(writer, tags or {}).overwrite(F.col("source_month") == month)


def quarantine_reasons(spark, month: str) -> dict[str, int]:
    return {
        row.quarantine_reason: row["count"]
        for row in spark.table(qualified(naming.TAXI_QUARANTINE))
        .where(F.col("source_month") == month)
        .groupBy("quarantine_reason")
        .count()
        .collect()
    }


# --- Recognising a month already loaded --------------------------------------------------------------------------

LOADED_TABLES = (naming.TAXI_RAW, naming.TAXI_QUARANTINE)


def already_loaded(month: str, landed, fingerprint: str, identity: str) -> dict | None:
    """The report of a load that has nothing to do: raw's ``main`` and the quarantine already hold ``month`` from
    this very file and code (loaded_source), read through pyiceberg before any Spark session starts. None otherwise."""
    catalog = settings.pyiceberg_catalog()
    states = {table: loaded_source.month_state(catalog, table, month) for table in LOADED_TABLES}
    # Both tagged with this source is not enough: a load stopped before its publish, or blocked at its audit (raw's
    # main then holds an earlier load), did not complete. Raw's commit on main and the quarantine's must be one load's.
    if not loaded_source.load_completed(states[naming.TAXI_RAW], states[naming.TAXI_QUARANTINE], identity):
        return None
    return {
        "source_fingerprints": {str(landed): fingerprint},
        "outputs": {
            table: {"previous_snapshot_id": state.snapshot_id, "snapshot_id": state.snapshot_id}
            for table, state in states.items()
        },
        "unchanged": (
            f"{', '.join(LOADED_TABLES)} already hold {month} from {landed.name} with the same content and loading "
            f"code ({identity}): nothing loaded"
        ),
    }


def raw_month_load_id(month: str) -> str | None:
    """The load id of the commit that holds ``month`` on raw's ``main``: the load a re-load that changes no raw row
    completes (its quarantine carries that id)."""
    return loaded_source.month_load_id(loaded_source.month_state(settings.pyiceberg_catalog(), naming.TAXI_RAW, month))


def record_landed_file(month: str) -> None:
    landed = downloads.tlc_landed_path(month)
    if landed.exists():
        downloads.IngestLedger().record(landed.name, downloads.fingerprint_file(landed), naming.TAXI_RAW)


# --- The job ------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None, write_audit_publish: bool = True) -> None:
    """``write_audit_publish=False``: the rows go straight into raw's main, as before write-audit-publish (only the
    bench's side-by-side measure of its cost, ``bench/wap.py``, runs it)."""
    args = month_job_args(__doc__, argv)

    landed = downloads.tlc_landed_path(args.month)
    if not landed.exists():
        raise FileNotFoundError(f"{landed}: no landed file for month {args.month}; run the download task first")
    fingerprint = downloads.fingerprint_file(landed)
    identity = loaded_source.source_identity(fingerprint, sys.modules[__name__], taxi)
    unchanged = None if args.reprocess else already_loaded(args.month, landed, fingerprint, identity)
    if unchanged is not None:
        print(f"load_taxi: {unchanged['unchanged']}", flush=True)
        record_landed_file(args.month)
        write_report(args.report, unchanged)
        return
    spark = spark_session("load_taxi")
    source, nanos = extract(spark, str(landed))
    drift = schema_drift(source)
    # The file's rows and the key columns' nulls, from its footer (a scan only when it keeps no null counts).
    key_columns = [c for c in KEY_COLUMNS if c.lower() in {s.lower() for s in source.columns}]
    file_metrics = parquet_column_metrics(landed, key_columns) or column_metrics(source, key_columns)
    source_rows = file_metrics["rowCount"]
    good, quarantined = split_flagged(transform(source, str(landed), args.month, datetime.now(UTC), nanos))
    ensure_raw(spark, good.schema)
    before = current_snapshot_id(spark, naming.TAXI_RAW)
    before_rows = total_records(spark, naming.TAXI_RAW, before)
    # Write-audit-publish: the month goes to a branch of its own; main moves only if the audit passes.
    if write_audit_publish:
        branch = wap.branch_name("taxi", args.month)
        wap.open_branch(spark, naming.TAXI_RAW, branch)
    # Every commit of this load carries its id; the month counts as loaded once raw's main and the quarantine hold
    # one load's commits (already_loaded). A load stopped before its publish, or blocked, never moved raw's main.
    load_id = loaded_source.new_load_id()
    tags = loaded_source.commit_tags(args.month, identity, load_id)
    ensure_quarantine(spark, quarantined.schema)
    # With write-audit-publish, raw's main moves only at the publish, after both: an append's quarantine is written
    # beside raw's write, on the cores that write leaves idle (a file of fewer, or unevenly sized, row groups than
    # cores). Straight into main, a MERGE, or an unchanged month: the quarantine last, once raw's month is final.
    beside = (lambda: write_quarantine(spark, quarantined, args.month, tags)) if write_audit_publish else None
    how = load(spark, good, args.month, tags, beside)
    with loaded_source.tagged_commits(spark, tags):
        rows, ids = remove_repeated_rows(spark, args.month)
    if beside is None or how != "append":
        completes = raw_month_load_id(args.month) if how == "unchanged" else load_id
        write_quarantine(spark, quarantined, args.month, loaded_source.commit_tags(args.month, identity, completes))
    reasons = quarantine_reasons(spark, args.month)
    if write_audit_publish:
        wap.refresh(spark, naming.TAXI_RAW)
        added = total_records(spark, naming.TAXI_RAW, ref_snapshot_id(spark, naming.TAXI_RAW, branch)) - before_rows
        observations = audit.taxi_month(spark, args.month, source_rows, added)
        verdict = audit.judge(naming.TAXI_RAW, *observations)
        audited = wap.publish_or_block(spark, naming.TAXI_RAW, branch, before, verdict)
    else:
        audited = {"published": True, "results": []}
    report = {
        "source_fingerprints": {str(landed): fingerprint},
        "source_rows": source_rows,
        "staged_rows": rows,
        "schema_drift": drift,
        "input_metrics": {str(landed): file_metrics},
        "quarantined_rows": reasons,
        "outputs": {
            naming.TAXI_QUARANTINE: {
                "snapshot_id": current_snapshot_id(spark, naming.TAXI_QUARANTINE),
                "rows": sum(reasons.values()),
            },
        },
        "audit": audited if "branch" in audited else None,
    }
    file_assertions = [
        assertion(rule, reasons.get(rule, 0) == 0, column, reasons.get(rule, 0), 0)
        for rule, column in QUARANTINE_COLUMNS.items()
    ]
    if not audited["published"]:
        message = wap.blocked_message(audited)
        report["assertions"] = {naming.TAXI_RAW: audited["results"], str(landed): file_assertions}
        report["outputs"][naming.TAXI_RAW] = {
            "previous_snapshot_id": before,
            "snapshot_id": audited["branch_snapshot_id"],
            "rows": total_records(spark, naming.TAXI_RAW, audited["branch_snapshot_id"]),
        }
        report["error"] = {"kind": "blocked", "message": message}
        write_report(args.report, report, spark)
        spark.stop()
        raise PublishBlockedError(message)
    after = current_snapshot_id(spark, naming.TAXI_RAW)
    record_landed_file(args.month)
    # The month is all this run can have changed: checking it keeps a month's cost independent of history. Counts
    # and nulls come from Iceberg's file metrics; the uniqueness of the ids was counted on the written month above.
    published_month = raw_month(spark, args.month)
    in_month = f"{RAW_MONTH_PARTITION}={args.month}"
    metrics = table_column_metrics(spark, naming.TAXI_RAW, ["PULocationID"], in_month) or column_metrics(
        published_month, ["PULocationID"]
    )
    null_zones = metrics["columnMetrics"]["PULocationID"]["nullCount"]
    negative_totals = negative_values(spark, naming.TAXI_RAW, "total_amount", in_month, published_month)
    report["assertions"] = {
        naming.TAXI_RAW: [
            assertion("unique", ids == rows, "unique_row_id", ids, rows),
            assertion("not_null", not null_zones, "PULocationID", null_zones, 0),
            assertion("non_negative", not negative_totals, "total_amount", negative_totals, 0),
            *audited["results"],
        ],
        str(landed): file_assertions,
    }
    report["outputs"][naming.TAXI_RAW] = {
        "previous_snapshot_id": before,
        "snapshot_id": after,
        "rows": total_records(spark, naming.TAXI_RAW, after),
    }
    write_report(args.report, report, spark)
    spark.stop()


if __name__ == "__main__":
    run(main)
