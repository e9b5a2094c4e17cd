"""Bad input, through real `airflow dags test` runs: a clear error naming the file, a FAIL event with errorMessage,
raw tables untouched; row-level problems quarantined; unexpected columns accepted and recorded as schema drift."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from include.airflow import runs
from include.core import naming, settings
from include.lineage.events import load_events
from include.sources import sample_data, sample_server

# The first test here pays for ten DAG runs (a clean weather month and the nine bad inputs): more than pytest's 900 s
# on a loaded 2-core machine, so this module gets a budget of its own.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(2400)]
ROWS = 3_000


@dataclass
class Case:
    dag_id: str
    logical_date: str
    month: str
    result: runs.DagTestResult | None = None
    raw_snapshot_before: int | None = None
    raw_snapshot_after: int | None = None


def _taxi_file(root, month: str, transform) -> None:
    year, mm = map(int, month.split("-"))
    table = transform(sample_data.generate_taxi_month(year, mm, ROWS))
    folder = root / "trip-data"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / sample_data.taxi_file_name(year, mm)
    if table is None:
        path.write_bytes(b"")
    else:
        pq.write_table(table, path)


def _with_bad_rows(table: pa.Table) -> pa.Table:
    rows = table.slice(0, 4).to_pylist()
    rows[0]["PULocationID"] = None
    rows[1]["total_amount"] = -12.5
    rows[2]["tpep_pickup_datetime"] = rows[2]["tpep_pickup_datetime"].replace(year=2024, month=12, day=31)
    rows[3]["tpep_dropoff_datetime"] = rows[3]["tpep_pickup_datetime"].replace(year=2024)
    return pa.concat_tables([table.slice(4), pa.Table.from_pylist(rows, schema=table.schema)])


def _weather_files(root, month: str, damage) -> None:
    year, mm = map(int, month.split("-"))
    folder = root / "averages" / f"{year:04d}"
    paths = sample_data.write_weather_month(folder, year, mm)
    paths[0].write_text(damage(paths[0].read_text()))


CASES = {
    "corrupt": (
        "ingest_yellow_taxi_data",
        "2025-09",
        lambda root: (
            (root / "trip-data").mkdir(parents=True, exist_ok=True)
            or (root / "trip-data" / "yellow_tripdata_2025-09.parquet").write_bytes(b"PAR1 not parquet")
        ),
    ),
    "missing_column": (
        "ingest_yellow_taxi_data",
        "2025-04",
        lambda root: _taxi_file(root, "2025-04", lambda t: t.drop(["PULocationID"])),
    ),
    "changed_type": (
        "ingest_yellow_taxi_data",
        "2025-05",
        lambda root: _taxi_file(
            root,
            "2025-05",
            lambda t: t.set_column(
                t.schema.get_field_index("total_amount"), "total_amount", pc.cast(t["total_amount"], pa.string())
            ),
        ),
    ),
    "empty": ("ingest_yellow_taxi_data", "2025-06", lambda root: _taxi_file(root, "2025-06", lambda t: None)),
    # A column type Spark 3.5 cannot read: the error must be Spark's innermost cause, not the Py4J wrapper's line.
    "unreadable_type": (
        "ingest_yellow_taxi_data",
        "2025-11",
        lambda root: _taxi_file(
            root, "2025-11", lambda t: t.append_column("meter_time", pa.array([1000] * t.num_rows, pa.time32("ms")))
        ),
    ),
    "extra_column": (
        "ingest_yellow_taxi_data",
        "2025-07",
        lambda root: _taxi_file(
            root, "2025-07", lambda t: t.append_column("surprise_fee", pa.array([1.0] * t.num_rows))
        ),
    ),
    "bad_rows": ("ingest_yellow_taxi_data", "2025-08", lambda root: _taxi_file(root, "2025-08", _with_bad_rows)),
    "truncated_csv": (
        "ingest_weather_data",
        "2025-03",
        lambda root: _weather_files(root, "2025-03", lambda text: text[: int(len(text) * 0.55)]),
    ),
    "wrong_field_count": (
        "ingest_weather_data",
        "2025-04",
        lambda root: _weather_files(root, "2025-04", lambda text: text.replace("\n", ",0.00,0.00\n", 1)),
    ),
}


def _next_month_start(month: str) -> str:
    year, mm = map(int, month.split("-"))
    return f"{year + (mm == 12):04d}-{mm % 12 + 1:02d}-01"


# The cases whose runs succeed go first: once they merged, raw exists, and every failing case must leave its snapshot.
SUCCEEDING = ("extra_column", "bad_rows")
CLEAN_WEATHER_MONTH = "2025-02"


def _raw_snapshot(catalog, table: str) -> int | None:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        snapshot = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{table}").current_snapshot()
    except NoSuchTableError:
        return None
    return snapshot.snapshot_id if snapshot else None


@pytest.fixture(scope="session")
def bad_input_runs(paths, airflow_env, catalog):
    """The bad-input DAG runs, in this session's own var/ and not behind the shared pipeline run (so another worker
    can take them): a clean weather month and the two cases that succeed first, so that each failing case meets a
    raw table whose snapshot it must leave as it was."""
    root = paths.var / "bad-input-source"
    year, month = map(int, CLEAN_WEATHER_MONTH.split("-"))
    sample_data.write_weather_month(root / "averages" / f"{year:04d}", year, month)
    cases = {}
    for name, (dag_id, month, publish) in CASES.items():
        publish(root)
        cases[name] = Case(dag_id, _next_month_start(month), month)
    raw_table = {"ingest_yellow_taxi_data": naming.TAXI_RAW, "ingest_weather_data": naming.WEATHER_RAW}
    with sample_server.serve(root) as env:
        clean = runs.dags_test(
            "ingest_weather_data",
            _next_month_start(CLEAN_WEATHER_MONTH),
            {},
            env=env,
            log_file=paths.var / "test-logs" / "bad-input-clean-weather.log",
        )
        assert clean.succeeded, f"the clean weather month ended {clean.state}: {paths.var / 'test-logs'}"
        for name in sorted(cases, key=lambda case_name: case_name not in SUCCEEDING):
            case = cases[name]
            case.raw_snapshot_before = _raw_snapshot(catalog, raw_table[case.dag_id])
            case.result = runs.dags_test(
                case.dag_id,
                case.logical_date,
                {},
                env=env,
                log_file=paths.var / "test-logs" / f"bad-{name}.log",
            )
            case.raw_snapshot_after = _raw_snapshot(catalog, raw_table[case.dag_id])
    return cases


def _fail_event(paths, dag_id: str, task: str, month: str) -> dict:
    fails = [
        e
        for e in load_events(paths.lineage_events)
        if e["eventType"] == "FAIL"
        and e["job"]["name"] == f"{dag_id}.{task}"
        and month.replace("-", "") in e["run"]["facets"]["errorMessage"]["message"].replace("-", "")
    ]
    assert len(fails) == 1, f"expected one FAIL event for {task} {month} (bad input is not retried), got {len(fails)}"
    return fails[0]


@pytest.mark.parametrize(
    "name, task, expected",
    [
        ("corrupt", "load_yellow_taxi_raw", "not a readable parquet file (RuntimeException: file:"),
        (
            "unreadable_type",
            "load_yellow_taxi_raw",
            "not a readable parquet file (AnalysisException: Illegal Parquet type: INT32 (TIME(MILLIS,true)).)",
        ),
        ("missing_column", "load_yellow_taxi_raw", "missing required column(s) PULocationID"),
        ("changed_type", "load_yellow_taxi_raw", "column total_amount has type string, expected double"),
        ("empty", "load_yellow_taxi_raw", "is not a Parquet file (length is too low: 0)"),
        ("truncated_csv", "stage_weather", "rows with a wrong number of fields"),
        ("wrong_field_count", "stage_weather", "rows with a wrong number of fields"),
    ],
)
def test_bad_file_fails_with_a_clear_error_a_fail_event_and_raw_untouched(bad_input_runs, paths, name, task, expected):
    case = bad_input_runs[name]
    assert case.result.state == "failed"
    message = _fail_event(paths, case.dag_id, task, case.month)["run"]["facets"]["errorMessage"]["message"]
    assert expected in message
    assert "An error occurred while calling" not in message, "the root cause, not the Py4J wrapper"
    assert f"{case.month}" in message or case.month.replace("-", "") in message, "the error names the file"
    assert case.raw_snapshot_before is not None, "a failing case must meet a raw table to leave untouched"
    assert case.raw_snapshot_after == case.raw_snapshot_before


def test_unexpected_extra_column_is_accepted_and_recorded_as_schema_drift(bad_input_runs, paths):
    case = bad_input_runs["extra_column"]
    assert case.result.succeeded
    load = [
        e
        for e in load_events(paths.lineage_events)
        if e["eventType"] == "COMPLETE"
        and e["job"]["name"] == "ingest_yellow_taxi_data.load_yellow_taxi_raw"
        and e["inputs"][0]["name"].endswith("yellow_tripdata_2025-07.parquet")
    ]
    assert load[0]["run"]["facets"]["schemaDrift"]["unexpected"] == ["surprise_fee"]


def test_bad_rows_are_quarantined_with_reasons_counted_and_good_rows_ingested(bad_input_runs, paths, spark):
    case = bad_input_runs["bad_rows"]
    assert case.result.succeeded
    quarantine = spark.table(settings.CatalogSettings.current().table(naming.TAXI_QUARANTINE)).where(
        "source_month = '2025-08'"
    )
    assert sorted(r.quarantine_reason for r in quarantine.collect()) == [
        "dropoff_before_pickup",
        "negative_total",
        "null_pickup_zone",
        "pickup_outside_file_month",
    ]
    raw = spark.table(settings.CatalogSettings.current().table(naming.TAXI_RAW)).where("source_month = '2025-08'")
    assert raw.count() == ROWS - 4
    load = [
        e
        for e in load_events(paths.lineage_events)
        if e["eventType"] == "COMPLETE"
        and e["job"]["name"] == "ingest_yellow_taxi_data.load_yellow_taxi_raw"
        and e["inputs"][0]["name"].endswith("yellow_tripdata_2025-08.parquet")
    ][0]
    assertions = {
        a["assertion"]: (a["success"], a["actual"])
        for a in load["inputs"][0]["inputFacets"]["dataQualityAssertions"]["assertions"]  # an input facet
    }
    assert assertions == {
        "null_pickup_zone": (False, "1"),
        "negative_total": (False, "1"),
        "pickup_outside_file_month": (False, "1"),
        "dropoff_before_pickup": (False, "1"),
    }
    outputs = {o["name"].rsplit("/", 1)[-1] for o in load["outputs"]}
    assert outputs == {naming.TAXI_RAW, naming.TAXI_QUARANTINE}
