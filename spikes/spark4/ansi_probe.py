"""ANSI-mode probe: the project's transforms (spark_jobs/common/) on bad values, under Spark 4's default
``spark.sql.ansi.enabled=true`` and, for comparison, with it false (Spark 3.5's default), in one local session.

Run in the spike venv with PYTHONPATH=<project> and SPIKE_JARS set (run_spike.sh does). Prints a Markdown table:
each case, what ANSI off returns, what ANSI on does (rows, or the error class). A case "changes" when they differ.
Exit code 0 either way: this is a survey, the table is the result.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import datetime

from pyspark.sql import types as T

from spark_jobs.common import forecasting, taxi, weather
from spark_jobs.common.session import spark_session


def _weather_row(
    year: str = "2025", month: str = "1", day_05: str = "1.5", region_code: str = "36061", element: str = "prcp"
):
    days = {day: "-999.99" for day in weather.DAY_COLUMNS}
    days.update({"day_01": "2.0", "day_05": day_05})
    return ("cty", region_code, "New York", year, month, element, *[days[d] for d in weather.DAY_COLUMNS], None)


def _taxi_frame(spark, overrides: dict, types: dict[str, T.DataType]):
    """One 2025-shaped trip with some columns replaced by values of another (compatible) type."""
    values = {name: None for name, _ in taxi.CANONICAL_COLUMNS}
    values.update(
        VendorID=1,
        tpep_pickup_datetime=datetime(2025, 1, 1, 8),
        tpep_dropoff_datetime=datetime(2025, 1, 1, 9),
        PULocationID=10,
        DOLocationID=20,
        payment_type=1,
        trip_distance=1.0,
        total_amount=10.0,
    )
    values.update(overrides)
    schema = T.StructType([T.StructField(name, types.get(name, dtype)) for name, dtype in taxi.CANONICAL_COLUMNS])
    return spark.createDataFrame([tuple(values[name] for name, _ in taxi.CANONICAL_COLUMNS)], schema)


def cases(spark):
    """(where, input, function returning the rows it produces)."""
    raw_weather = lambda *rows: spark.createDataFrame(list(rows), weather.RAW_SCHEMA)  # noqa: E731
    normalize = lambda frame: taxi.normalize_taxi_schema(frame, "yellow_tripdata_2020-01.parquet")  # noqa: E731
    return [
        (
            "weather.bad_rows (stage_weather's validation)",
            "year `20x5`",
            lambda: [r.line[:40] for r in weather.bad_rows(raw_weather(_weather_row(year="20x5"))).collect()],
        ),
        (
            "weather.parse_weather",
            "day value `abc`",
            lambda: [r.day_05 for r in weather.parse_weather(raw_weather(_weather_row(day_05="abc"))).collect()],
        ),
        (
            "weather.parse_weather",
            "day value `1,5` (decimal comma)",
            lambda: [r.day_05 for r in weather.parse_weather(raw_weather(_weather_row(day_05="1,5"))).collect()],
        ),
        (
            "weather.parse_weather",
            "month `1.0`",
            lambda: [r.month for r in weather.parse_weather(raw_weather(_weather_row(month="1.0"))).collect()],
        ),
        (
            "weather.daily_nyc_weather",
            "a value on 30 February (not -999.99)",
            lambda: [
                (str(r.date), r.prcp_mm)
                for r in weather.daily_nyc_weather(
                    weather.parse_weather(raw_weather(_weather_row(month="2", day_05="1.5"))).withColumn(
                        "day_30", weather.F.lit(3.0)
                    )
                )
                .orderBy("date")
                .collect()
            ],
        ),
        (
            "taxi.normalize_taxi_schema",
            "passenger_count double 1e19 (2018-07..2023-01 files store doubles)",
            lambda: [
                r.passenger_count
                for r in normalize(
                    _taxi_frame(spark, {"passenger_count": 1e19}, {"passenger_count": T.DoubleType()})
                ).collect()
            ],
        ),
        (
            "taxi.normalize_taxi_schema",
            "passenger_count double NaN",
            lambda: [
                r.passenger_count
                for r in normalize(
                    _taxi_frame(spark, {"passenger_count": float("nan")}, {"passenger_count": T.DoubleType()})
                ).collect()
            ],
        ),
        (
            "taxi.normalize_taxi_schema",
            "RatecodeID double 1.5",
            lambda: [
                r.RatecodeID
                for r in normalize(_taxi_frame(spark, {"RatecodeID": 1.5}, {"RatecodeID": T.DoubleType()})).collect()
            ],
        ),
        (
            "taxi.normalize_taxi_schema",
            "VendorID long 3000000000 (int64 source, int32 column)",
            lambda: [
                r.VendorID
                for r in normalize(
                    _taxi_frame(spark, {"VendorID": 3_000_000_000}, {"VendorID": T.LongType()})
                ).collect()
            ],
        ),
        (
            "taxi.normalize_taxi_schema",
            "PULocationID long 4294967306 (int64 source, int32 column)",
            lambda: [
                r.PULocationID
                for r in normalize(
                    _taxi_frame(spark, {"PULocationID": 4_294_967_306}, {"PULocationID": T.LongType()})
                ).collect()
            ],
        ),
        (
            "taxi.add_row_metadata",
            "ingest_timestamp given as text `2025-13-01 00:00:00`",
            lambda: [
                str(r.ingest_timestamp)
                for r in taxi.add_row_metadata(
                    _taxi_frame(spark, {}, {}), "f.parquet", "2025-01", "2025-13-01 00:00:00"
                ).collect()
            ],
        ),
        (
            "forecasting.with_hour_timestamp",
            "actuals row with hour 24",
            lambda: [
                str(r.ts)
                for r in forecasting.with_hour_timestamp(
                    spark.createDataFrame(
                        [(2025, 1, 1, 24, 10, 3)],
                        "year int, month int, day int, hour int, pulocationid int, total_rides long",
                    )
                ).collect()
            ],
        ),
        (
            "forecasting.forecast_rows",
            "prediction double NaN",
            lambda: [
                r.forecasted_total_rides
                for r in forecasting.forecast_rows(
                    spark.createDataFrame(
                        [(datetime(2025, 1, 1, 8), 10, float("nan"))],
                        "ts timestamp, pulocationid int, prediction double",
                    ),
                    "weather",
                    "v",
                    "r",
                ).collect()
            ],
        ),
    ]


def outcome(spark, ansi: bool, produce) -> str:
    spark.conf.set("spark.sql.ansi.enabled", str(ansi).lower())
    try:
        return f"`{produce()}`"
    except Exception as error:  # the survey records any failure as its error class and first line
        first_line = str(error).strip().splitlines()[0]
        return f"**fails**: `{type(error).__name__}: {first_line[:160]}`"


def main() -> int:
    jars = [jar for jar in os.environ["SPIKE_JARS"].split(os.pathsep) if jar]
    spark = spark_session(
        "spark4_ansi_probe",
        extra_conf={
            "spark.jars": ",".join(jars),
            "spark.driver.extraClassPath": os.pathsep.join(jars),
            "spark.executor.extraClassPath": os.pathsep.join(jars),
            "spark.extraListeners": "",
        },
    )
    spark.sparkContext.setLogLevel("OFF")
    logging.getLogger("DataFrameQueryContextLogger").disabled = True  # PySpark 4 logs every failed query as JSON
    default_ansi = spark.conf.get("spark.sql.ansi.enabled")
    print(f"Spark {spark.version}, default spark.sql.ansi.enabled={default_ansi}\n")
    print("| transform | bad input | ANSI off (Spark 3.5 default) | ANSI on (Spark 4 default) |")
    print("|---|---|---|---|")
    changed = 0
    for where, bad_input, produce in cases(spark):
        off, on = outcome(spark, False, produce), outcome(spark, True, produce)
        changed += off != on
        print(f"| {where} | {bad_input} | {off} | {on} |".replace("\n", " "), flush=True)
    print(f"\n{changed} of {len(cases(spark))} cases behave differently with ANSI on")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
