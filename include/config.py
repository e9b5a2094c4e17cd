"""The one place that owns configuration and paths.

Everything a run writes lives under ``var/`` (or ``$PIPELINE_VAR_DIR``). The Iceberg catalog is declared here once
and rendered twice: as Spark properties (for spark-submit and the test SparkSession) and as a pyiceberg catalog.
Environment variables select another catalog or warehouse; no job or DAG repeats these settings.

| variable | default | meaning |
|---|---|---|
| ``PIPELINE_VAR_DIR`` | ``<project>/var`` | root of all run state |
| ``ICEBERG_CATALOG_NAME`` | ``lakehouse`` | catalog name, identical for Spark and pyiceberg |
| ``ICEBERG_CATALOG_TYPE`` | ``rest`` | ``rest`` (the local server, or a remote one by URI) or ``jdbc`` (server-less) |
| ``ICEBERG_CATALOG_URI`` | unset: the local REST server | REST endpoint of a remote catalog, or the JDBC URL (``jdbc``) |
| ``ICEBERG_REST_PORT`` | ``18181`` | port of the local REST catalog server (127.0.0.1 only) |
| ``ICEBERG_REST_BACKEND_URI`` | ``jdbc:sqlite:<var>/catalog/iceberg_catalog.db`` | JDBC catalog behind the local server |
| ``ICEBERG_CATALOG_USER`` / ``ICEBERG_CATALOG_PASSWORD`` | unset | JDBC credentials (of the backend, for the server) |
| ``ICEBERG_WAREHOUSE`` | ``file://<var>/warehouse`` | warehouse root (``s3://bucket/prefix`` for S3) |
| ``S3_ENDPOINT`` | unset | S3-compatible endpoint (MinIO) for an ``s3://`` warehouse |
| ``SPARK_DRIVER_MEMORY`` | ``2g`` | driver memory of every Spark job |
| ``SPARK_SHUFFLE_PARTITIONS`` | ``4`` | ``spark.sql.shuffle.partitions`` |
| ``SPARK_CONF_EXTRA`` | unset | JSON object of extra Spark properties (e.g. S3 credentials) |
| ``SPARK_PYSPARK_PYTHON`` | this venv's python | Python of the Spark driver and executors |
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

PROJECT_ROOT = Path(__file__).resolve().parent.parent
JARS_DIR = PROJECT_ROOT / "jars"
SPARK_JOBS_DIR = PROJECT_ROOT / "spark_jobs"
DAGS_DIR = PROJECT_ROOT / "dags"
PLUGINS_DIR = PROJECT_ROOT / "plugins"
LOG4J2_PROPERTIES = PROJECT_ROOT / "include" / "templates" / "log4j2.properties"

ICEBERG_NAMESPACE = "nyc_taxi"
OPENLINEAGE_NAMESPACE = "nyc_taxi_pipeline"
LOCAL_REST_HOST = "127.0.0.1"
DEFAULT_REST_PORT = 18181
DEFAULT_SPARK_MASTER = "local[*]"


def spark_connection_outside_airflow() -> dict[str, str]:
    """``spark_default`` for a SparkSubmitHook in a plain process (bench, tests): outside a task Airflow 3's SDK reads
    connections from the environment only, so the user's ``AIRFLOW_CONN_SPARK_DEFAULT`` or local mode."""
    if os.environ.get("AIRFLOW_CONN_SPARK_DEFAULT"):
        return {}
    return {"AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": DEFAULT_SPARK_MASTER})}


# The Spark line of pyspark and of the Spark-side jars (iceberg-spark-runtime-4.1_2.13, openlineage-spark_2.13):
# tests/integration/test_stack.py checks all three agree. Spark 4 runs with ANSI mode on (its default,
# spark.sql.ansi.enabled=true); the transforms use try_cast & co. where a bad value must become null (README).
SPARK_VERSION = "4.1"
SCALA_VERSION = "2.13"


def _env(name: str, default: str) -> str:
    value = os.environ.get(name, "").strip()
    return value or default


