"""Generated data matches the real sources' schemas and has a realistic shape."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from include.sources import sample_data

TLC_2025 = [
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
    ("Airport_fee", pa.float64()),
    ("cbd_congestion_fee", pa.float64()),
]


def test_2025_parquet_has_the_exact_tlc_columns_and_types(tmp_path):
    path = sample_data.write_taxi_month(tmp_path, 2025, 3, 5_000)
    assert path.name == "yellow_tripdata_2025-03.parquet"
    assert pq.read_schema(path) == pa.schema(TLC_2025)


def test_schema_drifts_across_months_like_the_real_files():
    assert "cbd_congestion_fee" not in sample_data.taxi_schema(2024, 12).names
    assert "cbd_congestion_fee" in sample_data.taxi_schema(2025, 1).names
    # Airport_fee and int32 ids arrive together in 2023-02, not with the new year.
    jan, feb = sample_data.taxi_schema(2023, 1), sample_data.taxi_schema(2023, 2)
    assert "airport_fee" in jan.names and "Airport_fee" not in jan.names
    assert "Airport_fee" in feb.names and "airport_fee" not in feb.names
    assert [jan.field(c).type for c in ("VendorID", "PULocationID", "DOLocationID")] == [pa.int64()] * 3
    assert [feb.field(c).type for c in ("VendorID", "PULocationID", "DOLocationID")] == [pa.int32()] * 3
    # 2018-07..2023-01: passenger_count and RatecodeID stored as double, int64 before and after.
    for year, month, expected in [
        (2018, 6, pa.int64()),
        (2018, 7, pa.float64()),
        (2023, 1, pa.float64()),
        (2023, 2, pa.int64()),
    ]:
        schema = sample_data.taxi_schema(year, month)
        assert schema.field("passenger_count").type == schema.field("RatecodeID").type == expected, (year, month)


def test_every_era_is_written_exactly_with_its_own_columns(tmp_path):
    expected_first_columns = {
        "2009": ["vendor_name", "Trip_Pickup_DateTime", "Trip_Dropoff_DateTime", "Passenger_Count"],
        "2010": ["vendor_id", "pickup_datetime", "dropoff_datetime", "passenger_count"],
    }
    for era in sample_data.TAXI_ERAS:
        year, month = map(int, era.first_month.split("-"))
        path = sample_data.write_taxi_month(tmp_path, year, month, 500)
        written = pq.read_schema(path)
        assert written.remove_metadata() == sample_data.taxi_schema(year, month), era.name
        assert pq.read_metadata(path).num_rows == 500
        if era.name in expected_first_columns:
            assert written.names[:4] == expected_first_columns[era.name]
            assert not era.ingestible and "PULocationID" not in written.names
            pickups = pq.read_table(path).column(1).to_pylist()
            assert all(len(p) == 19 and p.startswith(era.first_month) for p in pickups), (
                "text times, in the file's month"
            )
        else:
            assert era.ingestible and written.names[:2] == ["VendorID", "tpep_pickup_datetime"]
    assert sample_data.FIRST_INGESTIBLE_MONTH == "2011-01"


def test_never_filled_fee_columns_are_null_typed_in_the_months_the_real_footers_show():
    assert sample_data.taxi_schema(2011, 1).field("airport_fee").type == pa.float64()
    assert sample_data.taxi_schema(2011, 2).field("airport_fee").type == pa.null()
    assert sample_data.taxi_schema(2014, 8).field("improvement_surcharge").type == pa.null()
    assert sample_data.taxi_schema(2019, 1).field("congestion_surcharge").type == pa.float64()
    assert sample_data.taxi_schema(2020, 10).field("airport_fee").type == pa.null()
    assert sample_data.taxi_schema(2020, 11).field("airport_fee").type == pa.float64()
    table = sample_data.generate_taxi_month(2016, 5, 300)
    assert table["airport_fee"].null_count == 300 and table["congestion_surcharge"].null_count == 300


def test_2010_february_and_march_carry_the_pandas_index_and_an_integer_rate_code():
    schema = sample_data.taxi_schema(2010, 2)
    assert schema.names[-1] == "__index_level_0__" and schema.field("rate_code").type == pa.int64()
    assert sample_data.taxi_schema(2010, 4).field("rate_code").type == pa.string()


def test_nanosecond_and_zoned_timestamps_on_request():
    table = sample_data.generate_taxi_month(2024, 3, 100, timestamp_unit="ns", time_zone="America/New_York")
    assert table.schema.field("tpep_pickup_datetime").type == pa.timestamp("ns", "America/New_York")
    naive = sample_data.generate_taxi_month(2024, 3, 100)
    local = pc.local_timestamp(table["tpep_pickup_datetime"]).cast(pa.timestamp("us"))
    # Same New York wall-clock times (but the hour DST skips, which a zoned time cannot show).
    assert sum(a != b for a, b in zip(local.to_pylist(), naive["tpep_pickup_datetime"].to_pylist(), strict=True)) <= 2


def test_generation_is_deterministic_by_seed():
    assert sample_data.generate_taxi_month(2025, 1, 2_000, seed=7).equals(
        sample_data.generate_taxi_month(2025, 1, 2_000, seed=7)
    )
    assert not sample_data.generate_taxi_month(2025, 1, 2_000, seed=7).equals(
        sample_data.generate_taxi_month(2025, 1, 2_000, seed=8)
    )


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
    assert fields[6 + 29 :] == ["-999.99", "-999.99"], "Feb 2024 has 29 days"
    assert "-999.99" not in fields[6 : 6 + 29]
