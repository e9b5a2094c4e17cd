"""Every setting of the project, read from the environment here and nowhere else, with the ``var/`` layout and the
Iceberg catalog.

Each environment variable is declared once below with ``_define`` (``include/core/setting.py``'s ``define``: its
default and a one-line description): code reads it through the returned ``Setting``; ``tests/unit/test_settings.py``
fails when any module but these two reads the environment, and checks the configuration table of
``docs/configuration.md`` against ``SETTINGS``. ``python -m include.core.settings`` prints that table. Nothing here
does I/O at import.

Everything a run writes lives under ``var/`` (or ``$PIPELINE_VAR_DIR``). The Iceberg catalog is declared here once
and rendered twice: as Spark properties (``include/spark/submit.py``) and as a pyiceberg catalog.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from include.core import ports
from include.core.errors import ConfigurationError as ConfigurationError  # named here by callers (SettingError's base)

# What a setting is (declared, read, checked, tabled) lives in include/core/setting.py; code keeps naming it here.
from include.core.setting import SETTINGS as SETTINGS
from include.core.setting import Setting as Setting
from include.core.setting import SettingError as SettingError
from include.core.setting import configuration_table as configuration_table
from include.core.setting import define as _define
from include.core.setting import truthy as truthy

PROJECT_ROOT = Path(__file__).resolve().parents[2]
JARS_DIR = PROJECT_ROOT / "jars"
SPARK_JOBS_DIR = PROJECT_ROOT / "spark_jobs"
DAGS_DIR = PROJECT_ROOT / "dags"
PLUGINS_DIR = PROJECT_ROOT / "plugins"
TEMPLATES_DIR = PROJECT_ROOT / "include" / "setup" / "templates"
LOG4J2_PROPERTIES = TEMPLATES_DIR / "log4j2.properties"
LINEAGE_PACKAGE_DIR = PROJECT_ROOT / "include" / "lineage"
VENDORED_OPENLINEAGE_SPEC_DIR = LINEAGE_PACKAGE_DIR / "spec" / "openlineage"


# -- run state
VAR_DIR = _define("PIPELINE_VAR_DIR", "<project>/var", "root of all run state", "paths")
# -- the Iceberg catalog
CATALOG_NAME = _define(
    "ICEBERG_CATALOG_NAME", "lakehouse", "catalog name, identical for Spark and pyiceberg", "catalog"
)
CATALOG_TYPES = ("rest", "jdbc")
CATALOG_TYPE = _define(
    "ICEBERG_CATALOG_TYPE",
    "rest",
    "`rest` (the local server, or a remote one by URI) or `jdbc` (server-less)",
    "catalog",
)
CATALOG_URI = _define(
    "ICEBERG_CATALOG_URI",
    None,
    "REST endpoint of a remote catalog, or the JDBC URL (`jdbc`); unset: the local server",
    "catalog",
)
REST_PORT = _define(
    "ICEBERG_REST_PORT",
    None,
    "port of the local REST catalog server (127.0.0.1); unset: a free port chosen once per `var/`, kept in "
    "`var/catalog/port`",
    "catalog",
)
REST_BACKEND_URI = _define(
    "ICEBERG_REST_BACKEND_URI",
    None,
    "JDBC catalog behind the local server; unset: SQLite under `var/catalog/`",
    "catalog",
)
CATALOG_USER = _define("ICEBERG_CATALOG_USER", None, "JDBC user (of the backend, for the server)", "catalog")
CATALOG_PASSWORD = _define(
    "ICEBERG_CATALOG_PASSWORD", None, "JDBC password (of the backend, for the server)", "catalog"
)
WAREHOUSE = _define(
    "ICEBERG_WAREHOUSE",
    None,
    "warehouse root (`s3://bucket/prefix` for S3); unset: `file://<var>/warehouse`",
    "catalog",
)
S3_ENDPOINT = _define("S3_ENDPOINT", None, "S3-compatible endpoint (MinIO) for an `s3://` warehouse", "catalog")
# -- what one task hands to the next (include/core/object_store.py): on an object store, tasks run on any machine
_SHARED = "`s3://bucket/prefix`, an object store every worker reaches (`S3_ENDPOINT`, the standard AWS variables)"
LANDING_URI = _define("PIPELINE_LANDING_URI", None, f"where files land: {_SHARED}; unset: `<var>/landing`", "paths")
MODELS_URI = _define("PIPELINE_MODELS_URI", None, f"where models are saved: {_SHARED}; unset: `<var>/models`", "paths")
JAVA_HOME = _define(
    "JAVA_HOME", None, "the JDK of the local servers (catalog, Kafka) and of Spark; unset: `java` on PATH", "services"
)
# -- Spark
SPARK_DRIVER_MEMORY = _define("SPARK_DRIVER_MEMORY", "2g", "driver memory of every Spark job", "spark")
SPARK_SHUFFLE_PARTITIONS = _define("SPARK_SHUFFLE_PARTITIONS", "4", "`spark.sql.shuffle.partitions`", "spark")
SPARK_CLASS_DATA_SHARING = _define(
    "SPARK_CLASS_DATA_SHARING",
    "true",
    "`true`: Spark drivers map a class-data-sharing archive made at set-up (`jars/cds/`); `false`: load every class",
    "spark",
)
SPARK_DRIVER_JIT = _define(
    "SPARK_DRIVER_JIT",
    "quick",
    "`quick`: the driver's JIT stops at C1 (short jobs start faster); `full`: C2 too (months of millions of rows)",
    "spark",
)
SPARK_DRIVER_GC = _define(
    "SPARK_DRIVER_GC",
    "parallel",
    "`parallel`: the driver's JVM uses the throughput collector (short jobs on few cores run faster); `g1`: G1",
    "spark",
)
SPARK_CONF_EXTRA = _define(
    "SPARK_CONF_EXTRA", None, "JSON object of extra Spark properties (e.g. S3 credentials)", "spark"
)
SPARK_PYSPARK_PYTHON = _define(
    "SPARK_PYSPARK_PYTHON", None, "Python of the Spark executors; unset: this venv's python", "spark"
)
SPARK_CONNECTION = _define(
    "AIRFLOW_CONN_SPARK_DEFAULT",
    None,
    "Airflow's `spark_default` connection (JSON) outside a task (bench, tests); unset: local mode",
    "spark",
)
PYSPARK_GATEWAY_PORT = _define(
    "PYSPARK_GATEWAY_PORT", None, "set by spark-submit for the driver: a job reuses the session it was given", "spark"
)
SPARK_LINEAGE_KAFKA = _define(
    "SPARK_LINEAGE_KAFKA_BOOTSTRAP_SERVERS",
    None,
    "Spark events are forwarded to this Kafka (spooled in `var/lineage/spool-spark/`) instead of airflow.cfg's transport",
    "lineage",
)
SPARK_LINEAGE_KAFKA_TOPIC = _define(
    "SPARK_LINEAGE_KAFKA_TOPIC", "openlineage.events", "topic of `SPARK_LINEAGE_KAFKA_BOOTSTRAP_SERVERS`", "lineage"
)
# -- sources
TLC_BASE_URL = _define(
    "TLC_BASE_URL",
    "https://d37ci6vzurychx.cloudfront.net/trip-data",
    "where TLC's monthly trip files are downloaded from",
    "sources",
)
NOAA_BASE_URL = _define(
    "NOAA_BASE_URL",
    "https://www.ncei.noaa.gov/pub/data/daily-grids/v1-0-0/averages",
    "where NOAA nClimGrid daily county files are downloaded from",
    "sources",
)
SAMPLE_SOURCE_PORT = _define(
    "SAMPLE_SOURCE_PORT", "18080", "port of the sample-file server (`pipeline sample-source`) on 127.0.0.1", "sources"
)
DEMO_ROWS_PER_MONTH = _define(
    "DEMO_ROWS_PER_MONTH", "300000", "taxi trips generated per month for the demo", "sources", minimum=1
)
# -- lineage
LINEAGE_STORE_URL = _define(
    "LINEAGE_STORE_URL", None, "SQLAlchemy URL of the lineage store; unset: SQLite `var/lineage/store.db`", "lineage"
)
LINEAGE_STORE_PREPARE = _define(
    "LINEAGE_STORE_PREPARE",
    "on",
    "PostgreSQL store: prepare the questions a connection asks again (`off` behind a PgBouncer in transaction mode)",
    "lineage",
)
LINEAGE_FACETS_BUDGET_SECONDS = _define(
    "LINEAGE_FACETS_BUDGET_SECONDS",
    "5.0",
    "time the extractor may spend gathering a task's facets",
    "lineage",
    minimum=0,
)
ALERT_IMPACT_BUDGET_SECONDS = _define(
    "ALERT_IMPACT_BUDGET_SECONDS",
    "20",
    "time a failed or blocked task's alert may wait for the lineage store's impact set (then sent without it)",
    "lineage",
    minimum=0,
)
OPENLINEAGE_SPEC_DIR = _define(
    "OPENLINEAGE_SPEC_DIR",
    None,
    "the OpenLineage JSON schemas events are validated against; unset: the vendored ones",
    "lineage",
)
LINEAGE_MAX_BODY_BYTES = _define(
    "LINEAGE_MAX_BODY_BYTES",
    "5242880",
    "largest request body `lineage serve` accepts, as sent (413 beyond)",
    "lineage",
    minimum=1,
)
LINEAGE_MAX_DECOMPRESSED_BYTES = _define(
    "LINEAGE_MAX_DECOMPRESSED_BYTES",
    "20971520",
    "largest body `lineage serve` accepts once decompressed (413 beyond)",
    "lineage",
    minimum=1,
)
LINEAGE_MAX_JSON_DEPTH = _define(
    "LINEAGE_MAX_JSON_DEPTH", "64", "deepest JSON nesting `lineage serve` accepts (400 beyond)", "lineage", minimum=1
)
LINEAGE_MAX_BATCH_EVENTS = _define(
    "LINEAGE_MAX_BATCH_EVENTS",
    "1000",
    "most events in one `POST /api/v1/lineage/batch` (413 beyond)",
    "lineage",
    minimum=1,
)
LINEAGE_MAX_EVENT_DATASETS = _define(
    "LINEAGE_MAX_EVENT_DATASETS",
    "1000",
    "most inputs plus outputs of one event `lineage serve` accepts (400 beyond)",
    "lineage",
    minimum=1,
)
LINEAGE_MAX_FACET_BYTES = _define(
    "LINEAGE_MAX_FACET_BYTES",
    "1048576",
    "largest facet (as JSON) of an event `lineage serve` accepts (400 beyond)",
    "lineage",
    minimum=1,
)
LINEAGE_MAX_CLIENT_REQUESTS = _define(
    "LINEAGE_MAX_CLIENT_REQUESTS",
    "8",
    "requests of one client (one token, else address) `lineage serve` works on at once; more wait their turn",
    "lineage",
    minimum=1,
)
LINEAGE_INTAKE_CAPACITY = _define(
    "LINEAGE_INTAKE_CAPACITY", "1024", "requests held at once by `lineage serve` (429 beyond)", "lineage", minimum=2
)
LINEAGE_INTAKE_WAIT_SECONDS = _define(
    "LINEAGE_INTAKE_WAIT_SECONDS", "4", "seconds a request may wait its turn at `lineage serve` (503 beyond)", "lineage"
)
LINEAGE_DEAD_LETTERS = _define("LINEAGE_DEAD_LETTERS", "10000", "refused posts kept (oldest go)", "lineage", minimum=1)
LINEAGE_DEAD_LETTERS_BYTES = _define(
    "LINEAGE_DEAD_LETTERS_BYTES", "268435456", "most bytes of refused posts kept (oldest go)", "lineage", minimum=1
)
LINEAGE_SERVE_TOKEN = _define(
    "LINEAGE_SERVE_TOKEN",
    None,
    "bearer token the project's clients send to `lineage serve`; unset: the Airflow connection named in the "
    "transport's auth, else `var/secrets/lineage-tokens.json`",
    "lineage",
)
LINEAGE_RETENTION = _define(
    "LINEAGE_RETENTION", "395d", "default horizon of `lineage prune` (events, runs and versions older go)", "lineage"
)
KAFKA_BOOTSTRAP_SERVERS = _define(
    "KAFKA_BOOTSTRAP_SERVERS", None, "Kafka that `lineage consume` reads; unset: this `var/`'s local broker", "lineage"
)
KAFKA_PORT = _define(
    "KAFKA_PORT", "19092", "port of the local Kafka broker (`pipeline kafka start`) on 127.0.0.1", "services"
)
# -- Airflow
AIRFLOW_UI_PORT = _define("AIRFLOW_UI_PORT", "8080", "port of the Airflow UI started by `make airflow`", "airflow")
AIRFLOW_METADATA_DB = _define(
    "AIRFLOW_METADATA_DB",
    "auto",
    "Airflow's metadata database: `auto` (PostgreSQL for `make airflow` and for a `var/` it ran in, SQLite otherwise: "
    "`airflow dags test`, the demo), `postgres` (always) or `sqlite` (always `var/airflow/airflow.db`)",
    "airflow",
)
AIRFLOW_METADATA_DB_PORT = _define(
    "AIRFLOW_METADATA_DB_PORT",
    None,
    "port of the metadata PostgreSQL on 127.0.0.1; unset: a free port chosen once per `var/`, kept in "
    "`var/postgres.port`",
    "airflow",
)
# -- bench (bench/, not shipped)
BENCH_ROWS = _define("BENCH_ROWS", "3000000", "rows of the bench's one-month ingest", "bench", minimum=1)
BENCH_LINEAGE_ROWS = _define(
    "BENCH_LINEAGE_ROWS", None, "rows of the lineage-overhead DAG runs; unset: BENCH_ROWS", "bench", minimum=1
)
BENCH_SCALE_ROWS = _define("BENCH_SCALE_ROWS", "500000", "rows per month of the scale section", "bench", minimum=1)
BENCH_SCALE_MONTHS = _define("BENCH_SCALE_MONTHS", "12", "months of the scale section", "bench", minimum=2)
BENCH_BASELINE_REF = _define(
    "BENCH_BASELINE_REF", None, "git ref the bench compares against; unset: the bench's own", "bench"
)
BENCH_REPEATS = _define("BENCH_REPEATS", "3", "alternating repeats of each figure", "bench", minimum=1)
BENCH_LINEAGE_TARGET_ERROR = _define(
    "BENCH_LINEAGE_TARGET_ERROR",
    "0.01",
    "standard error of the mean on ÷ off ratio at which the lineage section stops adding pairs (0.01 resolves 3 % "
    "at three standard errors)",
    "bench",
    minimum=0,
)
BENCH_LINEAGE_MAX_PAIRS = _define(
    "BENCH_LINEAGE_MAX_PAIRS",
    "20",
    "most on/off pairs of the lineage section (at least BENCH_REPEATS and 10)",
    "bench",
    minimum=1,
)
BENCH_EXPLORER_NODES = _define(
    "BENCH_EXPLORER_NODES", "100000", "nodes of the explorer's generated graph", "bench", minimum=1
)
BENCH_EXPLORER_QUERIES = _define(
    "BENCH_EXPLORER_QUERIES", "300", "queries timed per explorer figure", "bench", minimum=1
)
BENCH_INGEST_EVENTS = _define(
    "BENCH_INGEST_EVENTS", "2000", "events posted to `lineage serve` per ingest-throughput figure", "bench", minimum=1
)

ICEBERG_NAMESPACE = "nyc_taxi"
OPENLINEAGE_NAMESPACE = "nyc_taxi_pipeline"
LOCAL_REST_HOST = "127.0.0.1"
DEFAULT_REST_PORT = 18181
DEFAULT_SPARK_MASTER = "local[*]"

# The Spark line of pyspark and of the Spark-side jars (iceberg-spark-runtime-4.1_2.13, openlineage-spark_2.13):
# tests/integration/test_stack.py checks all three agree. Spark 4 runs with ANSI mode on (its default,
# spark.sql.ansi.enabled=true); the transforms use try_cast & co. where a bad value must become null (docs/reliability.md; Trap 8).
SPARK_VERSION = "4.1"
SCALA_VERSION = "2.13"


@dataclass(frozen=True)
class Paths:
    """The ``var/`` layout. Every path is absolute."""

    var: Path

    @classmethod
    def current(cls) -> Paths:
        return cls(Path(VAR_DIR.text(str(PROJECT_ROOT / "var"))).resolve())

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
        catalog_type = CATALOG_TYPE.choice(CATALOG_TYPES)
        explicit_uri = CATALOG_URI.raw()
        local_server = catalog_type == "rest" and not explicit_uri
        port = rest_port(paths) if local_server else REST_PORT.port(DEFAULT_REST_PORT)
        if local_server:
            uri = f"http://{LOCAL_REST_HOST}:{port}"
        else:
            uri = explicit_uri or f"jdbc:sqlite:{paths.catalog_dir / 'iceberg_catalog.db'}"
        return cls(
            name=CATALOG_NAME.get(),
            type=catalog_type,
            uri=uri,
            warehouse=WAREHOUSE.text(paths.warehouse.as_uri()),
            user=CATALOG_USER.raw(),
            password=CATALOG_PASSWORD.raw(),
            s3_endpoint=S3_ENDPOINT.raw(),
            is_local_rest_server=local_server,
            rest_port=port,
            rest_backend_uri=REST_BACKEND_URI.raw(),
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


def rest_port(paths: Paths) -> int:
    """The local catalog server's port: ``ICEBERG_REST_PORT`` when set; else the port recorded for this ``var/``
    (``var/catalog/port``), chosen free the first time it is asked for, so two ``var/``s run side by side and every
    process of one ``var/`` (set-up, Airflow, spark-submit, the CLI) reaches the same server."""
    if REST_PORT.raw():
        return REST_PORT.port(DEFAULT_REST_PORT)
    record = paths.catalog_dir / "port"
    if not record.exists():
        record.parent.mkdir(parents=True, exist_ok=True)
        candidate = record.with_name(f"port.{os.getpid()}.{threading.get_ident()}")
        # A var/ made by an earlier release (its catalog exists, no port recorded) keeps the port it always had:
        # dataset namespaces of a REST catalog carry the port, and its lineage must keep naming the same tables.
        earlier_release = (paths.catalog_dir / "iceberg_catalog.db").exists()
        candidate.write_text(f"{DEFAULT_REST_PORT if earlier_release else ports.free_port(LOCAL_REST_HOST)}\n")
        try:
            os.link(candidate, record)  # first writer wins; a concurrent chooser reads the winner's port
        except FileExistsError:
            pass
        finally:
            candidate.unlink()
    text = record.read_text().strip()
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise SettingError(f"{record}: {text!r} is not a TCP port; delete the file to choose a new one")
    return int(text)


def kafka_port() -> int:
    """The local Kafka broker's client port (``KAFKA_PORT``)."""
    return KAFKA_PORT.port()