@dataclass(frozen=True)
class Paths:
    """The ``var/`` layout. Every path is absolute."""

    var: Path

    @classmethod
    def current(cls) -> Paths:
        return cls(Path(_env("PIPELINE_VAR_DIR", str(PROJECT_ROOT / "var"))).resolve())

    @property
    def airflow_home(self) -> Path:
        return self.var / "airflow"

    @property
    def logs(self) -> Path:
        return self.var / "logs"

    @property
    def secrets(self) -> Path:
        return self.var / "secrets"

    @property
    def catalog_dir(self) -> Path:
        return self.var / "catalog"

    @property
    def warehouse(self) -> Path:
        return self.var / "warehouse"

    @property
    def landing(self) -> Path:
        return self.var / "landing"

    @property
    def models(self) -> Path:
        return self.var / "models"

    @property
    def lineage(self) -> Path:
        return self.var / "lineage"

    @property
    def lineage_events(self) -> Path:
        return self.lineage / "events.jsonl"

    @property
    def spark_lineage_events(self) -> Path:
        return self.lineage / "spark" / "events.jsonl"

    @property
    def job_reports(self) -> Path:
        return self.lineage / "reports"

    @property
    def lineage_spool(self) -> Path:
        return self.lineage / "spool"

    @property
    def bench(self) -> Path:
        return self.var / "bench"

    @property
    def spark_local_dir(self) -> Path:
        return self.var / "spark" / "tmp"

    def ensure(self) -> Paths:
        for folder in (
            self.airflow_home,
            self.catalog_dir,
            self.logs,
            self.warehouse,
            self.landing,
            self.models,
            self.spark_lineage_events.parent,
            self.job_reports,
            self.lineage_spool,
            self.bench,
            self.spark_local_dir,
        ):
            folder.mkdir(parents=True, exist_ok=True)
        return self


