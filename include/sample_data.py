"""Sample data byte-compatible with the real sources, deterministic by seed.

- TLC yellow-taxi monthly parquet, with the real column names and Arrow types of the year asked for (schema drift
  included: ``airport_fee`` until 2023, ``Airport_fee`` from 2024, ``cbd_congestion_fee`` from 2025).
- NOAA nClimGrid daily county CSV: no header, ``-999.99`` for missing, one file per element and month.

Both draw on the same synthetic daily weather, and rain raises taxi demand, so a weather-aware model has signal.
"""

from __future__ import annotations

import calendar
import zlib
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from include.contract import NYC_COUNTIES, WEATHER_ELEMENTS
from include.contract import WEATHER_MISSING_VALUE as MISSING

NUM_ZONES = 265
ACTIVE_ZONES = 260
OTHER_COUNTIES = {
    "34003": "Bergen County",
    "34013": "Essex County",
    "34017": "Hudson County",
    "36059": "Nassau County",
    "36119": "Westchester County",
}
# Relative demand by hour of day (0..23) and by weekday (Monday..Sunday).
HOURLY_PROFILE = np.array(
    [0.55, 0.38, 0.26, 0.18, 0.16, 0.22, 0.45, 0.80, 1.05, 1.05, 1.00, 1.05,
     1.10, 1.10, 1.15, 1.20, 1.25, 1.35, 1.45, 1.40, 1.30, 1.20, 1.05, 0.80]
)
WEEKDAY_PROFILE = np.array([0.90, 0.97, 1.02, 1.08, 1.12, 1.05, 0.86])


def month_bounds(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1)
    end = datetime(year + (month == 12), month % 12 + 1, 1)
    return start, end


def _seed(*parts: object) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


@dataclass(frozen=True)
class DailyWeather:
    prcp_mm: float
    tavg_c: float
    tmin_c: float
    tmax_c: float


def daily_weather(day: date, region_code: str = "36061", seed: int = 42) -> DailyWeather:
    rng = np.random.default_rng(_seed("weather", day.isoformat(), seed))
    seasonal = 12.0 - 11.0 * np.cos(2 * np.pi * (day.timetuple().tm_yday - 20) / 365.25)
    tavg = seasonal + rng.normal(0, 3.0)
    rainy = rng.random() < 0.3
    prcp = float(rng.gamma(1.5, 6.0)) if rainy else 0.0
    county_offset = (zlib.crc32(region_code.encode()) % 100) / 100.0 - 0.5
    spread = 4.0 + rng.random() * 3.0
    return DailyWeather(
        prcp_mm=round(max(prcp + county_offset * prcp * 0.2, 0.0), 2),
        tavg_c=round(tavg + county_offset, 2),
        tmin_c=round(tavg + county_offset - spread, 2),
        tmax_c=round(tavg + county_offset + spread, 2),
    )


def _zone_weights(seed: int) -> np.ndarray:
    rng = np.random.default_rng(_seed("zones", seed))
    zones = rng.permutation(np.arange(1, NUM_ZONES + 1))
    active = [z for z in zones if z != 10][: ACTIVE_ZONES - 1]
    active.insert(12, 10)  # zone 10 is the README's example: keep it well used
    weights = np.zeros(NUM_ZONES + 1)
    ranks = np.arange(1, ACTIVE_ZONES + 1)
    weights[np.array(active)] = 1.0 / ranks**1.1
    return weights / weights.sum()


def taxi_schema(year: int) -> pa.Schema:
    airport_fee = "airport_fee" if year <= 2023 else "Airport_fee"
    fields = [
        ("VendorID", pa.int32()),
        ("tpep_pickup_datetime", pa.timestamp("us")),
        ("tpep_dropoff_datetime", pa.timestamp("us")),
        ("passenger_count", pa.int64()),
        ("trip_distance", pa.float64()),
        ("RatecodeID", pa.int64()),
        ("store_and_fwd_flag", pa.string()),
        ("PULocationID", pa.int32()),
        ("DOLocationID", pa.int32()),
        ("payment_type", pa.int64()),
        ("fare_amount", pa.float64()),
        ("extra", pa.float64()),
        ("mta_tax", pa.float64()),
        ("tip_amount", pa.float64()),
        ("tolls_amount", pa.float64()),
        ("improvement_surcharge", pa.float64()),
        ("total_amount", pa.float64()),
        ("congestion_surcharge", pa.float64()),
        (airport_fee, pa.float64()),
    ]
    if year >= 2025:
        fields.append(("cbd_congestion_fee", pa.float64()))
    return pa.schema(fields)


