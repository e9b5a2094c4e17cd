"""Observed column lineage (the Spark listener's, and the job's where Spark cannot see) of every column of the
pipeline's tables, on a real run of the three DAGs with both models, against an oracle written here by reading the
jobs' code; and no task of the project's DAGs drifts from its declaration."""

from __future__ import annotations

import pytest

from include.core import naming
from include.core.contract import TAXI_COLUMN_NAMES, WEATHER_COLUMNS, WEATHER_DAY_COLUMNS
from include.lineage.events import load_events
from include.sources import downloads

pytestmark = pytest.mark.integration

PROJECT_DAGS = ("ingest_yellow_taxi_data.", "ingest_weather_data.", "forecast_yellow_rides.")
ACTUALS, RAW, WEATHER = naming.HOURLY_ACTUALS, naming.TAXI_RAW, naming.WEATHER_RAW


def _id(key: str) -> tuple[str, str]:
    dataset_id, _ = naming.dataset_for_key(key)
    return dataset_id.namespace, dataset_id.name


@pytest.fixture(scope="module")
def completes(pipeline_run) -> list[dict]:
    return [
        e
        for e in load_events(pipeline_run.paths.lineage_events)
        if e["eventType"] == "COMPLETE" and e["job"]["name"].startswith(PROJECT_DAGS)
    ]


def _columns(event: dict, table: str) -> dict[str, set[tuple[str, str, str]]]:
    [output] = [o for o in event["outputs"] if (o["namespace"], o["name"]) == _id(table)]
    fields = output["facets"].get("columnLineage", {}).get("fields", {})
    return {c: {(f["namespace"], f["name"], f["field"]) for f in v["inputFields"]} for c, v in fields.items()}


def _of(key: str, *columns: str) -> set[tuple[str, str, str]]:
    return {(*_id(key), column) for column in columns}


def _forecast_event(completes, model: str) -> dict:
    [event] = [
        e
        for e in completes
        if e["job"]["name"] == "forecast_yellow_rides.write_forecast"
        and _id(naming.model_key(model)) in {(i["namespace"], i["name"]) for i in e["inputs"]}
    ][:1]
    return event


def _task_event(completes, job: str) -> dict:
    return [e for e in completes if e["job"]["name"] == job][0]


def test_taxi_raw_columns_come_from_the_landed_file(completes, pipeline_run):
    landed = str(downloads.tlc_landed_path("2025-01", pipeline_run.paths))
    columns = _columns(_task_event(completes, "ingest_yellow_taxi_data.load_yellow_taxi_raw"), RAW)
    # load_taxi: every canonical column is carried on as read (spark_jobs/common/taxi.py canonical columns)
    for column in TAXI_COLUMN_NAMES:
        assert columns[column] == _of(landed, column), column
    # unique_row_id: a hash over every canonical column of the row (taxi.with_row_id)
    assert columns["unique_row_id"] == _of(landed, *TAXI_COLUMN_NAMES)
    # filename, ingest_timestamp, source_month: literals of the load, drawn from no column
    assert not {"filename", "ingest_timestamp", "source_month"} & set(columns)


def test_weather_columns_come_from_the_csv_files_then_staging(completes, pipeline_run):
    files = [
        str(downloads.noaa_landed_path(element, "2025-01", pipeline_run.paths))
        for element in downloads.WEATHER_ELEMENTS
    ]
    staging = _columns(_task_event(completes, "ingest_weather_data.stage_weather"), naming.WEATHER_STAGING)
    for column in WEATHER_COLUMNS:  # the four element files, unioned column by column (stage_weather)
        assert staging[column] == {(*_id(f), column) for f in files}, column
    raw = _columns(_task_event(completes, "ingest_weather_data.merge_weather_raw"), WEATHER)
    # merge_weather: MERGE … UPDATE SET * / INSERT * from the staged month, column for column (the job's report:
    # the listener maps a MERGE from a materialised source to the target itself)
    for column in WEATHER_COLUMNS:
        assert raw[column] == _of(naming.WEATHER_STAGING, column), column


def test_actuals_columns_come_from_the_pickup_time_and_zone(completes):
    columns = _columns(_task_event(completes, "forecast_yellow_rides.compute_hourly_actuals"), ACTUALS)
    for part in ("year", "month", "day", "hour"):  # taxi.hourly_actuals: the pickup time's parts
        assert columns[part] == _of(RAW, "tpep_pickup_datetime"), part
    assert columns["pulocationid"] == _of(RAW, "PULocationID")
    # total_rides = count(*) grouped by (pickup hour, zone): it depends on the grouping columns only
    assert columns["total_rides"] == _of(RAW, "PULocationID", "tpep_pickup_datetime")


@pytest.mark.parametrize("model", ["seasonal_naive", "weather"])
def test_forecast_columns_come_from_what_the_fitted_model_used(completes, model):
    columns = _columns(_forecast_event(completes, model), naming.HOURLY_FORECAST)
    for part in ("year", "month", "day", "hour"):  # the 24 hours after the actuals' last hour
        assert columns[part] == _of(ACTUALS, part), part
    assert columns["pulocationid"] == _of(ACTUALS, "pulocationid")  # the active zones of the actuals
    if model == "seasonal_naive":
        # forecasting.seasonal_naive: the same zone and hour 7 days earlier, nothing else
        assert columns["forecasted_total_rides"] == _of(ACTUALS, "total_rides")
    else:
        # models.weather_pipeline: lags of total_rides, hour and weekday (encoded) and the day's precipitation and
        # mean temperature (weather.daily_nyc_weather: the day columns of the NYC counties' element rows)
        assert columns["forecasted_total_rides"] == (
            _of(ACTUALS, "total_rides", "hour", "year", "month", "day")
            | _of(WEATHER, *WEATHER_DAY_COLUMNS, "meteorological_element", "region_code")
        )
    # model_name, model_version, run_id, created_at: literals of the run
    assert not {"model_name", "model_version", "run_id", "created_at"} & set(columns)


@pytest.mark.parametrize("model", ["seasonal_naive", "weather"])
def test_forecast_tasks_read_what_their_model_needs(completes, model):
    forecast = _forecast_event(completes, model)
    expected = {_id(ACTUALS), _id(naming.model_key(model))} | ({_id(WEATHER)} if model == "weather" else set())
    assert {(i["namespace"], i["name"]) for i in forecast["inputs"]} == expected


def test_no_task_of_the_projects_dags_drifts_from_its_declaration(completes):
    assert completes, "the pipeline run emitted COMPLETE events"
    checked = 0
    for event in completes:
        drift = event["run"]["facets"].get("lineageDrift")
        if drift is None:
            continue
        checked += 1
        assert drift["observed"] is True and drift["drifted"] is False, f"{event['job']['name']}: {drift}"
    assert checked >= 6, "every Spark task of the three DAGs declares its datasets"
