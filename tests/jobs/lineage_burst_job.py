"""A tiny Spark application for the fleet-burst test: ``WRITES`` small parquet writes to ``OUT``, a pause between
them, so that its OpenLineage listener posts events (the application's, one SQL job per write) over a few seconds
while the fleet of Python clients posts too.

    spark-submit lineage_burst_job.py OUT WRITES PAUSE_SECONDS
"""

from __future__ import annotations

import sys
import time

from pyspark.sql import SparkSession


def main(out: str, writes: int, pause: float) -> None:
    spark = SparkSession.builder.appName("lineage_burst_job").getOrCreate()
    for index in range(writes):
        spark.range(10).write.mode("overwrite").parquet(f"{out}/part_{index}")
        time.sleep(pause)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
