"""The one module that owns dataset identity, for Airflow Assets and OpenLineage alike.

Iceberg tables are named by their physical location (``file`` + absolute path locally, ``s3://bucket`` + key on
S3), the way the OpenLineage Spark listener names them, plus a ``symlinks`` TABLE identifier carrying the catalog's
table name. Source URLs and landed files follow the OpenLineage naming spec (``openlineage.client.naming``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from include.core import settings

TAXI_RAW = "yellow_taxi_raw"
TAXI_QUARANTINE = "yellow_taxi_quarantine"
WEATHER_STAGING = "weather_staging"
WEATHER_RAW = "weather_raw"
HOURLY_ACTUALS = "yellow_rides_hourly_actuals"
HOURLY_FORECAST = "yellow_rides_hourly_forecast"

# Kafka topics of lineage through a queue: the local broker creates them, `lineage consume` reads them.
KAFKA_EVENTS_TOPIC = "openlineage.events"
KAFKA_DEAD_LETTER_TOPIC = "openlineage.events.dead-letters"


@dataclass(frozen=True)
class DatasetId:
    namespace: str
    name: str


def storage_id(uri: str) -> DatasetId:
    """OpenLineage id of a file or folder given as a URI or an absolute local path."""
    # Imported here: every Spark job's driver imports this module for the table names and calls nothing that needs
    # openlineage.client, whose import costs it 0.3 s of CPU (two applications per ingest run).
    from openlineage.client.naming.dataset import S3, LocalFileSystem

    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        naming = LocalFileSystem(path=str(Path(parsed.path).resolve()))
    elif parsed.scheme in ("s3", "s3a", "s3n"):
        naming = S3(bucket_name=parsed.netloc, object_key=parsed.path.lstrip("/"))
    else:
        return DatasetId(f"{parsed.scheme}://{parsed.netloc}", parsed.path)
    return DatasetId(naming.get_namespace(), naming.get_name())


def source_url_id(url: str) -> DatasetId:
    """A remote source file: namespace ``https://host``, name the path."""
    parsed = urlparse(url)
    return DatasetId(f"{parsed.scheme}://{parsed.netloc}", parsed.path)


def table_location(table: str, catalog: settings.CatalogSettings | None = None) -> str:
    """Default location the catalog gives a new table: ``<warehouse>/<namespace>/<table>``."""
    catalog = catalog or settings.CatalogSettings.current()
    return f"{catalog.warehouse.rstrip('/')}/{settings.ICEBERG_NAMESPACE}/{table}"


def table_id(table: str, catalog: settings.CatalogSettings | None = None) -> DatasetId:
    return storage_id(table_location(table, catalog))


def table_symlink(table: str, catalog: settings.CatalogSettings | None = None) -> DatasetId:
    """The catalog-side name of a table, ``<namespace>.<table>``, in the namespace the OpenLineage Spark listener
    gives it: the catalog's URI for a REST catalog (e.g. ``http://127.0.0.1:18181``), else the warehouse."""
    catalog = catalog or settings.CatalogSettings.current()
    namespace = catalog.uri if catalog.type == "rest" else catalog.warehouse
    return DatasetId(namespace.rstrip("/"), f"{settings.ICEBERG_NAMESPACE}.{table}")


def table_asset(table: str):
    """The Airflow Asset of a table: its physical location as URI, its catalog name as name."""
    from airflow.sdk import Asset

    catalog = settings.CatalogSettings.current()
    location = table_location(table, catalog)
    uri = location if "://" in location else Path(location).as_uri()
    return Asset(name=catalog.table(table), uri=uri, group="iceberg")


# A model is saved to ``<models>/<name>.tmp/spark_model`` and then renamed to ``<models>/<name>``; Spark ML's own
# folders under it are not datasets. This pattern (``spark.openlineage.dataset.removePath.pattern``: the ``remove``
# group is cut from a dataset's name) makes the Spark listener name the model by its final folder, as the extractor.
MODEL_STAGING_SUFFIX = ".tmp"
SPARK_MODEL_FOLDER = "spark_model"
SPARK_LISTENER_REMOVE_PATH_PATTERN = rf"(?<remove>(\{MODEL_STAGING_SUFFIX})?/{SPARK_MODEL_FOLDER}(/.*)?)$"


def model_dir(model_name: str, paths: settings.Paths | None = None) -> Path:
    """The model's folder on this machine (``<var>/models/<name>``); where it is saved is :func:`model_uri`."""
    return (paths or settings.Paths.current()).models / model_name


def models_location(paths: settings.Paths | None = None) -> str:
    """Where trained models are saved: ``PIPELINE_MODELS_URI`` (an object store every worker reaches), else this
    machine's ``<var>/models``."""
    return (settings.MODELS_URI.raw() or str((paths or settings.Paths.current()).models)).rstrip("/")


def model_uri(model_name: str, paths: settings.Paths | None = None) -> str:
    """The model's location, its identity in lineage: ``<var>/models/<name>`` on one machine, ``s3://bucket/key``
    on the object store. One dataset per model, its version the trained model's (``modelMetrics``, ``version``)."""
    return f"{models_location(paths)}/{model_name}"


def model_id(model_name: str, paths: settings.Paths | None = None) -> DatasetId:
    return storage_id(model_uri(model_name, paths))


MODEL_PREFIX = "model:"


def model_key(model_name: str) -> str:
    return MODEL_PREFIX + model_name


def dataset_for_key(key: str) -> tuple[DatasetId, DatasetId | None]:
    """Resolve a lineage key declared on a task: a bare table name, ``model:<name>``, or a URI/absolute path.

    Returns the dataset id and, for Iceberg tables, the symlink (catalog table name).
    """
    if key.startswith(MODEL_PREFIX):
        return model_id(key.removeprefix(MODEL_PREFIX)), None
    if key.startswith(("http://", "https://")):
        return source_url_id(key), None
    if "://" in key or key.startswith("/"):
        return storage_id(key), None
    return table_id(key), table_symlink(key)


def is_table_key(key: str) -> bool:
    return not key.startswith(MODEL_PREFIX) and "://" not in key and not key.startswith("/") and "{" not in key
