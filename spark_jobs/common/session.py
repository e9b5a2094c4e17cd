"""The SparkSession every job and test uses, built from include/core/settings.py and include/spark/submit.py."""

from __future__ import annotations

from include.core import settings
from include.services import catalog_server
from include.spark import submit


def spark_session(app_name: str, extra_conf: dict[str, str] | None = None):
    """Under spark-submit the settings came with the command (the operator's choice, e.g. no lineage listener when
    OpenLineage is disabled) and are kept as they are; elsewhere (tests, a plain ``python job.py``) they are applied
    here, and this ``var/``'s catalog server is started if it is not running."""
    from pyspark.sql import SparkSession

    paths = settings.Paths.current().ensure()  # the listener's file and the catalog's folder must exist first
    catalog = settings.CatalogSettings.current(paths)
    builder = SparkSession.builder.appName(app_name)
    spark_settings = dict(extra_conf or {})
    if not settings.PYSPARK_GATEWAY_PORT.raw():
        catalog_server.ensure_running(paths, catalog)
        spark_settings = {
            "spark.jars": submit.spark_submit_jars(),
            **submit.spark_conf(paths, catalog),
            **spark_settings,
        }
    for key, value in spark_settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