@dataclass(frozen=True)
class CatalogSettings:
    """One Iceberg catalog, seen identically by Spark and pyiceberg."""

    name: str
    type: str
    uri: str
    warehouse: str
    user: str | None = None
    password: str | None = None
    s3_endpoint: str | None = None
    is_local_rest_server: bool = False
    rest_port: int = DEFAULT_REST_PORT
    rest_backend_uri: str | None = None

    @classmethod
    def current(cls, paths: Paths | None = None) -> CatalogSettings:
        paths = paths or Paths.current()
        catalog_type = _env("ICEBERG_CATALOG_TYPE", "rest").lower()
        if catalog_type not in ("jdbc", "rest"):
            raise ValueError(f"ICEBERG_CATALOG_TYPE={catalog_type!r} is not supported; use 'rest' or 'jdbc'")
        port_text = _env("ICEBERG_REST_PORT", str(DEFAULT_REST_PORT))
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"ICEBERG_REST_PORT={port_text!r} is not a TCP port")
        explicit_uri = os.environ.get("ICEBERG_CATALOG_URI", "").strip()
        local_server = catalog_type == "rest" and not explicit_uri
        if local_server:
            uri = f"http://{LOCAL_REST_HOST}:{port_text}"
        else:
            uri = explicit_uri or f"jdbc:sqlite:{paths.catalog_dir / 'iceberg_catalog.db'}"
        return cls(
            name=_env("ICEBERG_CATALOG_NAME", "lakehouse"),
            type=catalog_type,
            uri=uri,
            warehouse=_env("ICEBERG_WAREHOUSE", paths.warehouse.as_uri()),
            user=os.environ.get("ICEBERG_CATALOG_USER") or None,
            password=os.environ.get("ICEBERG_CATALOG_PASSWORD") or None,
            s3_endpoint=os.environ.get("S3_ENDPOINT") or None,
            is_local_rest_server=local_server,
            rest_port=int(port_text),
            rest_backend_uri=os.environ.get("ICEBERG_REST_BACKEND_URI", "").strip() or None,
        )

    @property
    def is_sqlite(self) -> bool:
        return self.uri.startswith("jdbc:sqlite:")

    def table(self, table: str, namespace: str = ICEBERG_NAMESPACE) -> str:
        """Fully qualified Spark name, e.g. ``lakehouse.nyc_taxi.yellow_taxi_raw``."""
        return f"{self.name}.{namespace}.{table}"

    def spark_properties(self) -> dict[str, str]:
        prefix = f"spark.sql.catalog.{self.name}"
        props = {
            prefix: "org.apache.iceberg.spark.SparkCatalog",
            f"{prefix}.type": self.type,
            f"{prefix}.uri": self.uri,
            f"{prefix}.warehouse": self.warehouse,
        }
        if self.type == "jdbc":
            props[f"{prefix}.jdbc.schema-version"] = "V1"
            if self.is_sqlite:
                # SQLite allows one writer: one pooled connection per JVM, and wait for other processes' locks.
                props[f"{prefix}.clients"] = "1"
                props[f"{prefix}.jdbc.busy_timeout"] = "30000"
                # WAL: a reader left open by the catalog (seen on CREATE TABLE after a namespace lookup) no
                # longer blocks the commit of a writer.
                props[f"{prefix}.jdbc.journal_mode"] = "WAL"
            if self.user:
                props[f"{prefix}.jdbc.user"] = self.user
            if self.password:
                props[f"{prefix}.jdbc.password"] = self.password
        if self.warehouse.startswith("s3"):
            props[f"{prefix}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
            if self.s3_endpoint:
                props[f"{prefix}.s3.endpoint"] = self.s3_endpoint
                props[f"{prefix}.s3.path-style-access"] = "true"
        return props

    def pyiceberg_properties(self) -> dict[str, str]:
        if self.type == "rest":
            props = {"type": "rest", "uri": self.uri, "warehouse": self.warehouse}
        else:
            props = {
                "type": "sql",
                "uri": _sqlalchemy_url(self.uri, self.user, self.password),
                "warehouse": self.warehouse,
            }
        if self.s3_endpoint:
            props["s3.endpoint"] = self.s3_endpoint
        return props


def _sqlalchemy_url(jdbc_uri: str, user: str | None, password: str | None) -> str:
    if jdbc_uri.startswith("jdbc:sqlite:"):
        return "sqlite:///" + jdbc_uri.removeprefix("jdbc:sqlite:")
    if jdbc_uri.startswith("jdbc:postgresql:"):
        parsed = urlparse(jdbc_uri.removeprefix("jdbc:"))
        credentials = f"{user}:{password}@" if user and password else (f"{user}@" if user else "")
        return f"postgresql+psycopg2://{credentials}{parsed.netloc}{parsed.path}"
    raise ValueError(f"ICEBERG_CATALOG_URI={jdbc_uri!r}: only jdbc:sqlite: and jdbc:postgresql: URLs are supported")


def jar_paths() -> list[Path]:
    """The jars on every Spark job's class path."""
    from include import jars

    return jars.jar_paths(jars.SPARK)


def spark_conf(
    paths: Paths | None = None, catalog: CatalogSettings | None = None, lineage: bool = True
) -> dict[str, str]:
    """Spark properties for every job: Iceberg extensions and catalog, the OpenLineage listener, local tuning.

    The jars go on the driver's and executors' class path as well as ``--jars``: the OpenLineage listener must
    see Iceberg's classes from the same class loader, or it drops every Iceberg input and output.
    """
    paths = paths or Paths.current()
    catalog = catalog or CatalogSettings.current(paths)
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.defaultCatalog": catalog.name,
        **catalog.spark_properties(),
        "spark.driver.extraClassPath": os.pathsep.join(str(path) for path in jar_paths()),
        "spark.executor.extraClassPath": os.pathsep.join(str(path) for path in jar_paths()),
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.as_uri()}",
        "spark.driver.memory": _env("SPARK_DRIVER_MEMORY", "2g"),
        "spark.sql.shuffle.partitions": _env("SPARK_SHUFFLE_PARTITIONS", "4"),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.local.dir": str(paths.spark_local_dir),
        "spark.pyspark.python": _env("SPARK_PYSPARK_PYTHON", sys.executable),
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PIPELINE_VAR_DIR": str(paths.var),
    }
    if lineage:
        conf.update(
            {
                "spark.extraListeners": "io.openlineage.spark.agent.OpenLineageSparkListener",
                "spark.openlineage.namespace": OPENLINEAGE_NAMESPACE,
                "spark.openlineage.transport.type": "file",
                "spark.openlineage.transport.location": str(paths.spark_lineage_events),
                "spark.openlineage.dataset.removePath.pattern": _spark_listener_remove_path_pattern(),
            }
        )
        kafka = spark_listener_kafka_conf(paths)
        if kafka:
            del conf["spark.openlineage.transport.location"]
            conf.update(kafka)
    extra = os.environ.get("SPARK_CONF_EXTRA", "").strip()
    if extra:
        try:
            conf.update({str(k): str(v) for k, v in json.loads(extra).items()})
        except (ValueError, AttributeError) as error:
            raise ValueError(f"SPARK_CONF_EXTRA must be a JSON object of Spark properties: {error}") from error
    return conf


