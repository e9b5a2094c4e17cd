"""Sample data byte-compatible with the real sources, deterministic by seed.

- TLC yellow-taxi monthly parquet, with the real column names and Arrow types of the month asked for: every schema
  era TLC has published (``TAXI_ERAS``, 2009-01 to today), including the months whose never-filled fee columns are
  stored as Arrow ``null`` (physical INT32) instead of double. Optionally with nanosecond or zoned timestamps, as
  files users write themselves with pandas often are.
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
import pyarrow.compute as pc
import pyarrow.parquet as pq

from include.core.contract import NYC_COUNTIES, WEATHER_ELEMENTS
from include.core.contract import WEATHER_MISSING_VALUE as MISSING

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
    [
        0.55,
        0.38,
        0.26,
        0.18,
        0.16,
        0.22,
        0.45,
        0.80,
        1.05,
        1.05,
        1.00,
        1.05,
        1.10,
        1.10,
        1.15,
        1.20,
        1.25,
        1.35,
        1.45,
        1.40,
        1.30,
        1.20,
        1.05,
        0.80,
    ]
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


@dataclass(frozen=True)
class TaxiEra:
    """A span of months whose TLC yellow-taxi files share one layout (names and Arrow types, as in the footers)."""

    name: str
    first_month: str  # YYYY-MM, inclusive
    last_month: str | None  # YYYY-MM, inclusive; None: still current
    fields: tuple[tuple[str, pa.DataType], ...]
    ingestible: bool = True

    def covers(self, month: str) -> bool:
        return self.first_month <= month and (self.last_month is None or month <= self.last_month)


_TPEP_2011 = (
    ("VendorID", pa.int64()),
    ("tpep_pickup_datetime", pa.timestamp("us")),
    ("tpep_dropoff_datetime", pa.timestamp("us")),
    ("passenger_count", pa.int64()),
    ("trip_distance", pa.float64()),
    ("RatecodeID", pa.int64()),
    ("store_and_fwd_flag", pa.string()),
    ("PULocationID", pa.int64()),
    ("DOLocationID", pa.int64()),
    ("payment_type", pa.int64()),
    ("fare_amount", pa.float64()),
    ("extra", pa.float64()),
    ("mta_tax", pa.float64()),
    ("tip_amount", pa.float64()),
    ("tolls_amount", pa.float64()),
    ("improvement_surcharge", pa.float64()),
    ("total_amount", pa.float64()),
    ("congestion_surcharge", pa.float64()),
    ("airport_fee", pa.float64()),
)


def _replace_types(fields, **types) -> tuple[tuple[str, pa.DataType], ...]:
    return tuple((name, types.get(name, dtype)) for name, dtype in fields)


_TPEP_2018_07 = _replace_types(_TPEP_2011, passenger_count=pa.float64(), RatecodeID=pa.float64())
_TPEP_2023_02 = tuple(
    ("Airport_fee" if name == "airport_fee" else name, dtype)
    for name, dtype in _replace_types(_TPEP_2011, VendorID=pa.int32(), PULocationID=pa.int32(), DOLocationID=pa.int32())
)
# The eras of the yellow-taxi files TLC publishes, from the files' own footers (docs/pipeline.md "TLC schema eras").
TAXI_ERAS: tuple[TaxiEra, ...] = (
    TaxiEra(
        "2009",
        "2009-01",
        "2009-12",
        (
            ("vendor_name", pa.string()),
            ("Trip_Pickup_DateTime", pa.string()),
            ("Trip_Dropoff_DateTime", pa.string()),
            ("Passenger_Count", pa.int64()),
            ("Trip_Distance", pa.float64()),
            ("Start_Lon", pa.float64()),
            ("Start_Lat", pa.float64()),
            ("Rate_Code", pa.float64()),
            ("store_and_forward", pa.float64()),
            ("End_Lon", pa.float64()),
            ("End_Lat", pa.float64()),
            ("Payment_Type", pa.string()),
            ("Fare_Amt", pa.float64()),
            ("surcharge", pa.float64()),
            ("mta_tax", pa.float64()),
            ("Tip_Amt", pa.float64()),
            ("Tolls_Amt", pa.float64()),
            ("Total_Amt", pa.float64()),
        ),
        ingestible=False,
    ),
    TaxiEra(
        "2010",
        "2010-01",
        "2010-12",
        (
            ("vendor_id", pa.string()),
            ("pickup_datetime", pa.string()),
            ("dropoff_datetime", pa.string()),
            ("passenger_count", pa.int64()),
            ("trip_distance", pa.float64()),
            ("pickup_longitude", pa.float64()),
            ("pickup_latitude", pa.float64()),
            ("rate_code", pa.string()),
            ("store_and_fwd_flag", pa.string()),
            ("dropoff_longitude", pa.float64()),
            ("dropoff_latitude", pa.float64()),
            ("payment_type", pa.string()),
            ("fare_amount", pa.float64()),
            ("surcharge", pa.float64()),
            ("mta_tax", pa.float64()),
            ("tip_amount", pa.float64()),
            ("tolls_amount", pa.float64()),
            ("total_amount", pa.float64()),
        ),
        ingestible=False,
    ),
    TaxiEra("2011-01..2018-06", "2011-01", "2018-06", _TPEP_2011),
    TaxiEra("2018-07..2023-01", "2018-07", "2023-01", _TPEP_2018_07),
    TaxiEra("2023-02..2024-12", "2023-02", "2024-12", _TPEP_2023_02),
    TaxiEra("2025-01..", "2025-01", None, (*_TPEP_2023_02, ("cbd_congestion_fee", pa.float64()))),
)
FIRST_INGESTIBLE_MONTH = next(era.first_month for era in TAXI_ERAS if era.ingestible)


def _months(first: str, last: str) -> set[str]:
    (year, month), (last_year, last_month) = map(int, first.split("-")), map(int, last.split("-"))
    months = set()
    while (year, month) <= (last_year, last_month):
        months.add(f"{year:04d}-{month:02d}")
        year, month = year + (month == 12), month % 12 + 1
    return months


# Months whose never-filled fee column was written as Arrow `null` (physical INT32, no values) instead of double.
_NULL_TYPED = {
    "congestion_surcharge": (
        {"2011-02"}
        | _months("2011-04", "2012-11")
        | _months("2013-01", "2013-04")
        | _months("2013-06", "2013-12")
        | _months("2014-02", "2017-12")
        | _months("2018-02", "2018-05")
        | {"2018-07", "2018-08", "2018-10", "2018-12"}
    ),
    "airport_fee": _months("2011-02", "2017-12") | _months("2018-02", "2020-07") | {"2020-10"},
    "improvement_surcharge": {"2014-08"},
}


def taxi_era(year: int, month: int) -> TaxiEra:
    key = f"{year:04d}-{month:02d}"
    for era in TAXI_ERAS:
        if era.covers(key):
            return era
    raise ValueError(f"TLC publishes yellow-taxi files from {TAXI_ERAS[0].first_month}; there is no file for {key}")


def taxi_schema(year: int, month: int = 1) -> pa.Schema:
    """The exact Arrow schema of the TLC file of that month."""
    key = f"{year:04d}-{month:02d}"
    era = taxi_era(year, month)
    if era.name == "2010" and key in ("2010-02", "2010-03"):
        fields = [*_replace_types(era.fields, rate_code=pa.int64()), ("__index_level_0__", pa.int64())]
    else:
        fields = [(name, pa.null() if key in _NULL_TYPED.get(name, ()) else dtype) for name, dtype in era.fields]
    return pa.schema(fields)


def _trips(year: int, month: int, rows: int, seed: int) -> dict[str, np.ndarray]:
    """One month of trips as NumPy columns (times in microseconds of New York wall-clock time), before any layout."""
    rng = np.random.default_rng(_seed("taxi", year, month, seed))
    start, end = month_bounds(year, month)
    hours = int((end - start).total_seconds() // 3600)
    hour_starts = [start + timedelta(hours=h) for h in range(hours)]
    rain_boost = {
        d: 1.0 + min(daily_weather(d, seed=seed).prcp_mm, 30.0) / 60.0 for d in {h.date() for h in hour_starts}
    }
    hour_weights = np.array(
        [HOURLY_PROFILE[h.hour] * WEEKDAY_PROFILE[h.weekday()] * rain_boost[h.date()] for h in hour_starts]
    )
    hour_index = rng.choice(hours, size=rows, p=hour_weights / hour_weights.sum())
    start_us = int(np.datetime64(start, "us").astype(np.int64))
    pickup_us = start_us + hour_index.astype(np.int64) * 3_600_000_000 + rng.integers(0, 3_600_000_000, rows)

    zone_p = _zone_weights(seed)
    pickup_zone = rng.choice(NUM_ZONES + 1, size=rows, p=zone_p)
    dropoff_zone = rng.choice(NUM_ZONES + 1, size=rows, p=zone_p)

    distance = np.round(np.clip(rng.lognormal(0.7, 0.75, rows), 0.1, 60.0), 2)
    speed_mph = np.clip(rng.normal(11.0, 3.0, rows), 3.0, 40.0)
    duration_us = (distance / speed_mph * 3600 * 1_000_000).astype(np.int64) + 60_000_000

    payment = rng.choice([1, 2, 3, 4], size=rows, p=[0.78, 0.19, 0.02, 0.01])
    fare = np.round(3.0 + 2.5 * distance + 0.7 * duration_us / 60_000_000, 2)
    extra = rng.choice([0.0, 1.0, 2.5], size=rows, p=[0.5, 0.3, 0.2])
    mta_tax = np.full(rows, 0.5)
    tip = np.where(payment == 1, np.round(fare * rng.uniform(0.1, 0.3, rows), 2), 0.0)
    tolls = np.where(rng.random(rows) < 0.05, 6.94, 0.0)
    # Fees exist from when they were introduced: improvement 2015-01, congestion 2019-02, airport 2021, CBD 2025-01.
    key = f"{year:04d}-{month:02d}"
    improvement = np.full(rows, 1.0 if key >= "2015-01" else 0.0)
    congestion = np.where(rng.random(rows) < 0.9, 2.5, 0.0) if key >= "2019-02" else np.zeros(rows)
    airport = np.where(rng.random(rows) < 0.08, 1.75, 0.0) if key >= "2021-01" else np.zeros(rows)
    cbd = np.where(rng.random(rows) < 0.6, 0.75, 0.0) if key >= "2025-01" else np.zeros(rows)
    total = np.round(fare + extra + mta_tax + tip + tolls + improvement + congestion + airport + cbd, 2)
    # About 2% of real trips come from the street-hail app path with unknown passenger count and rate code.
    unknown = rng.random(rows) < 0.02
    passenger = np.where(unknown, 0, rng.choice([1, 2, 3, 4, 5, 6], size=rows, p=[0.72, 0.15, 0.05, 0.03, 0.03, 0.02]))
    return {
        "vendor": rng.choice([1, 2], size=rows, p=[0.3, 0.7]),
        "pickup_us": pickup_us,
        "dropoff_us": pickup_us + duration_us,
        "passenger": passenger,
        "unknown": unknown,
        "distance": distance,
        "rate_code": np.where(rng.random(rows) < 0.97, 1, 2),
        "store_and_fwd": np.where(rng.random(rows) < 0.995, "N", "Y").astype(object),
        "pickup_zone": pickup_zone,
        "dropoff_zone": dropoff_zone,
        "pickup_lon": np.round(-73.98 + rng.normal(0, 0.03, rows), 6),
        "pickup_lat": np.round(40.75 + rng.normal(0, 0.03, rows), 6),
        "dropoff_lon": np.round(-73.98 + rng.normal(0, 0.03, rows), 6),
        "dropoff_lat": np.round(40.75 + rng.normal(0, 0.03, rows), 6),
        "payment": payment,
        "fare": fare,
        "extra": extra,
        "mta_tax": mta_tax,
        "tip": tip,
        "tolls": tolls,
        "improvement": improvement,
        "total": total,
        "congestion": congestion,
        "airport": airport,
        "cbd": cbd,
    }


def _tpep_columns(trips: dict[str, np.ndarray], key: str) -> dict[str, pa.Array]:
    """The 2011+ layout's columns by their canonical (2025) names; fees not yet introduced are null."""
    unknown = trips["unknown"]
    return {
        "VendorID": pa.array(trips["vendor"]),
        "tpep_pickup_datetime": pa.array(trips["pickup_us"], pa.timestamp("us")),
        "tpep_dropoff_datetime": pa.array(trips["dropoff_us"], pa.timestamp("us")),
        "passenger_count": pa.array(trips["passenger"], mask=unknown),
        "trip_distance": pa.array(trips["distance"]),
        "RatecodeID": pa.array(trips["rate_code"], mask=unknown),
        "store_and_fwd_flag": pa.array(trips["store_and_fwd"], pa.string(), mask=unknown),
        "PULocationID": pa.array(trips["pickup_zone"]),
        "DOLocationID": pa.array(trips["dropoff_zone"]),
        "payment_type": pa.array(trips["payment"]),
        "fare_amount": pa.array(trips["fare"]),
        "extra": pa.array(trips["extra"]),
        "mta_tax": pa.array(trips["mta_tax"]),
        "tip_amount": pa.array(trips["tip"]),
        "tolls_amount": pa.array(trips["tolls"]),
        "improvement_surcharge": pa.array(trips["improvement"]),
        "total_amount": pa.array(trips["total"]),
        "congestion_surcharge": pa.array(trips["congestion"], mask=unknown | (key < "2019-02")),
        "Airport_fee": pa.array(trips["airport"], mask=unknown | (key < "2021-01")),
        "cbd_congestion_fee": pa.array(trips["cbd"]),
    }


