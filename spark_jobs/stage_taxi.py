"""Stage one landed TLC month: normalise schema drift, add row ids, replace that month in the staging table."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from include import naming, sources
from spark_jobs.common.runner import run
from spark_jobs.common.report import assertion, column_metrics, write_report
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import current_snapshot_id, ensure_table, qualified
from spark_jobs.common.runner import BadInputError
from spark_jobs.common.taxi import add_row_metadata, deduplicate, normalize_taxi_schema, schema_drift


KEY_COLUMNS = ["tpep_pickup_datetime", "PULocationID", "total_amount"]


def extract(spark, path: str):
    from pyspark.errors import PySparkException
    from py4j.protocol import Py4JJavaError

    try:
        df = spark.read.parquet(path)
        df.limit(1).collect()
    except (PySparkException, Py4JJavaError) as error:
        reason = str(error).strip().splitlines()[0][:300]
        raise BadInputError(f"{path}: not a readable parquet file ({reason})") from error
    return df


def transform(df, source: str, month: str, ingest_timestamp):
    normalized = normalize_taxi_schema(df, source)
    return deduplicate(add_row_metadata(normalized, source.rsplit("/", 1)[-1], month, ingest_timestamp))


def load(spark, staged) -> None:
    ensure_table(spark, naming.TAXI_STAGING, staged.schema, partitioned_by="source_month")
    staged.writeTo(qualified(naming.TAXI_STAGING)).overwritePartitions()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--month", required=True, help="YYYY-MM")
    parser.add_argument("--report")
    args = parser.parse_args(argv)

    landed = sources.tlc_landed_path(args.month)
    if not landed.exists():
        raise FileNotFoundError(f"{landed}: no landed file for month {args.month}; run the download task first")
    spark = spark_session("stage_taxi")
    source = extract(spark, str(landed))
    drift = schema_drift(source)
    staged = transform(source, str(landed), args.month, datetime.now(timezone.utc)).cache()
    load(spark, staged)
    write_report(args.report, {
        "source_file": str(landed),
        "source_fingerprint": sources.fingerprint_file(landed),
        "source_rows": source.count(),
        "staged_rows": staged.count(),
        "schema_drift": drift,
        "input_metrics": {str(landed): column_metrics(source, [c for c in KEY_COLUMNS if c in source.columns])},
        "outputs": {naming.TAXI_STAGING: {"snapshot_id": current_snapshot_id(spark, naming.TAXI_STAGING)}},
        "assertions": {naming.TAXI_STAGING: [
            assertion("unique", staged.select("unique_row_id").distinct().count() == staged.count(), "unique_row_id"),
        ]},
    })
    spark.stop()


if __name__ == "__main__":
    run(main)
