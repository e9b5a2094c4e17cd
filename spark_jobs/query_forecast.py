"""The seed project's example query, on the local forecast table."""

from __future__ import annotations

import argparse

from include.core import naming
from spark_jobs.common.session import spark_session
from spark_jobs.common.tables import qualified

QUERY = """
SELECT format_string('%04d-%02d-%02d %02d:00:00', year, month, day, hour) AS datetime_hour,
       pulocationid,
       forecasted_total_rides
FROM {table}
WHERE pulocationid = {zone} AND model_name = '{model}'
ORDER BY datetime_hour
LIMIT 50
"""


def forecast_rows(spark, zone: int, model: str):
    return spark.sql(QUERY.format(table=qualified(naming.HOURLY_FORECAST), zone=int(zone), model=model)).collect()


def render(rows) -> str:
    lines = ["datetime_hour       | pulocationid | forecasted_total_rides", "-" * 60]
    lines += [f"{r.datetime_hour} | {r.pulocationid:>12} | {r.forecasted_total_rides:>22.2f}" for r in rows]
    lines.append(f"({len(rows)} rows)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--zone", type=int, default=10)
    parser.add_argument("--model", default="weather")
    args = parser.parse_args(argv)
    spark = spark_session("query_forecast")
    print(QUERY.format(table=qualified(naming.HOURLY_FORECAST), zone=args.zone, model=args.model).strip())
    print(render(forecast_rows(spark, args.zone, args.model)))
    spark.stop()


if __name__ == "__main__":
    main()
