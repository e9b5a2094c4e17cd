"""Benchmark baseline: the same read as load_taxi, then a plain parquet write (no Iceberg, no MERGE, no row ids)."""

from __future__ import annotations

import sys

from spark_jobs.common.session import spark_session


def main(argv: list[str]) -> None:
    source, target = argv
    spark = spark_session("bench_bare_copy")
    spark.read.parquet(source).write.mode("overwrite").parquet(target)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
