"""Iceberg table helpers shared by the jobs.

What a job asks about a table's state (does it exist, its properties, the snapshot a branch points at) is read from
the Iceberg table object of the job's own session (Iceberg's Java API), not with Spark SQL (``SHOW TBLPROPERTIES``,
``SELECT ... FROM t.refs``, ``CREATE TABLE IF NOT EXISTS`` of an existing table): each SQL statement is planned,
often run as a Spark job, and handed to the OpenLineage listener, which analyses its plan for an event. They were 13
of the taxi DAG's 34 SQL executions (docs/performance.md)."""

from __future__ import annotations

from include.core import settings


def qualified(table: str) -> str:
    return settings.CatalogSettings.current().table(table)


def table_exists(spark, table: str) -> bool:
    return spark.catalog.tableExists(qualified(table))


def java_table(spark, table: str, refresh: bool = False):
    """The Iceberg table (``org.apache.iceberg.Table``) as the session's catalog loads it; ``refresh``: reloaded from
    the catalog first (one catalog request, no Spark job), so that it shows every commit, this session's or another
    writer's, up to now."""
    iceberg = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, qualified(table))
    if refresh:
        iceberg.refresh()
    return iceberg


def ensure_table(spark, table: str, schema, partitioned_by: str | None = None, properties: dict | None = None) -> None:
    """CREATE TABLE IF NOT EXISTS from a Spark schema (a StructType), with ``properties`` on a new table; no SQL at all
    when the table exists (the statements would change nothing)."""
    if table_exists(spark, table):
        return
    columns = ", ".join(f"`{field.name}` {field.dataType.simpleString()}" for field in schema.fields)
    partitioning = f" PARTITIONED BY ({partitioned_by})" if partitioned_by else ""
    table_properties = {"format-version": "2", "write.merge.mode": "copy-on-write", **(properties or {})}
    rendered = ", ".join(f"'{key}'='{value}'" for key, value in table_properties.items())
    ensure_namespace(spark)
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {qualified(table)} ({columns}) USING iceberg{partitioning} TBLPROPERTIES ({rendered})"
    )


def ensure_namespace(spark) -> None:
    """CREATE NAMESPACE IF NOT EXISTS, whoever else creates it at the same moment. The REST catalog's JDBC store
    answers the second of two concurrent creations of a namespace with a server error (the unique key of its
    ``iceberg_namespace_properties``: "Failed to execute: INSERT INTO iceberg_namespace_properties"), not with "already
    exists", which ``IF NOT EXISTS`` would pass over: seen when the fleet ran the taxi and weather DAGs at once on a new
    catalog (Trap 67). The namespace then exists, which is all this asks; any other failure is raised."""
    namespace = f"{settings.CatalogSettings.current().name}.{settings.ICEBERG_NAMESPACE}"
    try:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    except Exception:
        if not spark.catalog.databaseExists(namespace):
            raise


def table_property(spark, table: str, key: str) -> str | None:
    value = java_table(spark, table, refresh=True).properties().get(key)
    return None if value is None else str(value)


def set_table_property(spark, table: str, key: str, value: str) -> None:
    spark.sql(f"ALTER TABLE {qualified(table)} SET TBLPROPERTIES ('{key}'='{value}')")


def write_one_partition_per_job(spark) -> None:
    """Iceberg's default write distribution (``hash``) shuffles every row of a partitioned write by partition: when
    a job writes one partition (a month), that is one task writing everything after a shuffle. The taxi jobs write
    one month at a time (the quarantine rule), so they write in place instead, each task its own file."""
    spark.conf.set("spark.sql.iceberg.distribution-mode", "none")


def current_snapshot_id(spark, table: str) -> int | None:
    """The snapshot ``main`` points at (None: no such table, or no snapshot on ``main``), whatever branch the
    session writes to."""
    return ref_snapshot_id(spark, table, "main")


def ref_snapshot_id(spark, table: str, ref: str) -> int | None:
    """The snapshot the branch or tag ``ref`` points at; None when the table or the ref does not exist."""
    if not table_exists(spark, table):
        return None
    snapshot = java_table(spark, table, refresh=True).snapshot(ref)
    return None if snapshot is None else int(snapshot.snapshotId())


def merge_source(source, alias: str = "source"):
    """``source`` aliased for ``DataFrame.mergeInto``, the way every job MERGEs a DataFrame into a table.

    Not ``createOrReplaceTempView`` + SQL ``MERGE ... USING <view>``: on Spark 4.1 a temp view made from a DataFrame
    that reads an Iceberg table holds a ``V2TableReference``, and MERGE fails in planning with ``[INTERNAL_ERROR] ...
    assertion failed: No plan for TableReference[...]`` (SPARK-57539, apache/spark#56515; fixed in Spark 4.2 by
    SPARK-54873, not on branch-4.1). ``mergeInto`` puts the DataFrame's plan into the MERGE directly."""
    return source.alias(alias)


def target_column(table: str, column: str):
    """A column of the MERGE target ``table`` (a project table key) in a ``mergeInto`` condition."""
    from pyspark.sql import functions as F

    return F.col(f"{qualified(table)}.{column}")


def row_count(spark, table: str) -> int:
    return spark.table(qualified(table)).count()