def _text_times(microseconds: np.ndarray) -> pa.Array:
    """``YYYY-MM-DD HH:MM:SS``, as the 2009 and 2010 files store times."""
    return pa.array(
        np.char.replace(np.datetime_as_string(microseconds.astype("datetime64[us]"), unit="s"), "T", " ").astype(
            object
        ),
        pa.string(),
    )


def _legacy_columns(trips: dict[str, np.ndarray], era: TaxiEra, key: str) -> list[pa.Array]:
    """2009 and 2010 layouts: vendor codes and payment as text, times as text, coordinates instead of zones."""
    rows = len(trips["pickup_us"])
    vendor = np.where(trips["vendor"] == 1, "CMT", "VTS").astype(object)
    pickup, dropoff = _text_times(trips["pickup_us"]), _text_times(trips["dropoff_us"])
    if era.name == "2009":
        payment = np.where(
            trips["payment"] == 1, "Credit", np.where(trips["payment"] == 2, "CASH", "No Charge")
        ).astype(object)
        rate_code, store = pa.nulls(rows, pa.float64()), pa.nulls(rows, pa.float64())
    else:
        payment = np.where(trips["payment"] == 1, "CRD", np.where(trips["payment"] == 2, "CSH", "NOC")).astype(object)
        rate_code = pa.array(trips["rate_code"].astype(str).astype(object), pa.string())
        store = pa.array(trips["store_and_fwd"], pa.string())
    surcharge = trips["extra"]
    total = np.round(trips["fare"] + surcharge + trips["mta_tax"] + trips["tip"] + trips["tolls"], 2)
    columns = [
        pa.array(vendor, pa.string()),
        pickup,
        dropoff,
        pa.array(trips["passenger"]),
        pa.array(trips["distance"]),
        pa.array(trips["pickup_lon"]),
        pa.array(trips["pickup_lat"]),
        rate_code,
        store,
        pa.array(trips["dropoff_lon"]),
        pa.array(trips["dropoff_lat"]),
        pa.array(payment, pa.string()),
        pa.array(trips["fare"]),
        pa.array(surcharge),
        pa.array(trips["mta_tax"]),
        pa.array(trips["tip"]),
        pa.array(trips["tolls"]),
        pa.array(total),
    ]
    if key in ("2010-02", "2010-03"):
        columns[7] = pa.array(trips["rate_code"].astype(np.int64))
        columns.append(pa.array(np.arange(rows, dtype=np.int64)))
    return columns


