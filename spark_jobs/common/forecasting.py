"""Pure DataFrame -> DataFrame transforms for the hourly ride forecast (seasonal-naive and weather models)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from include.core import naming

SEASON_HOURS = 168
HORIZON_HOURS = 24
LAGS = (24, SEASON_HOURS)
MODEL_NAMES = ("seasonal_naive", "weather")
FEATURES = ["lag_24", "lag_168", "prcp_mm", "tavg_c"]

# The table columns each model input is computed from, beside the code that computes it (``with_lags``: rides of the
# zone h hours before, from the actuals' ``total_rides``; ``with_weather``: the day's value among ``weather_raw``'s
# day columns, of the rows its element and county select; ``with_calendar``: the target hour's calendar, from the
# actuals' hours the horizon follows). A forecast's column lineage is the sources of the inputs its fitted model
# really used (``models.used_inputs``), not of every input the code could compute.
_ACTUALS_HOUR = ("year", "month", "day", "hour")
_WEATHER_DAY = [f"day_{day:02d}" for day in range(1, 32)]
INPUT_SOURCES: dict[str, list[tuple[str, str, str, str]]] = {
    **{f"lag_{lag}": [(naming.HOURLY_ACTUALS, "total_rides", "DIRECT", "TRANSFORMATION")] for lag in LAGS},
    **{
        feature: [(naming.WEATHER_RAW, column, "DIRECT", "AGGREGATION") for column in _WEATHER_DAY]
        + [(naming.WEATHER_RAW, column, "INDIRECT", "FILTER") for column in ("meteorological_element", "region_code")]
        for feature in ("prcp_mm", "tavg_c")
    },
    "hour": [(naming.HOURLY_ACTUALS, "hour", "DIRECT", "TRANSFORMATION")],
    "weekday": [(naming.HOURLY_ACTUALS, column, "DIRECT", "TRANSFORMATION") for column in ("year", "month", "day")],
}


def forecast_column_lineage(used_inputs: list[str]) -> dict[str, list[list[str]]]:
    """Column lineage of the forecast table (``forecast_rows``) for a model that used ``used_inputs``: the job
    report's ``column_lineage`` entry of the table."""
    prediction: list[list[str]] = []
    for model_input in used_inputs:
        for source in INPUT_SOURCES[model_input]:
            if list(source) not in prediction:
                prediction.append(list(source))
    horizon = {column: [[naming.HOURLY_ACTUALS, column, "DIRECT", "TRANSFORMATION"]] for column in _ACTUALS_HOUR}
    return {
        **horizon,
        "pulocationid": [[naming.HOURLY_ACTUALS, "pulocationid", "DIRECT", "IDENTITY"]],
        "forecasted_total_rides": prediction,
    }


def with_hour_timestamp(actuals: DataFrame) -> DataFrame:
    """``ts`` of each (year, month, day, hour); null for an impossible one (hour 24, 30 February), as on Spark 3.5:
    ``make_timestamp`` fails the job on it under ANSI mode, ``try_make_timestamp`` does not."""
    return actuals.withColumn(
        "ts",
        F.try_make_timestamp(years="year", months="month", days="day", hours="hour", mins=F.lit(0), secs=F.lit(0)),
    )


def active_zones(actuals_ts: DataFrame, last_ts, hours: int = SEASON_HOURS) -> DataFrame:
    """Zones with at least one ride in the ``hours`` up to ``last_ts``."""
    since = F.lit(last_ts) - F.expr(f"INTERVAL {hours} HOURS")
    return actuals_ts.where(F.col("ts") > since).select("pulocationid").distinct()


def hour_range(spark, first_ts, last_ts) -> DataFrame:
    return spark.sql(
        "SELECT explode(sequence(to_timestamp(:first), to_timestamp(:last), INTERVAL 1 HOUR)) AS ts",
        args={"first": str(first_ts), "last": str(last_ts)},
    )


def dense_grid(actuals_ts: DataFrame, zones: DataFrame, hours: DataFrame) -> DataFrame:
    """Every (zone, hour) pair with its ride count; hours without rides count 0."""
    return (
        zones.crossJoin(hours)
        .join(actuals_ts.select("pulocationid", "ts", "total_rides"), ["pulocationid", "ts"], "left")
        .select("pulocationid", "ts", F.coalesce("total_rides", F.lit(0)).cast("double").alias("y"))
    )


def with_lags(targets: DataFrame, known: DataFrame, lags=LAGS) -> DataFrame:
    """Add lag_<h> = rides of the same zone h hours before each target hour (0 when unknown)."""
    result = targets
    for lag in lags:
        shifted = known.select(
            "pulocationid",
            (F.col("ts") + F.expr(f"INTERVAL {lag} HOURS")).alias("ts"),
            F.col("y").alias(f"lag_{lag}"),
        )
        result = result.join(shifted, ["pulocationid", "ts"], "left").fillna({f"lag_{lag}": 0.0})
    return result


def with_weather(targets: DataFrame, daily_weather: DataFrame) -> DataFrame:
    """Add the day's NYC precipitation and temperature; days without observations get the period's mean."""
    means = daily_weather.agg(F.avg("prcp_mm").alias("m_prcp"), F.avg("tavg_c").alias("m_tavg"))
    return (
        targets.withColumn("date", F.to_date("ts"))
        .join(daily_weather, "date", "left")
        .crossJoin(means)
        .withColumn("prcp_mm", F.coalesce("prcp_mm", "m_prcp", F.lit(0.0)))
        .withColumn("tavg_c", F.coalesce("tavg_c", "m_tavg", F.lit(0.0)))
        .drop("m_prcp", "m_tavg", "date")
    )


def with_calendar(targets: DataFrame) -> DataFrame:
    return targets.withColumn("hour", F.hour("ts")).withColumn("weekday", F.dayofweek("ts") - 1)


def seasonal_naive(targets_with_lags: DataFrame) -> DataFrame:
    return targets_with_lags.withColumn("prediction", F.col(f"lag_{SEASON_HOURS}"))


def mean_absolute_error(predictions: DataFrame, label: str = "y") -> float:
    return float(predictions.agg(F.avg(F.abs(F.col("prediction") - F.col(label)))).first()[0])


def forecast_rows(predictions: DataFrame, model_name: str, model_version: str, run_id: str) -> DataFrame:
    """The forecast table's shape: the seed's columns plus model name, version and run id."""
    return predictions.select(
        F.year("ts").alias("year"),
        F.month("ts").alias("month"),
        F.dayofmonth("ts").alias("day"),
        F.hour("ts").alias("hour"),
        F.col("pulocationid"),
        F.round(F.greatest(F.col("prediction"), F.lit(0.0)), 2).alias("forecasted_total_rides"),
        F.lit(model_name).alias("model_name"),
        F.lit(model_version).alias("model_version"),
        F.lit(run_id).alias("run_id"),
        F.current_timestamp().alias("created_at"),
    )
