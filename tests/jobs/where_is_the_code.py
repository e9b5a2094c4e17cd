"""A job for the cluster test: where do the executors import the project's code from?

Each executor task imports ``include.core.naming`` and ``spark_jobs.common.taxi`` and reports the files and its Python, or
the import error. The result (JSON) goes to the path given as the only argument.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession


def locate(_partition):
    import sys as executor_sys

    try:
        import include.core.naming
        import spark_jobs.common.taxi

        found = {"include": include.core.naming.__file__, "spark_jobs": spark_jobs.common.taxi.__file__}
    except ImportError as error:
        found = {"error": f"{type(error).__name__}: {error}"}
    yield {**found, "python": executor_sys.executable}


def main(output: str) -> None:
    spark = SparkSession.builder.getOrCreate()
    results = spark.sparkContext.parallelize(range(2), 2).mapPartitions(locate).collect()
    with open(output, "w") as stream:
        json.dump(results, stream)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
