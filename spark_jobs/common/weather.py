"""Pure DataFrame -> DataFrame transforms of the weather side (NOAA nClimGrid daily county CSV)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from include.core.contract import NYC_COUNTIES, WEATHER_DAY_COLUMNS, WEATHER_KEY_COLUMNS, WEATHER_MISSING_VALUE
from spark_jobs.common.runner import BadInputError

DAY_COLUMNS = list(WEATHER_DAY_COLUMNS)
KEY_COLUMNS = list(WEATHER_KEY_COLUMNS)
RAW_SCHEMA = T.StructType(
    [T.StructField(name, T.StringType()) for name in KEY_COLUMNS]
    + [T.StructField(day, T.StringType()) for day in DAY_COLUMNS]
    + [T.StructField("_corrupt_record", T.StringType())]
)
MERGE_KEYS = ("region_code", "year", "month", "meteorological_element")


# An integer written with a decimal part ("1.0"): Spark 3.5's cast read it as its integer part; ANSI casts refuse it.
_DECIMAL_FORM = r"^([+-]?[0-9]+)[.][0-9]*$"


class WeatherFileError(BadInputError):
    pass


def lenient_int(column):
    """A text field as int, or null when it is not one, under ANSI mode (Spark 4's default) as before it: "7" and
    "7.0" are 7 (Spark 3.5's non-ANSI cast truncated a decimal part), "20x5" or an out-of-range number is null
    (``try_cast``; a plain ``cast`` fails the job with CAST_INVALID_INPUT)."""
    text = F.trim(column)
    return F.coalesce(text.try_cast("int"), F.regexp_extract(text, _DECIMAL_FORM, 1).try_cast("int"))


def lenient_double(column):
    """A text field as double, or null when it does not parse ("abc", "1,5"), with ANSI mode on."""
    return F.trim(column).try_cast("double")


def parse_weather(df: DataFrame) -> DataFrame:
    """Typed rows from the raw CSV columns; missing values stay WEATHER_MISSING_VALUE (-999.99) as in the source."""
    return df.select(
        F.trim("region_type").alias("region_type"),
        F.trim("region_code").alias("region_code"),
        F.trim("region_name").alias("region_name"),
        lenient_int("year").alias("year"),
        lenient_int("month").alias("month"),
        F.trim("meteorological_element").alias("meteorological_element"),
        *[lenient_double(day).alias(day) for day in DAY_COLUMNS],
    )


def bad_rows(df: DataFrame) -> DataFrame:
    """Rows with the wrong number of fields or a value that does not parse: (line, reason)."""
    return df.where(
        F.col("_corrupt_record").isNotNull() | F.col(DAY_COLUMNS[-1]).isNull() | lenient_int("year").isNull()
    ).select(
        F.coalesce("_corrupt_record", F.concat_ws(",", *KEY_COLUMNS)).alias("line"),
    )


def daily_nyc_weather(raw: DataFrame) -> DataFrame:
    """One row per day: NYC's five-county mean of precipitation (mm) and mean temperature (C)."""
    long = raw.where(F.col("region_code").isin(*NYC_COUNTIES)).select(
        "year",
        "month",
        "meteorological_element",
        F.posexplode(F.array(*DAY_COLUMNS)).alias("day_index", "value"),
    )
    valid = (
        long.where(F.col("value") != WEATHER_MISSING_VALUE)
        # Days past the month's end (30 February) have no date: dropped. try_make_timestamp_ntz is null for them where
        # make_date fails under ANSI mode; the NTZ timestamp's date does not depend on the session time zone.
        .withColumn(
            "date",
            F.to_date(
                F.try_make_timestamp_ntz(
                    years="year",
                    months="month",
                    days=F.col("day_index") + 1,
                    hours=F.lit(0),
                    mins=F.lit(0),
                    secs=F.lit(0),
                )
            ),
        )
        .where(F.col("date").isNotNull())
    )
    return (
        valid.groupBy("date")
        .pivot("meteorological_element", ["prcp", "tavg"])
        .agg(F.avg("value"))
        .withColumnRenamed("prcp", "prcp_mm")
        .withColumnRenamed("tavg", "tavg_c")
    )
