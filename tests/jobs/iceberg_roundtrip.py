"""Test job run through spark-submit: create an Iceberg table, append, MERGE INTO."""

import sys

from spark_jobs.common.session import spark_session


def main(table: str) -> None:
    spark = spark_session("iceberg_roundtrip")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, name STRING, amount DOUBLE) USING iceberg")
    spark.createDataFrame([(1, "a", 1.0), (2, "b", 2.0)], "id BIGINT, name STRING, amount DOUBLE").writeTo(
        table
    ).append()
    spark.createDataFrame(
        [(2, "b2", 20.0), (3, "c", 3.0)], "id BIGINT, name STRING, amount DOUBLE"
    ).createOrReplaceTempView("updates")
    spark.sql(
        f"""MERGE INTO {table} t USING updates u ON t.id = u.id
        WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"""
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
