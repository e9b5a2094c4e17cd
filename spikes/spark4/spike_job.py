"""Spike job, run by spark-submit (through the Airflow provider's SparkSubmitHook): create an Iceberg table, MERGE
into it, read it back. Every setting (catalog, jars, listener) comes with the spark-submit command.

Usage: spark-submit spike_job.py <catalog.namespace.table> <result.json>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession

SCHEMA = "id BIGINT, name STRING, amount DOUBLE"


def main(table: str, result_file: str) -> None:
    spark = SparkSession.builder.appName("spark4_spike").getOrCreate()
    namespace = table.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING, amount DOUBLE) USING iceberg")
    spark.createDataFrame([(1, "a", 1.0), (2, "b", 2.0)], SCHEMA).writeTo(table).append()
    spark.createDataFrame([(2, "b2", 20.0), (3, "c", 3.0)], SCHEMA).createOrReplaceTempView("updates")
    spark.sql(
        f"""MERGE INTO {table} AS target USING updates AS source ON target.id = source.id
        WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"""
    )
    rows = [row.asDict() for row in spark.table(table).orderBy("id").collect()]
    Path(result_file).write_text(
        json.dumps(
            {
                "spark_version": spark.version,
                "ansi_enabled": spark.conf.get("spark.sql.ansi.enabled"),
                "rows": rows,
                "location": spark.sql(f"DESCRIBE TABLE EXTENDED {table}")
                .where("col_name = 'Location'")
                .first()
                .data_type,
            }
        )
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