SPARK_LINEAGE_KAFKA = "SPARK_LINEAGE_KAFKA_BOOTSTRAP_SERVERS"
SPARK_LINEAGE_KAFKA_TOPIC = "SPARK_LINEAGE_KAFKA_TOPIC"


def spark_listener_kafka_conf(paths: Paths) -> dict[str, str]:
    """With ``SPARK_LINEAGE_KAFKA_BOOTSTRAP_SERVERS`` set, the Spark listener sends to Kafka instead of its file (topic
    ``SPARK_LINEAGE_KAFKA_TOPIC``, default ``openlineage.events``): openlineage-java's Kafka transport, kafka-clients
    on the driver's class path. Not both: openlineage-spark 1.53 cannot configure a composite holding a Kafka transport
    from Spark properties (its dotted producer properties are split into nested keys: "No content to map due to
    end-of-input"). The Java producer has no spool: it gives the broker at most 1 s per event (``max.block.ms``) and
    drops the event when the broker is down. Unset (the default): the file."""
    bootstrap = os.environ.get(SPARK_LINEAGE_KAFKA, "").strip()
    if not bootstrap:
        return {}
    from include import jars

    kafka_clients = jars.jar_paths("spark-kafka")
    transport = "spark.openlineage.transport."
    serializer = "org.apache.kafka.common.serialization.StringSerializer"
    return {
        "spark.driver.extraClassPath": os.pathsep.join(str(path) for path in [*jar_paths(), *kafka_clients]),
        transport + "type": "kafka",
        transport + "topicName": _env(SPARK_LINEAGE_KAFKA_TOPIC, "openlineage.events"),
        transport + "properties.bootstrap.servers": bootstrap,
        transport + "properties.acks": "all",
        transport + "properties.key.serializer": serializer,
        transport + "properties.value.serializer": serializer,
        transport + "properties.max.block.ms": "1000",
        transport + "properties.request.timeout.ms": "2000",
        transport + "properties.delivery.timeout.ms": "3000",
        transport + "properties.linger.ms": "0",
    }


def _spark_listener_remove_path_pattern() -> str:
    from include import naming  # naming builds on this module

    return naming.SPARK_LISTENER_REMOVE_PATH_PATTERN


def spark_submit_jars() -> str:
    return ",".join(str(path) for path in jar_paths())


PASSED_TO_JOBS = (
    "ICEBERG_CATALOG_NAME",
    "ICEBERG_CATALOG_TYPE",
    "ICEBERG_CATALOG_URI",
    "ICEBERG_REST_PORT",
    "ICEBERG_WAREHOUSE",
    "S3_ENDPOINT",
)


def spark_submit_env(paths: Paths | None = None) -> dict[str, str]:
    """Environment for spark-submit, so the job sees the same ``var/`` and catalog as the DAG that started it."""
    paths = paths or Paths.current()
    env = {"PIPELINE_VAR_DIR": str(paths.var), "PYTHONPATH": str(PROJECT_ROOT)}
    for name in PASSED_TO_JOBS:
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


def pyiceberg_catalog(catalog: CatalogSettings | None = None):
    from pyiceberg.catalog import load_catalog

    catalog = catalog or CatalogSettings.current()
    return load_catalog(catalog.name, **catalog.pyiceberg_properties())


def airflow_env(paths: Paths | None = None) -> dict[str, str]:
    """Environment every Airflow command of the project runs with."""
    paths = paths or Paths.current()
    venv_bin = str(Path(sys.executable).parent)
    return {
        "AIRFLOW_HOME": str(paths.airflow_home),
        "AIRFLOW_CONFIG": str(paths.airflow_home / "airflow.cfg"),
        "PIPELINE_VAR_DIR": str(paths.var),
        "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": str(PROJECT_ROOT),
    }


def spark_submit_kwargs(paths: Paths | None = None, lineage: bool = True) -> dict:
    """Arguments shared by every SparkSubmitOperator (and SparkSubmitHook) of the project: the jars and the
    project's code (``include/codeship.py``) are shipped with every job, so it runs on a cluster as it does locally."""
    from include import codeship

    paths = paths or Paths.current()
    return {
        "conn_id": "spark_default",
        "conf": spark_conf(paths, lineage=lineage),
        "jars": spark_submit_jars(),
        "py_files": str(codeship.ensure_built(paths)),
        "env_vars": spark_submit_env(paths),
        "verbose": False,
    }
