"""The SparkSession every job and test uses, built from include/config.py."""

from __future__ import annotations

from include import config


def spark_session(app_name: str, extra_conf: dict[str, str] | None = None):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).config("spark.jars", config.spark_submit_jars())
    for key, value in {**config.spark_conf(), **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