def generate_taxi_month(
    year: int, month: int, rows: int, seed: int = 42, *, timestamp_unit: str = "us", time_zone: str | None = None
) -> pa.Table:
    """One month of yellow-taxi trips in that month's exact TLC layout, with daily, weekly and weather seasonality.

    Times are New York wall-clock times, like TLC's. ``timestamp_unit="ns"`` stores them with nanosecond precision;
    ``time_zone`` (e.g. ``America/New_York``) stores them as zoned instants of that wall-clock time.
    """
    key = f"{year:04d}-{month:02d}"
    era = taxi_era(year, month)
    schema = taxi_schema(year, month)
    trips = _trips(year, month, rows, seed)
    if not era.ingestible:
        return pa.Table.from_arrays(_legacy_columns(trips, era, key), schema=schema)
    by_canonical_name = _tpep_columns(trips, key)
    columns = []
    for field in schema:
        canonical = "Airport_fee" if field.name == "airport_fee" else field.name
        source = by_canonical_name[canonical]
        if pa.types.is_null(field.type):
            columns.append(pa.nulls(rows))
        elif pa.types.is_timestamp(field.type):
            columns.append(source)
        else:
            columns.append(source.cast(field.type))
    table = pa.Table.from_arrays(columns, schema=schema).sort_by("tpep_pickup_datetime")
    if timestamp_unit != "us" or time_zone is not None:
        table = _with_timestamp_layout(table, timestamp_unit, time_zone)
    return table