def generate_taxi_month(year: int, month: int, rows: int, seed: int = 42) -> pa.Table:
    """One month of yellow-taxi trips with daily, weekly and weather-driven seasonality."""
    rng = np.random.default_rng(_seed("taxi", year, month, seed))
    start, end = month_bounds(year, month)
    hours = int((end - start).total_seconds() // 3600)
    hour_starts = [start + timedelta(hours=h) for h in range(hours)]
    rain_boost = {d: 1.0 + min(daily_weather(d, seed=seed).prcp_mm, 30.0) / 60.0 for d in {h.date() for h in hour_starts}}
    hour_weights = np.array(
        [HOURLY_PROFILE[h.hour] * WEEKDAY_PROFILE[h.weekday()] * rain_boost[h.date()] for h in hour_starts]
    )
    hour_index = rng.choice(hours, size=rows, p=hour_weights / hour_weights.sum())
    start_us = int(np.datetime64(start, "us").astype(np.int64))
    pickup_us = start_us + hour_index.astype(np.int64) * 3_600_000_000 + rng.integers(0, 3_600_000_000, rows)

    zone_p = _zone_weights(seed)
    pickup_zone = rng.choice(NUM_ZONES + 1, size=rows, p=zone_p).astype(np.int32)
    dropoff_zone = rng.choice(NUM_ZONES + 1, size=rows, p=zone_p).astype(np.int32)

    distance = np.round(np.clip(rng.lognormal(0.7, 0.75, rows), 0.1, 60.0), 2)
    speed_mph = np.clip(rng.normal(11.0, 3.0, rows), 3.0, 40.0)
    duration_us = (distance / speed_mph * 3600 * 1_000_000).astype(np.int64) + 60_000_000
    dropoff_us = pickup_us + duration_us

    payment = rng.choice([1, 2, 3, 4], size=rows, p=[0.78, 0.19, 0.02, 0.01]).astype(np.int64)
    fare = np.round(3.0 + 2.5 * distance + 0.7 * duration_us / 60_000_000, 2)
    extra = rng.choice([0.0, 1.0, 2.5], size=rows, p=[0.5, 0.3, 0.2])
    mta_tax = np.full(rows, 0.5)
    tip = np.where(payment == 1, np.round(fare * rng.uniform(0.1, 0.3, rows), 2), 0.0)
    tolls = np.where(rng.random(rows) < 0.05, 6.94, 0.0)
    improvement = np.full(rows, 1.0)
    congestion = np.where(rng.random(rows) < 0.9, 2.5, 0.0)
    airport = np.where(rng.random(rows) < 0.08, 1.75, 0.0)
    cbd = np.where(rng.random(rows) < 0.6, 0.75, 0.0) if year >= 2025 else np.zeros(rows)
    total = np.round(fare + extra + mta_tax + tip + tolls + improvement + congestion + airport + cbd, 2)

    # About 2% of real trips come from the street-hail app path with unknown passenger count and rate code.
    unknown = rng.random(rows) < 0.02
    passenger = np.where(unknown, 0, rng.choice([1, 2, 3, 4, 5, 6], size=rows, p=[0.72, 0.15, 0.05, 0.03, 0.03, 0.02]))
    schema = taxi_schema(year)
    columns = {
        "VendorID": pa.array(rng.choice([1, 2], size=rows, p=[0.3, 0.7]).astype(np.int32)),
        "tpep_pickup_datetime": pa.array(pickup_us, pa.timestamp("us")),
        "tpep_dropoff_datetime": pa.array(dropoff_us, pa.timestamp("us")),
        "passenger_count": pa.array(passenger.astype(np.int64), mask=unknown),
        "trip_distance": pa.array(distance),
        "RatecodeID": pa.array(np.where(rng.random(rows) < 0.97, 1, 2).astype(np.int64), mask=unknown),
        "store_and_fwd_flag": pa.array(np.where(rng.random(rows) < 0.995, "N", "Y").astype(object), pa.string(), mask=unknown),
        "PULocationID": pa.array(pickup_zone),
        "DOLocationID": pa.array(dropoff_zone),
        "payment_type": pa.array(payment),
        "fare_amount": pa.array(fare),
        "extra": pa.array(extra),
        "mta_tax": pa.array(mta_tax),
        "tip_amount": pa.array(tip),
        "tolls_amount": pa.array(tolls),
        "improvement_surcharge": pa.array(improvement),
        "total_amount": pa.array(total),
        "congestion_surcharge": pa.array(congestion, mask=unknown),
        schema.field(18).name: pa.array(airport, mask=unknown),
    }
    if year >= 2025:
        columns["cbd_congestion_fee"] = pa.array(cbd)
    table = pa.table(columns, schema=schema)
    return table.sort_by("tpep_pickup_datetime")


def taxi_file_name(year: int, month: int) -> str:
    return f"yellow_tripdata_{year:04d}-{month:02d}.parquet"


def write_taxi_month(folder: Path, year: int, month: int, rows: int, seed: int = 42) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / taxi_file_name(year, month)
    pq.write_table(generate_taxi_month(year, month, rows, seed), path, compression="zstd")
    return path


def weather_file_name(element: str, year: int, month: int) -> str:
    return f"{element}-{year:04d}{month:02d}-cty-scaled.csv"


def weather_month_csv(element: str, year: int, month: int, last_day: int | None = None, seed: int = 42) -> str:
    """The county CSV of one element and month; days after ``last_day`` (not yet observed) are ``-999.99``."""
    days_in_month = calendar.monthrange(year, month)[1]
    observed_until = days_in_month if last_day is None else min(last_day, days_in_month)
    lines = []
    for code, name in {**NYC_COUNTIES, **OTHER_COUNTIES}.items():
        values = []
        for day in range(1, 32):
            if day > observed_until:
                values.append(MISSING)
                continue
            weather = daily_weather(date(year, month, day), code, seed)
            values.append({"prcp": weather.prcp_mm, "tavg": weather.tavg_c, "tmin": weather.tmin_c, "tmax": weather.tmax_c}[element])
        lines.append(",".join(["cty", code, name, f"{year:04d}", f"{month:02d}", element, *(f"{v:.2f}" for v in values)]))
    return "\n".join(lines) + "\n"


def write_weather_month(folder: Path, year: int, month: int, last_day: int | None = None, seed: int = 42) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for element in WEATHER_ELEMENTS:
        path = folder / weather_file_name(element, year, month)
        path.write_text(weather_month_csv(element, year, month, last_day, seed))
        written.append(path)
    return written
