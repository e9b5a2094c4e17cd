"""Generated data matches the real sources' schemas and has a realistic shape."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from include import sample_data

TLC_2025 = [
    ("VendorID", pa.int32()), ("tpep_pickup_datetime", pa.timestamp("us")), ("tpep_dropoff_datetime", pa.timestamp("us")),
    ("passenger_count", pa.int64()), ("trip_distance", pa.float64()), ("RatecodeID", pa.int64()),
    ("store_and_fwd_flag", pa.string()), ("PULocationID", pa.int32()), ("DOLocationID", pa.int32()),
    ("payment_type", pa.int64()), ("fare_amount", pa.float64()), ("extra", pa.float64()), ("mta_tax", pa.float64()),
    ("tip_amount", pa.float64()), ("tolls_amount", pa.float64()), ("improvement_surcharge", pa.float64()),
    ("total_amount", pa.float64()), ("congestion_surcharge", pa.float64()), ("Airport_fee", pa.float64()),
    ("cbd_congestion_fee", pa.float64()),
]


def test_2025_parquet_has_the_exact_tlc_columns_and_types(tmp_path):
    path = sample_data.write_taxi_month(tmp_path, 2025, 3, 5_000)
    assert path.name == "yellow_tripdata_2025-03.parquet"
    assert pq.read_schema(path) == pa.schema(TLC_2025)


def test_schema_drifts_across_years_like_the_real_files():
    assert "cbd_congestion_fee" not in sample_data.taxi_schema(2024).names
    assert "Airport_fee" in sample_data.taxi_schema(2024).names
    assert "airport_fee" in sample_data.taxi_schema(2023).names


def test_generation_is_deterministic_by_seed():
    assert sample_data.generate_taxi_month(2025, 1, 2_000, seed=7).equals(sample_data.generate_taxi_month(2025, 1, 2_000, seed=7))
    assert not sample_data.generate_taxi_month(2025, 1, 2_000, seed=7).equals(sample_data.generate_taxi_month(2025, 1, 2_000, seed=8))


def test_shape_is_realistic():
    table = sample_data.generate_taxi_month(2025, 1, 200_000)
    pickups = table["tpep_pickup_datetime"]
    assert pc.all(pc.equal(pc.year(pickups), 2025)).as_py() and pc.all(pc.equal(pc.month(pickups), 1)).as_py()
    zone_counts = np.bincount(table["PULocationID"].to_numpy(), minlength=266)
    assert 250 <= np.count_nonzero(zone_counts) <= 265
    top10_share = np.sort(zone_counts)[-10:].sum() / zone_counts.sum()
    assert top10_share > 0.3, "popularity must be skewed"
    hours = np.bincount(pc.hour(pickups).to_numpy(), minlength=24)
    assert hours[18] > 4 * hours[4], "evening peak vs night trough"
    weekdays = np.bincount(pc.day_of_week(pickups).to_numpy(), minlength=7)
    assert weekdays[4] / 5 > weekdays[6] / 4, "Fridays busier than Sundays (January 2025 has 5 Fridays, 4 Sundays)"
    assert pc.all(pc.greater(table["tpep_dropoff_datetime"], pickups)).as_py()
    total = pc.sum(table["total_amount"]).as_py() / table.num_rows
    assert 15 < total < 60


def test_noaa_csv_has_no_header_37_fields_and_missing_sentinel():
    lines = sample_data.weather_month_csv("tmax", 2024, 2, last_day=None).splitlines()
    assert len(lines) == len(sample_data.NYC_COUNTIES) + len(sample_data.OTHER_COUNTIES)
    fields = lines[0].split(",")
    assert len(fields) == 6 + 31
    assert fields[:6] == ["cty", "36005", "Bronx County", "2024", "02", "tmax"]
    assert fields[6 + 29:] == ["-999.99", "-999.99"], "Feb 2024 has 29 days"
    assert "-999.99" not in fields[6:6 + 29]
