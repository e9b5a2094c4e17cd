"""A job for the re-load test: append ``--rows`` of a table's rows to it again, in one commit tagged with
``--month``, ``--identity`` and a new load's id as a taxi load tags its own (spark_jobs/common/loaded_source.py):
the state a load straight into ``main`` leaves when stopped after its write, before it removed the repeated rows
and wrote the quarantine."""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession

from spark_jobs.common import loaded_source


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--table", required=True)
    parser.add_argument("--month", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--rows", type=int, default=5)
    args = parser.parse_args()
    spark = SparkSession.builder.getOrCreate()
    repeated = spark.table(args.table).limit(args.rows).localCheckpoint()
    tags = loaded_source.commit_tags(args.month, args.identity, loaded_source.new_load_id())
    loaded_source.tagged_write(repeated.writeTo(args.table), tags).append()
    spark.stop()


if __name__ == "__main__":
    main()
