"""A job for the catalog concurrency test: append ``--rows`` rows tagged ``--writer`` to a table, in ``--commits``
separate Iceberg commits, through the project's catalog (whatever spark-submit was given)."""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--table", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=3)
    args = parser.parse_args()
    spark = SparkSession.builder.getOrCreate()
    spark.sql(f"CREATE TABLE IF NOT EXISTS {args.table} (writer STRING, commit_no INT, n BIGINT) USING iceberg")
    for commit_no in range(args.commits):
        rows = spark.range(args.rows).select(
            F.lit(args.writer).alias("writer"), F.lit(commit_no).cast("int").alias("commit_no"), F.col("id").alias("n")
        )
        rows.writeTo(args.table).append()
    spark.stop()


if __name__ == "__main__":
    main()
