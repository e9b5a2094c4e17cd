"""The Spark launch of every job: Spark properties, ``spark-submit`` arguments and environment.

Built from the settings (``include/core/settings.py``), the jars (``include/core/jars.py``), dataset naming and the
code zip (``include/spark/codeship.py``); nothing in the project's library imports this module back, which is what
keeps settings free of the launch (the cycle the flat layout had).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from include.core import jars, naming, object_store, settings
from include.core.settings import (
    LOG4J2_PROPERTIES,
    OPENLINEAGE_NAMESPACE,
    PROJECT_ROOT,
    CatalogSettings,
    Paths,
    SettingError,
)
from include.spark import codeship, jvm

DEFAULT_SPARK_MASTER = "local[*]"


def spark_connection_outside_airflow() -> dict[str, str]:
    """``spark_default`` for a SparkSubmitHook in a plain process (bench, tests): outside a task Airflow 3's SDK reads
    connections from the environment only, so the user's ``AIRFLOW_CONN_SPARK_DEFAULT`` or local mode."""
    if settings.SPARK_CONNECTION.raw():
        return {}
    return {"AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": DEFAULT_SPARK_MASTER})}


def jar_paths() -> list[Path]:
    """The jars on every Spark job's class path."""
    return jars.jar_paths(jars.SPARK)


LOOPBACK = "127.0.0.1"


def is_local_master(master: str | None) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` (and None: the project's default, ``local[*]``)."""
    return master is None or master.strip().startswith("local")


def spark_conf(
    paths: Paths | None = None, catalog: CatalogSettings | None = None, lineage: bool = True, master: str | None = None
) -> dict[str, str]:
    """Spark properties for every job: Iceberg extensions and catalog, the OpenLineage listener, local tuning.

    The jars go on the driver's and executors' class path as well as ``--jars``: the OpenLineage listener must
    see Iceberg's classes from the same class loader, or it drops every Iceberg input and output.

    In local mode (``master`` local or None) the driver binds and advertises 127.0.0.1: its RPC and block-manager
    ports would otherwise listen on the address the host name resolves to, or the first external interface. On a
    cluster the executors must reach the driver, so nothing is pinned there.
    """
    paths = paths or Paths.current()
    catalog = catalog or CatalogSettings.current(paths)
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.defaultCatalog": catalog.name,
        **catalog.spark_properties(),
        **object_store.spark_properties(),  # s3:// landed files and models (PIPELINE_LANDING_URI, PIPELINE_MODELS_URI)
        "spark.driver.extraClassPath": os.pathsep.join(str(path) for path in jar_paths()),
        "spark.executor.extraClassPath": os.pathsep.join(str(path) for path in jar_paths()),
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.as_uri()}",
        "spark.driver.memory": settings.SPARK_DRIVER_MEMORY.get(),
        "spark.sql.shuffle.partitions": settings.SPARK_SHUFFLE_PARTITIONS.get(),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.local.dir": str(paths.spark_local_dir),
        "spark.pyspark.python": settings.SPARK_PYSPARK_PYTHON.text(sys.executable),
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PIPELINE_VAR_DIR": str(paths.var),
    }
    if is_local_master(master):
        conf.update({"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK})
    if lineage:
        # The listener only ever writes a local file (its own transports have no spool): the project's operator
        # points it at one outbox file per application and forwards that file's events to airflow.cfg's
        # transport (include/lineage/emit/spark_forwarder.py); any other launch writes the store's file directly.
        conf.update(
            {
                "spark.extraListeners": "io.openlineage.spark.agent.OpenLineageSparkListener",
                "spark.openlineage.namespace": OPENLINEAGE_NAMESPACE,
                "spark.openlineage.transport.type": "file",
                "spark.openlineage.transport.location": str(paths.spark_lineage_events),
                "spark.openlineage.dataset.removePath.pattern": naming.SPARK_LISTENER_REMOVE_PATH_PATTERN,
            }
        )
    conf["spark.driver.extraJavaOptions"] = " ".join(
        [conf["spark.driver.extraJavaOptions"], *jvm.driver_java_options(driver_class_path(conf))]
    )
    extra = settings.SPARK_CONF_EXTRA.raw()
    if extra:
        try:
            conf.update({str(k): str(v) for k, v in json.loads(extra).items()})
        except (ValueError, AttributeError) as error:
            raise SettingError(f"SPARK_CONF_EXTRA must be a JSON object of Spark properties: {error}") from error
    return conf


def driver_class_path(conf: dict[str, str]) -> list[Path]:
    return [Path(entry) for entry in conf.get("spark.driver.extraClassPath", "").split(os.pathsep) if entry]


def ensure_driver_archive(log=print) -> Path | None:
    """The driver's class-data-sharing archive for this project's Spark properties (made once; see include/spark/jvm)."""
    conf = spark_conf()
    return jvm.ensure_archive(conf, driver_class_path(conf), log=log)


def spark_submit_jars() -> str:
    return ",".join(str(path) for path in jar_paths())


PASSED_TO_JOBS = (
    settings.CATALOG_NAME,
    settings.CATALOG_TYPE,
    settings.CATALOG_URI,
    settings.WAREHOUSE,
    settings.S3_ENDPOINT,
    settings.LANDING_URI,
    settings.MODELS_URI,
)


def spark_submit_env(paths: Paths | None = None) -> dict[str, str]:
    """Environment for spark-submit, so the job sees the same ``var/`` and catalog as the DAG that started it (the
    local server's port too, resolved here once, so a job never chooses one of its own)."""
    paths = paths or Paths.current()
    env = {"PIPELINE_VAR_DIR": str(paths.var), "PYTHONPATH": str(PROJECT_ROOT)}
    for setting in PASSED_TO_JOBS:
        if setting.raw():
            env[setting.name] = setting.raw()
    catalog = CatalogSettings.current(paths)
    if catalog.is_local_rest_server:
        env[settings.REST_PORT.name] = str(catalog.rest_port)
    return env


def spark_submit_kwargs(paths: Paths | None = None, lineage: bool = True, master: str | None = None) -> dict:
    """Arguments shared by every SparkSubmitOperator (and SparkSubmitHook) of the project: the jars and the
    project's code (``include/spark/codeship.py``) are shipped with every job, so it runs on a cluster as it does locally.
    ``master``: the one ``spark_default`` names, when known (None: local mode)."""
    paths = paths or Paths.current()
    return {
        "conn_id": "spark_default",
        "conf": spark_conf(paths, lineage=lineage, master=master),
        "jars": spark_submit_jars(),
        "py_files": str(codeship.ensure_built(paths)),
        "env_vars": spark_submit_env(paths),
        "verbose": False,
    }
