"""What the Spark jobs and the lineage extractor agree on, in one module that imports neither side.

The layers read dags -> plugins -> include <- spark_jobs: the jobs import this module to know the columns they write
and the report they leave; ``include/lineage`` imports it to declare column lineage and to read those reports. Table
names live in ``include/core/naming.py``, next to the rest of dataset identity.

- the canonical columns of a TLC yellow-taxi file and of a NOAA nClimGrid county file, and the facts of that format
  (weather elements, missing-value marker, NYC's county codes);
- where each forecast model is defined (for the job's ``sourceCode`` facet);
- the job report: a typed, versioned structure written by every job and read by the extractor, and its path.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypedDict

from include.core import settings
from include.core.errors import BadInputError

# --- TLC yellow taxi ---------------------------------------------------------------------------------------------

# The canonical schema (the 2025 TLC file): column name and Spark type name (``DataType.typeName()``).
TAXI_COLUMNS: tuple[tuple[str, str], ...] = (
    ("VendorID", "integer"),
    ("tpep_pickup_datetime", "timestamp"),
    ("tpep_dropoff_datetime", "timestamp"),
    ("passenger_count", "long"),
    ("trip_distance", "double"),
    ("RatecodeID", "long"),
    ("store_and_fwd_flag", "string"),
    ("PULocationID", "integer"),
    ("DOLocationID", "integer"),
    ("payment_type", "long"),
    ("fare_amount", "double"),
    ("extra", "double"),
    ("mta_tax", "double"),
    ("tip_amount", "double"),
    ("tolls_amount", "double"),
    ("improvement_surcharge", "double"),
    ("total_amount", "double"),
    ("congestion_surcharge", "double"),
    ("Airport_fee", "double"),
    ("cbd_congestion_fee", "double"),
)
TAXI_COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in TAXI_COLUMNS)
# Added to every staged and raw taxi row.
TAXI_ROW_METADATA_COLUMNS = ("unique_row_id", "filename", "ingest_timestamp", "source_month")

# --- NOAA nClimGrid daily county averages ------------------------------------------------------------------------

WEATHER_ELEMENTS = ("prcp", "tavg", "tmin", "tmax")
WEATHER_MISSING_VALUE = -999.99
NYC_COUNTIES = {
    "36005": "Bronx County",
    "36047": "Kings County",
    "36061": "New York County",
    "36081": "Queens County",
    "36085": "Richmond County",
}
WEATHER_KEY_COLUMNS = ("region_type", "region_code", "region_name", "year", "month", "meteorological_element")
WEATHER_DAY_COLUMNS = tuple(f"day_{day:02d}" for day in range(1, 32))
WEATHER_COLUMNS = WEATHER_KEY_COLUMNS + WEATHER_DAY_COLUMNS

# --- Forecast models ---------------------------------------------------------------------------------------------

# Model name -> (file relative to the project, top-level function that defines the model). Read as text for the
# job's sourceCode facet, never imported.
MODEL_DEFINITIONS = {
    "seasonal_naive": ("spark_jobs/common/forecasting.py", "seasonal_naive"),
    "weather": ("spark_jobs/common/models.py", "weather_pipeline"),
}
# The module-level dict of every model's parameters: (file relative to the project, name).
MODEL_PARAMS_DEFINITION = ("spark_jobs/common/models.py", "MODEL_PARAMS")

# --- Owners ------------------------------------------------------------------------------------------------------

# Who owns each Iceberg table the pipeline writes: OpenLineage's ``ownership`` facet on every write of it
# (include/lineage/emit/facets.py), and the owners an alert names (include/quality/alerts.py). A table not listed
# belongs to DEFAULT_OWNER, the DAGs' ``owner`` default (include/airflow/schedules.py; a unit test keeps them equal).
DEFAULT_OWNER = "data-platform"
TABLE_OWNERS: dict[str, tuple[str, ...]] = {
    "yellow_rides_hourly_actuals": (DEFAULT_OWNER, "forecasting"),
    "yellow_rides_hourly_forecast": (DEFAULT_OWNER, "forecasting"),
}


def table_owners(table: str) -> tuple[str, ...]:
    return TABLE_OWNERS.get(table, (DEFAULT_OWNER,))


# --- The job report ----------------------------------------------------------------------------------------------

REPORT_VERSION = 1
REPORT_ARGUMENT = "--report"


class TableState(TypedDict, total=False):
    snapshot_id: int | None
    previous_snapshot_id: int | None
    rows: int
    written_rows: int
    zones: int
    # The table as Iceberg describes it at snapshot_id, read by the job: [name, Iceberg type] per column, and the
    # snapshot's summary (added-records...). The extractor builds its facets from these without opening the catalog.
    iceberg_schema: list[list[str]]
    snapshot_summary: dict[str, str]


class ColumnMetrics(TypedDict):
    nullCount: int


class InputMetrics(TypedDict):
    rowCount: int
    columnMetrics: dict[str, ColumnMetrics]


class Assertion(TypedDict):
    assertion: str
    success: bool
    column: str | None
    actual: str | None
    expected: str | None


class SchemaDrift(TypedDict):
    renamed: dict[str, str]
    filled_with_null: list[str]
    unexpected: list[str]


class ModelReport(TypedDict, total=False):
    model_name: str
    model_version: str
    mae: float
    baseline_mae: float
    holdout_rows: int
    path: str


class JobError(TypedDict, total=False):
    kind: str  # "bad_input" (retrying cannot help) or "failure"
    message: str
    traceback: str


class ReportError(BadInputError):
    """A report file that is not a job report of this version."""


@dataclass
class JobReport:
    """What a job leaves for the extractor. Keys of ``inputs``, ``outputs``, ``input_metrics``, ``assertions`` and
    ``source_fingerprints`` are lineage keys: a table name, ``model:<name>`` or an absolute file path."""

    version: int = REPORT_VERSION
    inputs: dict[str, TableState] = field(default_factory=dict)
    outputs: dict[str, TableState] = field(default_factory=dict)
    input_metrics: dict[str, InputMetrics] = field(default_factory=dict)
    assertions: dict[str, list[Assertion]] = field(default_factory=dict)
    source_fingerprints: dict[str, str] = field(default_factory=dict)  # file -> xxhash64 of its bytes
    schema_drift: SchemaDrift | None = None
    model: ModelReport | None = None
    source_rows: int | None = None
    staged_rows: int | None = None
    quarantined_rows: dict[str, int] = field(default_factory=dict)  # reason -> rows
    error: JobError | None = None
    # Write-audit-publish (spark_jobs/common/wap.py): table, branch, published, main and branch snapshots, results
    audit: dict[str, Any] | None = None
    # Why the job wrote nothing: its outputs already held this month from the same source (spark_jobs/common/
    # loaded_source.py); its outputs then name their current snapshots, unchanged
    unchanged: str | None = None
    # What the job knows of its outputs' columns at run time and Spark's plan cannot show (a MERGE from a
    # materialised source, a forecast computed by a fitted model): output key -> column -> [[input key, input column,
    # transformation type, subtype], ...]. It wins over the listener's column lineage for the columns it names.
    column_lineage: dict[str, dict[str, list[list[str]]]] = field(default_factory=dict)
    # The task's declared datasets against what it did (include/lineage/emit/observed.py), added by the operator
    # once its Spark application ended: what the notifier's drift alert reads.
    lineage_drift: dict[str, list[str]] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "job report") -> JobReport:
        if not isinstance(data, dict):
            raise ReportError(f"{source}: a job report is a JSON object, not {type(data).__name__}")
        version = data.get("version", REPORT_VERSION)
        if version != REPORT_VERSION:
            raise ReportError(f"{source}: report version {version!r}, this code reads version {REPORT_VERSION}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ReportError(f"{source}: unknown report field(s) {', '.join(unknown)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, path: Path) -> None:
        """Atomically: a reader sees the previous report or this one, never a part."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str))
        os.replace(partial, path)

    @classmethod
    def read(cls, path: Path) -> JobReport:
        try:
            data = json.loads(path.read_text())
        except ValueError as error:
            raise ReportError(f"{path}: not JSON: {error}") from error
        return cls.from_dict(data, source=str(path))


def report_path(dag_id: str, task_id: str, run_id: str, try_number: int, paths: settings.Paths | None = None) -> Path:
    """The one place a task try's report path is computed."""
    safe_run_id = run_id.replace("/", "_")
    return (paths or settings.Paths.current()).job_reports / dag_id / task_id / safe_run_id / f"try-{try_number}.json"


def report_path_for(task_instance) -> Path:
    ti = task_instance
    return report_path(ti.dag_id, ti.task_id, ti.run_id, ti.try_number)


def report_argument(args) -> Path | None:
    """The path given to a job as ``--report <path>`` among its arguments, if any."""
    args = [str(arg) for arg in args or []]
    if REPORT_ARGUMENT in args[:-1]:
        return Path(args[args.index(REPORT_ARGUMENT) + 1])
    return None


def report_location(application_args, task_instance=None) -> Path | None:
    """Where a Spark task's report is: its ``--report`` argument, else its task try's path."""
    explicit = report_argument(application_args)
    if explicit is not None:
        return explicit
    return report_path_for(task_instance) if task_instance is not None else None
