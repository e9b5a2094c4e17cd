"""The SparkSession every job and test uses, built from include/config.py."""

from __future__ import annotations

import os

from include import catalog_server, config


def spark_session(app_name: str, extra_conf: dict[str, str] | None = None):
    """Under spark-submit the settings came with the command (the operator's choice, e.g. no lineage listener when
    OpenLineage is disabled) and are kept as they are; elsewhere (tests, a plain ``python job.py``) they are applied
    here, and this ``var/``'s catalog server is started if it is not running."""
    from pyspark.sql import SparkSession

    paths = config.Paths.current().ensure()  # the listener's file and the catalog's folder must exist first
    catalog = config.CatalogSettings.current(paths)
    builder = SparkSession.builder.appName(app_name)
    settings = dict(extra_conf or {})
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        catalog_server.ensure_running(paths, catalog)
        settings = {"spark.jars": config.spark_submit_jars(), **config.spark_conf(paths, catalog), **settings}
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
