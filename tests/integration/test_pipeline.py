"""The three DAGs, run for real with `airflow dags test`, leave the right rows in the Iceberg tables."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from include.core import naming
from include.sources import sample_data
from spark_jobs.common import forecasting
from spark_jobs.common.tables import qualified
from spark_jobs.common.taxi import hourly_actuals

from .conftest import MONTH, ROWS

pytestmark = pytest.mark.integration


def test_raw_taxi_holds_every_distinct_source_row_once(pipeline_run):
    source = pq.read_table(pipeline_run.paths.var / "source" / "trip-data" / sample_data.taxi_file_name(*MONTH))
    distinct_source_rows = source.group_by(source.column_names).aggregate([]).num_rows
    state = pipeline_run.raw_after_first_ingest
    assert state.rows == distinct_source_rows == ROWS
    assert state.distinct == state.rows


def test_reingesting_the_same_month_changes_nothing_in_raw(pipeline_run):
    first, again = pipeline_run.raw_after_first_ingest, pipeline_run.raw_after_reingest
    assert again.rows == first.rows
    assert again.distinct == again.rows, "no duplicate unique_row_id"
    assert again.ids == first.ids
    assert again.snapshot_id == first.snapshot_id, "nothing committed"
    # Forced through the DAG, the unchanged file is recognised by the load before any Spark session starts
    log = pipeline_run.results["taxi_again"].log
    assert "load_yellow_taxi_raw" in log
    assert "already hold 2025-01 from yellow_tripdata_2025-01.parquet" in log and "nothing loaded" in log, log[-4000:]


def test_second_run_without_force_skips_an_already_ingested_file(pipeline_run, airflow_env):
    from include.airflow import runs
    from include.sources import sample_server

    with sample_server.serve(pipeline_run.paths.var / "source") as env:
        result = runs.dags_test("ingest_yellow_taxi_data", "2025-02-01", {}, env=env)
    assert result.succeeded
    assert "already ingested (same xxhash64)" in result.log


def test_raw_weather_has_one_row_per_county_month_and_element(spark, pipeline_run):
    raw = spark.table(qualified(naming.WEATHER_RAW))
    counties = len(sample_data.NYC_COUNTIES) + len(sample_data.OTHER_COUNTIES)
    assert raw.count() == counties * len(sample_data.WEATHER_ELEMENTS)
    assert raw.groupBy("region_code", "year", "month", "meteorological_element").count().where("count > 1").count() == 0
    row = raw.where("region_code = '36061' AND meteorological_element = 'prcp'").first()
    assert row.day_05 == sample_data.daily_weather(__import__("datetime").date(2025, 1, 5), "36061").prcp_mm


def test_actuals_equal_a_direct_count_of_raw(spark, pipeline_run):
    # Restricted to the month the forecast DAG saw: other tests ingest further months into raw afterwards.
    actuals = spark.table(qualified(naming.HOURLY_ACTUALS)).where("year = 2025 AND month = 1")
    direct = hourly_actuals(spark.table(qualified(naming.TAXI_RAW)).where("source_month = '2025-01'"))
    assert actuals.count() == direct.count() > 0
    assert actuals.exceptAll(direct).count() == 0
    assert direct.exceptAll(actuals).count() == 0
    assert actuals.agg(F.sum("total_rides")).first()[0] == ROWS


def test_seasonal_naive_forecast_is_the_actual_seven_days_earlier(spark, pipeline_run):
    forecast = forecasting.with_hour_timestamp(
        spark.table(qualified(naming.HOURLY_FORECAST)).where("model_name = 'seasonal_naive'")
    ).collect()
    actuals = {
        (row.pulocationid, row.ts): row.total_rides
        for row in forecasting.with_hour_timestamp(spark.table(qualified(naming.HOURLY_ACTUALS))).collect()
    }
    assert forecast, "no seasonal-naive forecast rows"
    for row in forecast:
        assert row.forecasted_total_rides == actuals.get((row.pulocationid, row.ts - timedelta(days=7)), 0)


def test_forecast_covers_the_next_24_hours_for_every_active_zone(spark, pipeline_run):
    actuals = forecasting.with_hour_timestamp(spark.table(qualified(naming.HOURLY_ACTUALS)))
    last = actuals.agg(F.max("ts")).first()[0]
    active = {r.pulocationid for r in forecasting.active_zones(actuals, last).collect()}
    for model in ("seasonal_naive", "weather"):
        rows = forecasting.with_hour_timestamp(
            spark.table(qualified(naming.HOURLY_FORECAST)).where(F.col("model_name") == model)
        ).collect()
        assert {r.pulocationid for r in rows} == active
        assert {r.ts for r in rows} == {last + timedelta(hours=h) for h in range(1, 25)}
        assert len(rows) == 24 * len(active)
        assert {r.model_version for r in rows} == {
            json.loads((naming.model_dir(model) / "model.json").read_text())["model_version"]
        }
        assert all(r.forecasted_total_rides >= 0 for r in rows)


def _independent_seasonal_naive_mae(catalog, holdout_end: datetime) -> tuple[float, int]:
    """The seasonal-naive holdout MAE recomputed in plain Python from the actuals table: for every zone with a ride
    in the week up to ``holdout_end`` and every hour of the last 24, |rides - rides 7 days earlier| (0 if none)."""
    table = catalog.load_table(f"nyc_taxi.{naming.HOURLY_ACTUALS}")
    rides = {
        (row["pulocationid"], datetime(row["year"], row["month"], row["day"], row["hour"])): row["total_rides"]
        for row in table.scan().to_arrow().to_pylist()
    }
    week = timedelta(hours=forecasting.SEASON_HOURS)
    zones = {zone for zone, ts in rides if ts > holdout_end - week}
    hours = [holdout_end - timedelta(hours=h) for h in range(forecasting.HORIZON_HOURS)]
    errors = [abs(rides.get((zone, ts), 0) - rides.get((zone, ts - week), 0)) for zone in zones for ts in hours]
    return sum(errors) / len(errors), len(errors)


def test_holdout_mae_of_both_models_against_an_independent_baseline(pipeline_run, catalog):
    metrics = {
        model: json.loads((naming.model_dir(model, pipeline_run.paths) / "model.json").read_text())
        for model in ("seasonal_naive", "weather")
    }
    holdout_end = datetime.fromisoformat(metrics["seasonal_naive"]["holdout_end"])
    baseline, holdout_rows = _independent_seasonal_naive_mae(catalog, holdout_end)
    assert baseline > 0, "a holdout the seasonal-naive forecast predicts perfectly tells nothing"
    for model in ("seasonal_naive", "weather"):
        assert metrics[model]["holdout_rows"] == holdout_rows
        assert metrics[model]["baseline_mae"] == pytest.approx(baseline, abs=1e-4)
    assert metrics["seasonal_naive"]["mae"] == pytest.approx(baseline, abs=1e-4), "seasonal-naive is the baseline"
    assert metrics["weather"]["mae"] != pytest.approx(baseline, abs=1e-4), "the weather model was not the one evaluated"
    for model, key in (("seasonal_naive", "forecast_naive"), ("weather", "forecast_weather")):
        assert f"holdout MAE {metrics[model]['mae']:.3f}" in pipeline_run.results[key].log
    assert (naming.model_dir("weather", pipeline_run.paths) / "spark_model").is_dir()
