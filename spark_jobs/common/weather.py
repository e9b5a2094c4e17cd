"""Pure DataFrame -> DataFrame transforms of the weather side (NOAA nClimGrid daily county CSV)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from include.contract import NYC_COUNTIES, WEATHER_DAY_COLUMNS, WEATHER_KEY_COLUMNS, WEATHER_MISSING_VALUE
from spark_jobs.common.runner import BadInputError

DAY_COLUMNS = list(WEATHER_DAY_COLUMNS)
KEY_COLUMNS = list(WEATHER_KEY_COLUMNS)
RAW_SCHEMA = T.StructType(
    [T.StructField(name, T.StringType()) for name in KEY_COLUMNS]
    + [T.StructField(day, T.StringType()) for day in DAY_COLUMNS]
    + [T.StructField("_corrupt_record", T.StringType())]
)
MERGE_KEYS = ("region_code", "year", "month", "meteorological_element")


class WeatherFileError(BadInputError):
    pass


def parse_weather(df: DataFrame) -> DataFrame:
    """Typed rows from the raw CSV columns; missing values stay WEATHER_MISSING_VALUE (-999.99) as in the source."""
    return df.select(
        F.trim("region_type").alias("region_type"),
        F.trim("region_code").alias("region_code"),
        F.trim("region_name").alias("region_name"),
        F.trim("year").cast("int").alias("year"),
        F.trim("month").cast("int").alias("month"),
        F.trim("meteorological_element").alias("meteorological_element"),
        *[F.trim(day).cast("double").alias(day) for day in DAY_COLUMNS],
    )


def bad_rows(df: DataFrame) -> DataFrame:
    """Rows with the wrong number of fields or a value that does not parse: (line, reason)."""
    return df.where(
        F.col("_corrupt_record").isNotNull() | F.col(DAY_COLUMNS[-1]).isNull() | F.trim("year").cast("int").isNull()
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
        .withColumn("date", F.make_date("year", "month", F.col("day_index") + 1))
        .where(F.col("date").isNotNull())
    )
    return (
        valid.groupBy("date")
        .pivot("meteorological_element", ["prcp", "tavg"])
        .agg(F.avg("value"))
        .withColumnRenamed("prcp", "prcp_mm")
        .withColumnRenamed("tavg", "tavg_c")
    )
