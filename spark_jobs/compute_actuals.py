"""Hourly ride actuals per pickup zone from the raw taxi table, MERGEd so a re-run changes nothing."""

from __future__ import annotations

import argparse
import operator
from functools import reduce

from pyspark.sql import functions as F

from include import naming
from spark_jobs.common.report import assertion, column_metrics, write_report
from spark_jobs.common.runner import run
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import (
    current_snapshot_id,
    ensure_table,
    merge_source,
    qualified,
    row_count,
    target_column,
)
from spark_jobs.common.taxi import hourly_actuals

KEYS = ("year", "month", "day", "hour", "pulocationid")


def load(spark, actuals) -> None:
    ensure_table(spark, naming.HOURLY_ACTUALS, actuals.schema, partitioned_by="year, month")
    target = lambda column: target_column(naming.HOURLY_ACTUALS, column)  # noqa: E731
    on = reduce(operator.and_, [target(key) == F.col(f"s.{key}") for key in KEYS])
    # MERGE INTO t USING s ON keys WHEN MATCHED AND t.total_rides <> s.total_rides THEN UPDATE SET *
    # WHEN NOT MATCHED THEN INSERT * (tables.merge_source: why not SQL + a temp view)
    (
        merge_source(actuals, "s")
        .mergeInto(qualified(naming.HOURLY_ACTUALS), on)
        .whenMatched(target("total_rides") != F.col("s.total_rides"))
        .updateAll()
        .whenNotMatched()
        .insertAll()
        .merge()
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--report")
    args = parser.parse_args(argv)

    spark = spark_session("compute_actuals")
    raw_snapshot = current_snapshot_id(spark, naming.TAXI_RAW)
    raw = spark.table(qualified(naming.TAXI_RAW))
    raw_metrics = column_metrics(raw, ["tpep_pickup_datetime", "PULocationID"])
    actuals = hourly_actuals(raw)
    load(spark, actuals)
    total = spark.table(qualified(naming.HOURLY_ACTUALS)).agg(F.sum("total_rides")).first()[0] or 0
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
                    "snapshot_id": current_snapshot_id(spark, naming.HOURLY_ACTUALS),
                    "rows": row_count(spark, naming.HOURLY_ACTUALS),
                }
            },
        },
    )
    spark.stop()


if __name__ == "__main__":
    run(main)
