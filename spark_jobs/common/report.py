"""The report each job leaves for the lineage extractor (row counts, snapshots, metrics): ``contract.JobReport``."""

from __future__ import annotations

from pathlib import Path

from include.core.contract import Assertion, InputMetrics, JobReport


def write_report(path: str | Path | None, report: JobReport | dict, spark=None) -> None:
    """Write the job's report where ``--report`` said; a dict must hold ``JobReport`` fields only. With ``spark``,
    every Iceberg table among the inputs and outputs gets its schema and snapshot summary (``describe_tables``)."""
    if not path:
        return
    if not isinstance(report, JobReport):
        report = JobReport.from_dict(report)
    if spark is not None:
        describe_tables(spark, report)
    report.write(Path(path))


def describe_tables(spark, report: JobReport) -> None:
    """Add each table's Iceberg schema and the summary of its reported (else current) snapshot, from the table
    object the job's session already has: the extractor then needs no catalog of its own."""
    from include.core import naming
    from spark_jobs.common.tables import java_table, table_exists

    for states in (report.inputs, report.outputs):
        for key, state in states.items():
            if not naming.is_table_key(key) or not table_exists(spark, key):
                continue
            table = java_table(spark, key)
            state["iceberg_schema"] = [[column.name(), column.type().toString()] for column in table.schema().columns()]
            snapshot_id = state.get("snapshot_id")
            snapshot = table.snapshot(snapshot_id) if snapshot_id else table.currentSnapshot()
            if snapshot is None:
                continue
            state.setdefault("snapshot_id", snapshot.snapshotId())
            if states is report.outputs and state.get("previous_snapshot_id") == state["snapshot_id"]:
                state["snapshot_summary"] = {}  # the job committed nothing: its output statistics are zero
            else:
                state["snapshot_summary"] = {str(k): str(v) for k, v in snapshot.summary().items()}


def column_metrics(df, columns: list[str]) -> InputMetrics:
    """Row count and null count of each column, in one pass: the dataQualityMetrics of an input."""
    from pyspark.sql import functions as F

    row = df.agg(
        F.count(F.lit(1)).alias("__rows"),
        *[F.sum(F.col(c).isNull().cast("long")).alias(c) for c in columns],
    ).first()
    return {"rowCount": row["__rows"], "columnMetrics": {c: {"nullCount": int(row[c] or 0)} for c in columns}}


def parquet_column_metrics(path: str | Path, columns: list[str]) -> InputMetrics | None:
    """Row count and null counts of a Parquet file's columns (matched case-insensitively) from its footer's
    statistics, without reading the data; None when a column chunk has no null count (then scan instead)."""
    import pyarrow.parquet as pq

    from include.core import object_store

    metadata = pq.ParquetFile(object_store.readable(path)).metadata  # a local file, or an object on the store
    positions = {metadata.schema.column(i).path.lower(): i for i in range(metadata.num_columns)}
    nulls = {}
    for column in columns:
        position = positions.get(column.lower())
        if position is None:
            return None
        total = 0
        for group in range(metadata.num_row_groups):
            statistics = metadata.row_group(group).column(position).statistics
            if statistics is None or not statistics.has_null_count:
                return None
            total += statistics.null_count
        nulls[column] = {"nullCount": total}
    return {"rowCount": metadata.num_rows, "columnMetrics": nulls}


def table_column_metrics(spark, table: str, columns: list[str], partition_path: str) -> InputMetrics | None:
    """Row count and null counts of a table's rows in one partition (``source_month=2025-01``), from the per-file
    metrics Iceberg keeps: no data file is read. None when a file keeps no null count of a column."""
    from spark_jobs.common.iceberg_metadata import partition_metrics

    metrics = partition_metrics(spark, table, partition_path, columns)
    if any(metrics.null_counts[c] is None for c in columns):
        return None
    return {"rowCount": metrics.rows, "columnMetrics": {c: {"nullCount": metrics.null_counts[c]} for c in columns}}


def assertion(name: str, success: bool, column: str | None = None, actual=None, expected=None) -> Assertion:
    return {
        "assertion": name,
        "success": bool(success),
        "column": column,
        "actual": None if actual is None else str(actual),
        "expected": None if expected is None else str(expected),
    }
