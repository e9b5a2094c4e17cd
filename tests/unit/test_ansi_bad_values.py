"""Bad values under Spark 4's ANSI mode (``spark.sql.ansi.enabled=true``, the default, kept on).

One test per case the Spark 4 move probed (docs/versions-and-traps.md, Trap 8). Under ANSI mode a plain ``cast``, ``make_date`` or
``make_timestamp`` fails the whole job on one bad value (CAST_INVALID_INPUT, CAST_OVERFLOW,
DATETIME_FIELD_OUT_OF_BOUNDS); the transforms use ``try_cast``/``try_make_timestamp*`` instead, so each bad value
keeps its Spark 3.5 outcome: null, then a bad row, a quarantined row or a dropped day. Where Spark 3.5 silently
wrapped or saturated an out-of-range number (a zone id 4294967306 became zone 10), the value is now null.
"""

from __future__ import annotations

from datetime import date, datetime

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.common import forecasting, taxi, weather
from spark_jobs.stage_weather import validate


@pytest.fixture
def ansi_spark(spark):
    """The project's session, as every job gets it: ANSI mode on (Spark 4's default, never turned off)."""
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    return spark


def _weather_frame(spark, year="2025", month="1", days: dict[str, str] | None = None, region_code="36061"):
    values = {day: "-999.99" for day in weather.DAY_COLUMNS}
    values.update({"day_01": "2.0", **(days or {})})
    row = ("cty", region_code, "New York", year, month, "prcp", *[values[d] for d in weather.DAY_COLUMNS], None)
    return spark.createDataFrame([row], weather.RAW_SCHEMA)


def _taxi_frame(spark, overrides: dict, types: dict[str, T.DataType]):
    """One 2025-shaped trip with some columns given as values of another (compatible) source type."""
    values = {name: None for name, _ in taxi.CANONICAL_COLUMNS}
    values.update(
        VendorID=1,
        tpep_pickup_datetime=datetime(2020, 1, 1, 8),
        tpep_dropoff_datetime=datetime(2020, 1, 1, 9),
        PULocationID=10,
        DOLocationID=20,
        payment_type=1,
        trip_distance=1.0,
        total_amount=10.0,
    )
    values.update(overrides)
    schema = T.StructType([T.StructField(name, types.get(name, dtype)) for name, dtype in taxi.CANONICAL_COLUMNS])
    return spark.createDataFrame([tuple(values[name] for name, _ in taxi.CANONICAL_COLUMNS)], schema)


def _normalized(spark, column: str, value, source_type: T.DataType):
    frame = _taxi_frame(spark, {column: value}, {column: source_type})
    return taxi.normalize_taxi_schema(frame, "yellow_tripdata_2020-01.parquet").first()


# ---------------------------------------------------------------------------------------------------- weather


def test_a_year_that_is_no_number_is_a_bad_row_and_fails_validation_naming_the_file(ansi_spark):
    raw = _weather_frame(ansi_spark, year="20x5")
    assert [row.line for row in weather.bad_rows(raw).collect()] == ["cty,36061,New York,20x5,1,prcp"]
    with pytest.raises(weather.WeatherFileError, match=r"^landed/prcp\.csv: rows with .* unparsable values"):
        validate(raw, "landed/prcp.csv")


@pytest.mark.parametrize("text", ["abc", "1,5"])
def test_a_day_value_that_is_no_number_is_null(ansi_spark, text):
    row = weather.parse_weather(_weather_frame(ansi_spark, days={"day_05": text, "day_06": "1.5"})).first()
    assert (row.day_05, row.day_06, row.day_01) == (None, 1.5, 2.0)
    assert weather.bad_rows(_weather_frame(ansi_spark, days={"day_05": text})).count() == 0  # as on Spark 3.5


def test_a_month_written_with_a_decimal_part_is_its_integer_part_and_a_word_is_null(ansi_spark):
    assert weather.parse_weather(_weather_frame(ansi_spark, month="1.0")).first().month == 1
    assert weather.parse_weather(_weather_frame(ansi_spark, month=" 02 ")).first().month == 2
    assert weather.parse_weather(_weather_frame(ansi_spark, month="Jan")).first().month is None
    assert weather.parse_weather(_weather_frame(ansi_spark, year="99999999999")).first().year is None


def test_a_value_on_30_february_is_dropped_and_the_other_days_stay(ansi_spark):
    raw = _weather_frame(ansi_spark, month="2", days={"day_05": "1.5", "day_30": "3.0", "day_31": "4.0"})
    daily = weather.daily_nyc_weather(weather.parse_weather(raw)).orderBy("date").collect()
    assert [(row.date, row.prcp_mm) for row in daily] == [(date(2025, 2, 1), 2.0), (date(2025, 2, 5), 1.5)]