def _with_timestamp_layout(table: pa.Table, unit: str, time_zone: str | None) -> pa.Table:
    for name in ("tpep_pickup_datetime", "tpep_dropoff_datetime"):
        index = table.schema.get_field_index(name)
        column = table[name].cast(pa.timestamp(unit))
        if time_zone is not None:
            column = pc.assume_timezone(column, time_zone, ambiguous="earliest", nonexistent="latest")
        table = table.set_column(index, name, column)
    return table


def taxi_file_name(year: int, month: int) -> str:
    return f"yellow_tripdata_{year:04d}-{month:02d}.parquet"


def write_taxi_month(
    folder: Path,
    year: int,
    month: int,
    rows: int,
    seed: int = 42,
    *,
    timestamp_unit: str = "us",
    time_zone: str | None = None,
) -> Path:
    """Write the month's file; ``timestamp_unit="ns"`` and ``time_zone`` give files like pandas' ``to_parquet`` writes."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / taxi_file_name(year, month)
    table = generate_taxi_month(year, month, rows, seed, timestamp_unit=timestamp_unit, time_zone=time_zone)
    pq.write_table(table, path, compression="zstd")
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
            values.append(
                {"prcp": weather.prcp_mm, "tavg": weather.tavg_c, "tmin": weather.tmin_c, "tmax": weather.tmax_c}[
                    element
                ]
            )
        lines.append(
            ",".join(["cty", code, name, f"{year:04d}", f"{month:02d}", element, *(f"{v:.2f}" for v in values)])
        )
    return "\n".join(lines) + "\n"


def write_weather_month(folder: Path, year: int, month: int, last_day: int | None = None, seed: int = 42) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for element in WEATHER_ELEMENTS:
        path = folder / weather_file_name(element, year, month)
        path.write_text(weather_month_csv(element, year, month, last_day, seed))
        written.append(path)
    return written
