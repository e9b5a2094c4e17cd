"""Hourly ride actuals per pickup zone from the raw taxi table: only the months raw changed in since the last run
are recomputed and replaced, so a month costs the same however long the history is, and a re-run changes nothing."""

from __future__ import annotations

import argparse

from pyspark.sql import functions as F

from include.core import naming
from spark_jobs.common import iceberg_metadata
from spark_jobs.common.report import assertion, column_metrics, write_report
from spark_jobs.common.runner import run
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import (
    current_snapshot_id,
    ensure_table,
    qualified,
    row_count,
    table_exists,
)
from spark_jobs.common.taxi import hourly_actuals, pickup_in_months

# Kept in the summary of each actuals snapshot, so it rolls back with the table: the raw snapshot it was computed from.
RAW_SNAPSHOT_PROPERTY = "pipeline.raw-snapshot-id"
RAW_MONTH_PARTITION = "tpep_pickup_datetime_month"  # raw is partitioned by months(tpep_pickup_datetime)


def computed_from(spark) -> int | None:
    """The raw snapshot the current actuals were computed from (None: never, or before this was recorded)."""
    if not table_exists(spark, naming.HOURLY_ACTUALS):
        return None
    value = iceberg_metadata.snapshot_summary(
        spark, naming.HOURLY_ACTUALS, current_snapshot_id(spark, naming.HOURLY_ACTUALS)
    ).get(RAW_SNAPSHOT_PROPERTY)
    return int(value) if value else None


def changed_months(spark, since: int | None, until: int) -> list[tuple[int, int]] | None:
    """(year, month) of every raw partition a snapshot after ``since`` up to ``until`` added or removed files in;
    None when that cannot be told (no ``since``, or raw was rolled back past it): then every month is recomputed."""
    if since is None:
        return None
    parent_of = iceberg_metadata.parents(spark, naming.TAXI_RAW)
    chain, snapshot = [], until
    while snapshot is not None and snapshot != since:
        chain.append(snapshot)
        snapshot = parent_of.get(snapshot)
    if snapshot != since:
        return None
    months = set()
    for path in iceberg_metadata.changed_partitions(spark, naming.TAXI_RAW, chain):
        value = path.removeprefix(f"{RAW_MONTH_PARTITION}=")
        if value != "null":
            year, month = value.split("-")
            months.add((int(year), int(month)))
    return sorted(months)


def month_condition(months: list[tuple[int, int]], year_column: str, month_column: str) -> str:
    return " OR ".join(f"({year_column} = {y} AND {month_column} = {m})" for y, m in months) or "FALSE"


def extract(spark, raw_snapshot: int, months: list[tuple[int, int]] | None):
    """Raw as of ``raw_snapshot`` (what the recorded snapshot id says was read), only ``months`` unless None."""
    raw = spark.sql(f"SELECT * FROM {qualified(naming.TAXI_RAW)} VERSION AS OF {raw_snapshot}")
    return raw if months is None else raw.where(pickup_in_months(months))


def load(spark, actuals, raw_snapshot: int) -> None:
    """Replace the recomputed months (partitions) of the actuals table, recording the raw snapshot they come from."""
    ensure_table(spark, naming.HOURLY_ACTUALS, actuals.schema, partitioned_by="year, month")
    actuals.writeTo(qualified(naming.HOURLY_ACTUALS)).option(
        f"snapshot-property.{RAW_SNAPSHOT_PROPERTY}", str(raw_snapshot)
    ).overwritePartitions()


def update_actuals(spark):
    """Recompute the months raw changed in since the actuals' last run (all months the first time).
    Returns (the raw snapshot read, those months or None for all, the raw rows read)."""
    raw_snapshot = current_snapshot_id(spark, naming.TAXI_RAW)
    if raw_snapshot is None:
        raise RuntimeError(f"{naming.TAXI_RAW} has no snapshot yet: run the taxi ingest first")
    months = changed_months(spark, computed_from(spark), raw_snapshot)
    raw = extract(spark, raw_snapshot, months)
    if months != []:
        load(spark, hourly_actuals(raw), raw_snapshot)
    return raw_snapshot, months, raw


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--report")
    args = parser.parse_args(argv)

    spark = spark_session("compute_actuals")
    before = current_snapshot_id(spark, naming.HOURLY_ACTUALS)
    raw_snapshot, months, raw = update_actuals(spark)
    raw_metrics = column_metrics(raw, ["tpep_pickup_datetime", "PULocationID"])
    actuals = spark.table(qualified(naming.HOURLY_ACTUALS))
    if months is not None:
        actuals = actuals.where(month_condition(months, "year", "month"))
    total = actuals.agg(F.sum("total_rides")).first()[0] or 0
    counted = raw_metrics["rowCount"] - raw_metrics["columnMetrics"]["PULocationID"]["nullCount"]
    write_report(
        args.report,
        {
            "input_metrics": {naming.TAXI_RAW: raw_metrics},
            "assertions": {
                naming.HOURLY_ACTUALS: [
                    assertion("equals_raw_count", total == counted, "total_rides", total, counted),
                ]
            },
            "inputs": {naming.TAXI_RAW: {"snapshot_id": raw_snapshot}},
            "outputs": {
                naming.HOURLY_ACTUALS: {
                    "previous_snapshot_id": before,
                    "snapshot_id": current_snapshot_id(spark, naming.HOURLY_ACTUALS),
                    "rows": row_count(spark, naming.HOURLY_ACTUALS),
                }
            },
        },
        spark,
    )
    spark.stop()


if __name__ == "__main__":
    run(main)
