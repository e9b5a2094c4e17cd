"""MERGE one staged TLC month into the raw table on unique_row_id: re-running a month changes nothing."""

from __future__ import annotations

import argparse

from pyspark.sql import functions as F

from include import naming, sources
from spark_jobs.common.report import write_report
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import current_snapshot_id, ensure_table, qualified, row_count


def extract(spark, month: str):
    return spark.table(qualified(naming.TAXI_STAGING)).where(F.col("source_month") == month)


def load(spark, staged) -> None:
    ensure_table(spark, naming.TAXI_RAW, staged.schema, partitioned_by="months(tpep_pickup_datetime)")
    staged.createOrReplaceTempView("staged_month")
    spark.sql(
        f"""MERGE INTO {qualified(naming.TAXI_RAW)} AS raw
        USING staged_month AS staged
        ON raw.unique_row_id = staged.unique_row_id
        WHEN NOT MATCHED THEN INSERT *"""
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--month", required=True, help="YYYY-MM")
    parser.add_argument("--report")
    args = parser.parse_args(argv)

    spark = spark_session("merge_taxi")
    staged = extract(spark, args.month)
    staging_snapshot = current_snapshot_id(spark, naming.TAXI_STAGING)
    before = current_snapshot_id(spark, naming.TAXI_RAW)
    load(spark, staged)
    landed = sources.tlc_landed_path(args.month)
    if landed.exists():
        sources.IngestLedger().record(landed.name, sources.fingerprint_file(landed), naming.TAXI_RAW)
    write_report(args.report, {
        "inputs": {naming.TAXI_STAGING: {"snapshot_id": staging_snapshot, "rows": staged.count()}},
        "outputs": {naming.TAXI_RAW: {
            "previous_snapshot_id": before,
            "snapshot_id": current_snapshot_id(spark, naming.TAXI_RAW),
            "rows": row_count(spark, naming.TAXI_RAW),
        }},
    })
    spark.stop()


if __name__ == "__main__":
    main()