def local_kafka_bootstrap() -> str:
    return f"{LOCAL_REST_HOST}:{kafka_port()}"


def kafka_bootstrap_servers() -> str:
    """Where ``lineage consume`` reads: ``KAFKA_BOOTSTRAP_SERVERS``, else this ``var/``'s local broker."""
    return KAFKA_BOOTSTRAP_SERVERS.raw() or local_kafka_bootstrap()


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
        "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),  # passed through, not a setting
        "PYTHONPATH": str(PROJECT_ROOT),
        **airflow_metadata_db_env(paths),
    }


METADATA_DB_CHOICES = ("auto", "postgres", "sqlite")


def metadata_db_url_file(paths: Paths) -> Path:
    """The SQLAlchemy URL of this ``var/``'s metadata PostgreSQL (mode 600, written by ``include/services/postgres.py``)."""
    return paths.secrets / "airflow-metadata-db.url"


def metadata_db_kind(paths: Paths, for_ui: bool = False) -> str:
    """``postgres`` or ``sqlite``: what ``AIRFLOW_METADATA_DB`` chooses for this ``var/`` (``for_ui``: `make airflow`)."""
    choice = AIRFLOW_METADATA_DB.choice(METADATA_DB_CHOICES)
    if choice == "auto":
        return "postgres" if for_ui or metadata_db_url_file(paths).exists() else "sqlite"
    return choice


def airflow_metadata_db_env(paths: Paths) -> dict[str, str]:
    """With PostgreSQL, Airflow reads the URL from its file (a command, ``_CMD``): the password is in no environment;
    the SQLite lock-wait arguments airflow.cfg names are replaced by PostgreSQL's."""
    if metadata_db_kind(paths) != "postgres":
        return {}
    import shlex

    return {
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD": f"cat {shlex.quote(str(metadata_db_url_file(paths)))}",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": "include.airflow.metadata_db.POSTGRES_CONNECT_ARGS",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC": "include.airflow.metadata_db.POSTGRES_CONNECT_ARGS_ASYNC",
    }


if __name__ == "__main__":
    print(configuration_table(), end="")
