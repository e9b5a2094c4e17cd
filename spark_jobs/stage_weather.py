"""Stage one landed NOAA nClimGrid month (four element files) into the staging table."""

from __future__ import annotations

from pyspark.sql import functions as F

from include.core import naming
from include.sources import downloads
from spark_jobs.common.report import write_report
from spark_jobs.common.runner import month_job_args, run
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import current_snapshot_id, ensure_table, qualified
from spark_jobs.common.weather import RAW_SCHEMA, WeatherFileError, bad_rows, parse_weather


def extract(spark, path: str):
    return spark.read.csv(
        path, schema=RAW_SCHEMA, header=False, mode="PERMISSIVE", columnNameOfCorruptRecord="_corrupt_record"
    )


def validate(raw, path: str) -> None:
    problems = bad_rows(raw).limit(3).collect()
    if problems:
        sample = "; ".join(row.line[:120] for row in problems)
        raise WeatherFileError(f"{path}: rows with a wrong number of fields or unparsable values, e.g. {sample}")
    if raw.limit(1).count() == 0:
        raise WeatherFileError(f"{path}: the file is empty")


def transform(raw, month: str):
    return parse_weather(raw).withColumn("source_month", F.lit(month))


def load(spark, staged) -> None:
    ensure_table(spark, naming.WEATHER_STAGING, staged.schema, partitioned_by="source_month")
    staged.writeTo(qualified(naming.WEATHER_STAGING)).overwritePartitions()


def main(argv: list[str] | None = None) -> None:
    args = month_job_args(__doc__, argv)

    spark = spark_session("stage_weather")
    staged_parts, fingerprints = [], {}
    for element in downloads.WEATHER_ELEMENTS:
        landed = downloads.noaa_landed_path(element, args.month)
        if not landed.exists():
            raise FileNotFoundError(f"{landed}: no landed file for {element} {args.month}; run the download task first")
        raw = extract(spark, str(landed)).cache()
        validate(raw, str(landed))
        staged_parts.append(transform(raw, args.month))
        fingerprints[str(landed)] = downloads.fingerprint_file(landed)
    staged = staged_parts[0]
    for part in staged_parts[1:]:
        staged = staged.unionByName(part)
    load(spark, staged)
    write_report(
        args.report,
        {
            "source_fingerprints": fingerprints,
            "staged_rows": staged.count(),
            "outputs": {naming.WEATHER_STAGING: {"snapshot_id": current_snapshot_id(spark, naming.WEATHER_STAGING)}},
        },
        spark,
    )
    spark.stop()


if __name__ == "__main__":
    run(main)
