"""Iceberg metadata read through the table object of the job's own session (Iceberg's Java API), not through
Spark SQL on metadata tables (``t.snapshots``, ``t.files``, ``t.all_entries``): the OpenLineage listener would name
each such query an input dataset (``nyc_taxi.yellow_taxi_raw.snapshots``) of the job, beside the table itself."""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.common.tables import java_table


def _each(iterable):
    iterator = iterable.iterator()
    while iterator.hasNext():
        yield iterator.next()


def snapshot_summary(spark, table: str, snapshot_id: int | None) -> dict[str, str]:
    """The summary Iceberg keeps with a snapshot (added-records, total-records...)."""
    snapshot = java_table(spark, table).snapshot(snapshot_id) if snapshot_id is not None else None
    return {str(k): str(v) for k, v in snapshot.summary().items()} if snapshot is not None else {}


def total_records(spark, table: str, snapshot_id: int | None) -> int:
    """Rows of the table at a snapshot, from its summary."""
    return int(snapshot_summary(spark, table, snapshot_id).get("total-records", 0))


def parents(spark, table: str) -> dict[int, int | None]:
    """Snapshot id -> its parent's id, for every snapshot the table still has."""
    return {s.snapshotId(): s.parentId() for s in _each(java_table(spark, table).snapshots())}


def changed_partitions(spark, table: str, snapshot_ids: list[int]) -> set[str]:
    """Partition paths (``tpep_pickup_datetime_month=2025-01``) of the data files the snapshots added or removed."""
    iceberg = java_table(spark, table)
    specs, io, paths = iceberg.specs(), iceberg.io(), set()
    for snapshot_id in snapshot_ids:
        snapshot = iceberg.snapshot(snapshot_id)
        for files in (snapshot.addedDataFiles(io), snapshot.removedDataFiles(io)):
            for data_file in _each(files):
                paths.add(specs.get(data_file.specId()).partitionToPath(data_file.partition()))
    return paths


@dataclass(frozen=True)
class FileMetrics:
    """What Iceberg keeps per data file of one partition, summed: rows, and per column its null count and lowest
    value (None for a column some file keeps no metric of)."""

    files: int
    rows: int
    null_counts: dict[str, int | None]
    lower_bounds: dict[str, float | int | str | None]


def partition_metrics(
    spark, table: str, partition_path: str, columns: list[str], bounds_of: tuple[str, ...] = ()
) -> FileMetrics:
    """``FileMetrics`` of the live data files in the partition ``partition_path`` (e.g. ``source_month=2025-01``);
    lower bounds of the numeric columns ``bounds_of`` only (others stay None)."""
    jvm = spark._jvm
    iceberg = java_table(spark, table)
    schema, specs = iceberg.schema(), iceberg.specs()
    fields = {column: schema.findField(column) for column in columns}
    files = rows = 0
    nulls: dict[str, int | None] = dict.fromkeys(columns, 0)
    lowest: dict[str, object] = dict.fromkeys(columns)
    bounded = dict.fromkeys(columns, True)
    tasks = iceberg.newScan().includeColumnStats().planFiles()
    try:
        for task in _each(tasks):
            data_file = task.file()
            if specs.get(data_file.specId()).partitionToPath(data_file.partition()) != partition_path:
                continue
            files += 1
            rows += data_file.recordCount()
            null_counts, lower_bounds = data_file.nullValueCounts(), data_file.lowerBounds()
            for column, field in fields.items():
                count = null_counts.get(field.fieldId()) if null_counts is not None else None
                nulls[column] = None if count is None or nulls[column] is None else nulls[column] + count
                if column not in bounds_of:
                    bounded[column] = False
                    continue
                bound = lower_bounds.get(field.fieldId()) if lower_bounds is not None else None
                if bound is None:
                    bounded[column] = False
                    continue
                value = jvm.org.apache.iceberg.types.Conversions.fromByteBuffer(field.type(), bound)
                lowest[column] = value if lowest[column] is None else min(lowest[column], value)
    finally:
        tasks.close()
    return FileMetrics(files, rows, nulls, {c: (lowest[c] if bounded[c] else None) for c in columns})
