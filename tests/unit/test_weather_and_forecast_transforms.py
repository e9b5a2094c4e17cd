"""Transforms of the weather side and of the forecast, on a real local SparkSession."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from include.sources import sample_data
from spark_jobs.common import forecasting
from spark_jobs.common.weather import RAW_SCHEMA, bad_rows, daily_nyc_weather, parse_weather


def _csv_frame(spark, text: str):
    return spark.read.csv(
        spark.sparkContext.parallelize(text.splitlines()),
        schema=RAW_SCHEMA,
        mode="PERMISSIVE",
        columnNameOfCorruptRecord="_corrupt_record",
    )


def test_generated_noaa_csv_parses_with_missing_days_kept_as_sentinel(spark):
    text = sample_data.weather_month_csv("tavg", 2025, 2, last_day=10)
    parsed = parse_weather(_csv_frame(spark, text))
    row = parsed.where("region_code = '36061'").first()
    assert (row.region_type, row.region_name, row.year, row.month, row.meteorological_element) == (
        "cty",
        "New York County",
        2025,
        2,
        "tavg",
    )
    assert row.day_10 == sample_data.daily_weather(date(2025, 2, 10), "36061").tavg_c
    assert row.day_11 == row.day_29 == row.day_31 == -999.99
    assert bad_rows(_csv_frame(spark, text)).count() == 0


def test_row_with_wrong_number_of_fields_is_a_bad_row(spark):
    good = sample_data.weather_month_csv("prcp", 2025, 1).splitlines()[0]
    short = ",".join(good.split(",")[:20])
    assert [row.line for row in bad_rows(_csv_frame(spark, good + "\n" + short)).collect()] == [short]


def test_daily_nyc_weather_averages_the_five_counties_and_skips_missing(spark):
    values = {"36005": 1.0, "36047": 2.0, "36061": 3.0, "36081": 4.0, "36085": 5.0, "34003": 100.0}
    lines = []
    for code, value in values.items():
        for element in ("prcp", "tavg"):
            days = [value if element == "prcp" else value * 10] + [-999.99] * 30
            lines.append(",".join(["cty", code, "x", "2025", "01", element, *map(str, days)]))
    result = daily_nyc_weather(parse_weather(_csv_frame(spark, "\n".join(lines))))
    expected = spark.createDataFrame([(date(2025, 1, 1), 3.0, 30.0)], "date date, prcp_mm double, tavg_c double")
    assertDataFrameEqual(result, expected)


def test_dense_grid_lags_and_seasonal_naive(spark):
    actuals = forecasting.with_hour_timestamp(
        spark.createDataFrame(
            [(2025, 1, 1, 0, 5, 3), (2025, 1, 8, 0, 5, 4), (2025, 1, 8, 1, 6, 9)],
            "year int, month int, day int, hour int, pulocationid int, total_rides long",
        )
    )
    zones = spark.createDataFrame([(5,), (6,)], "pulocationid int")
    hours = forecasting.hour_range(spark, datetime(2025, 1, 1), datetime(2025, 1, 8, 1))
    known = forecasting.dense_grid(actuals, zones, hours)
    assert known.count() == 2 * (7 * 24 + 2)
    targets = spark.createDataFrame(
        [(5, datetime(2025, 1, 8, 0)), (6, datetime(2025, 1, 8, 1))], "pulocationid int, ts timestamp"
    )
    predicted = forecasting.seasonal_naive(forecasting.with_lags(targets, known)).select(
        "pulocationid", "ts", "prediction"
    )
    expected = spark.createDataFrame(
        [(5, datetime(2025, 1, 8, 0), 3.0), (6, datetime(2025, 1, 8, 1), 0.0)],
        "pulocationid int, ts timestamp, prediction double",
    )
    assertDataFrameEqual(predicted, expected)
    scored = known.join(predicted, ["pulocationid", "ts"])
    assert forecasting.mean_absolute_error(scored) == (abs(3.0 - 4.0) + abs(0.0 - 9.0)) / 2


def test_forecast_rows_have_the_seed_columns_and_model_identity(spark):
    predictions = spark.createDataFrame(
        [(10, datetime(2025, 2, 1, 5), -1.5), (10, datetime(2025, 2, 1, 6), 2.345)],
        "pulocationid int, ts timestamp, prediction double",
    )
    rows = forecasting.forecast_rows(predictions, "weather", "weather-abc", "run-1").drop("created_at")
    expected = spark.createDataFrame(
        [
            (2025, 2, 1, 5, 10, 0.0, "weather", "weather-abc", "run-1"),
            (2025, 2, 1, 6, 10, 2.35, "weather", "weather-abc", "run-1"),
        ],
        "year int, month int, day int, hour int, pulocationid int, forecasted_total_rides double, model_name string, "
        "model_version string, run_id string",
    )
    assertDataFrameEqual(rows, expected)


def test_model_rows_slices_are_the_rows_each_fit_was_given_on_its_own(spark):
    """train_model computes every hour's features once (models.model_rows) and slices them: each slice must equal
    the features of that slice's hours computed on their own, with lags still reaching back before the slice."""
    from spark_jobs.common import models

    rides = [
        (2025, 1, day, hour, zone, (day * 24 + hour + zone) % 7 + 1)
        for zone in (5, 6)
        for day in range(1, 11)
        for hour in (0, 5, 17)
    ]
    actuals = forecasting.with_hour_timestamp(
        spark.createDataFrame(rides, "year int, month int, day int, hour int, pulocationid int, total_rides long")
    )
    zones = spark.createDataFrame([(5,), (6,)], "pulocationid int")
    first, last = datetime(2025, 1, 1), datetime(2025, 1, 10, 17)
    known = forecasting.dense_grid(actuals, zones, forecasting.hour_range(spark, first, last))
    inputs = models.ForecastInputs(known, zones, first, last, None, {})
    rows = models.model_rows(inputs)
    holdout_start = datetime(2025, 1, 9, 18)

    def alone(since, until):
        return models.features(known.where((F.col("ts") >= since) & (F.col("ts") <= until)), known, None)

    earliest = datetime(2025, 1, 8)  # a full season (168 hours) after the first hour
    assert rows.earliest == earliest
    training = rows.training(until=holdout_start - timedelta(hours=1))
    assertDataFrameEqual(training, alone(earliest, holdout_start - timedelta(hours=1)))
    assertDataFrameEqual(rows.holdout(since=holdout_start), alone(holdout_start, last))
    assertDataFrameEqual(rows.training(until=last), alone(earliest, last))
    assert training.where(F.col("ts") >= holdout_start).count() == 0
    assert training.where("lag_168 > 0").count() > 0  # lags reach into the week before the first training hour
