"""DESIGN.md trap 1 probe: a classic (JVM) PySpark job. Run with spark-submit or plain python; prints one JSON line."""

from __future__ import annotations

import json

import pyspark
from pyspark.sql import SparkSession

spark = (
    SparkSession.builder.master("local[1]")
    .appName("trap1_probe")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")  # its carriage returns would hide the JSON line
    .getOrCreate()
)
total = spark.range(10).selectExpr("sum(id) AS total").first().total
print(
    json.dumps(
        {
            "pyspark": pyspark.__version__,
            "jvm_spark": spark.version,
            "session_class": f"{type(spark).__module__}.{type(spark).__name__}",
            "sum_0_to_9": total,
        }
    )
)
spark.stop()