def test_a_month_out_of_range_drops_its_days(ansi_spark):
    raw = _weather_frame(ansi_spark, month="13")
    assert weather.daily_nyc_weather(weather.parse_weather(raw)).count() == 0


# ------------------------------------------------------------------------------------------------------- taxi


def test_a_passenger_count_beyond_bigint_is_null(ansi_spark):
    # 2018-07..2023-01 files store passenger_count as double; Spark 3.5 saturated 1e19 to 9223372036854775807.
    assert _normalized(ansi_spark, "passenger_count", 1e19, T.DoubleType()).passenger_count is None


def test_a_nan_passenger_count_is_null(ansi_spark):
    # Spark 3.5 made NaN 0 passengers.
    assert _normalized(ansi_spark, "passenger_count", float("nan"), T.DoubleType()).passenger_count is None


def test_a_fractional_ratecode_still_truncates(ansi_spark):
    assert _normalized(ansi_spark, "RatecodeID", 1.5, T.DoubleType()).RatecodeID == 1


def test_a_vendor_id_beyond_int_is_null_not_wrapped(ansi_spark):
    # Spark 3.5 wrapped 3000000000 to -1294967296.
    assert _normalized(ansi_spark, "VendorID", 3_000_000_000, T.LongType()).VendorID is None


def test_a_pickup_zone_beyond_int_is_quarantined_not_wrapped_into_a_real_zone(ansi_spark):
    # Spark 3.5 wrapped 4294967306 to zone 10, a real zone: the trip was counted in the wrong place.
    frame = _taxi_frame(ansi_spark, {"PULocationID": 4_294_967_306}, {"PULocationID": T.LongType()})
    normalized = taxi.normalize_taxi_schema(frame, "yellow_tripdata_2020-01.parquet")
    assert normalized.first().PULocationID is None
    good, quarantined = taxi.split_quarantine(taxi.add_row_metadata(normalized, "f.parquet", "2020-01", "2020-02-01"))
    assert good.count() == 0
    assert [row.quarantine_reason for row in quarantined.collect()] == ["null_pickup_zone"]


def test_in_range_narrowing_keeps_the_value(ansi_spark):
    assert _normalized(ansi_spark, "PULocationID", 265, T.LongType()).PULocationID == 265
    assert _normalized(ansi_spark, "passenger_count", 2.0, T.DoubleType()).passenger_count == 2


def test_an_ingest_time_text_that_is_no_timestamp_is_null(ansi_spark):
    frame = _taxi_frame(ansi_spark, {}, {})
    row = taxi.add_row_metadata(frame, "f.parquet", "2020-01", "2025-13-01 00:00:00").first()
    assert row.ingest_timestamp is None
    row = taxi.add_row_metadata(frame, "f.parquet", "2020-01", "2025-12-01 00:00:00").first()
    assert row.ingest_timestamp == datetime(2025, 12, 1)


# --------------------------------------------------------------------------------------------------- forecast


def test_an_actuals_row_with_hour_24_has_no_timestamp(ansi_spark):
    actuals = ansi_spark.createDataFrame(
        [(2025, 1, 1, 24, 10, 3), (2025, 2, 30, 0, 10, 1), (2025, 1, 1, 23, 10, 5)],
        "year int, month int, day int, hour int, pulocationid int, total_rides long",
    )
    rows = forecasting.with_hour_timestamp(actuals).orderBy("total_rides").collect()
    assert [row.ts for row in rows] == [None, None, datetime(2025, 1, 1, 23)]


def test_a_nan_prediction_stays_nan(ansi_spark):
    predictions = ansi_spark.createDataFrame(
        [(datetime(2025, 1, 1, 8), 10, float("nan"))], "ts timestamp, pulocationid int, prediction double"
    )
    row = forecasting.forecast_rows(predictions, "weather", "v", "r").first()
    assert row.forecasted_total_rides != row.forecasted_total_rides  # NaN, as on Spark 3.5


def test_a_plain_cast_of_the_same_values_fails_under_ansi(ansi_spark):
    """The guard of this file: without try_cast & co. the values above fail the job, so the tests above would too."""
    from pyspark.errors import ArithmeticException, DateTimeException, NumberFormatException

    with pytest.raises(NumberFormatException, match="CAST_INVALID_INPUT"):
        ansi_spark.createDataFrame([("20x5",)], "v string").select(F.col("v").cast("int")).collect()
    with pytest.raises(ArithmeticException, match="CAST_OVERFLOW"):
        ansi_spark.createDataFrame([(4_294_967_306,)], "v long").select(F.col("v").cast("int")).collect()
    with pytest.raises(DateTimeException, match="DATETIME_FIELD_OUT_OF_BOUNDS"):
        ansi_spark.range(1).select(F.make_date(F.lit(2025), F.lit(2), F.lit(30))).collect()
