"""Pure DataFrame -> DataFrame transforms of the taxi side."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from include.core.contract import TAXI_COLUMNS
from spark_jobs.common.runner import BadInputError

# Canonical schema (include/core/contract.py): the 2025 TLC file. Older years are normalised to it explicitly.
_SPARK_TYPES = {
    t.typeName(): t for t in (T.IntegerType(), T.LongType(), T.DoubleType(), T.StringType(), T.TimestampType())
}
CANONICAL_COLUMNS: list[tuple[str, T.DataType]] = [(name, _SPARK_TYPES[type_name]) for name, type_name in TAXI_COLUMNS]
# Renamed across years: old name -> canonical name. Matching is case-insensitive, like Spark's column resolution
# (``airport_fee`` until 2023-01, ``Airport_fee`` from 2023-02), so this lists renames beyond case only.
RENAMED: dict[str, str] = {}
# Absent in older years: filled with null and recorded as drift.
INTRODUCED_LATER = {"cbd_congestion_fee", "Airport_fee", "congestion_surcharge"}
REQUIRED = [name for name, _ in CANONICAL_COLUMNS if name not in INTRODUCED_LATER]
# Types a column may arrive as and be cast from without loss of meaning. IntegerType also covers the all-null fee
# columns some months store as Arrow `null` (physical INT32), which Spark reads as int.
COMPATIBLE_SOURCE_TYPES = {
    T.IntegerType: (T.IntegerType, T.LongType, T.ShortType),
    T.LongType: (T.LongType, T.IntegerType, T.DoubleType),
    T.DoubleType: (T.DoubleType, T.FloatType, T.IntegerType, T.LongType),
    T.TimestampType: (T.TimestampType, T.TimestampNTZType),
    T.StringType: (T.StringType,),
}
ROW_ID_COLUMNS = [name for name, _ in CANONICAL_COLUMNS]
# How unique_row_id is computed, kept as a table property of the staging and raw tables (ROW_ID_PROPERTY): a MERGE
# may only compare ids of one scheme. 128 bits: two xxhash64 chains (Spark's built-in, over the values' binary form,
# no string building) from different seeds, with a bitmask of the null columns first (Spark's hashes skip nulls).
# For n distinct rows the chance of any collision is about n^2 / 2^129: 1e-19 at ten billion rows. Not a
# cryptographic hash: TLC's rows are not chosen by an adversary.
ROW_ID_SCHEME = "xxhash64x2-nullmask-v1"
ROW_ID_PROPERTY = "pipeline.unique-row-id"
_SECOND_CHAIN_SEED = "unique_row_id:second-64-bits"
TIMESTAMP_COLUMNS = [name for name, dtype in CANONICAL_COLUMNS if isinstance(dtype, T.TimestampType)]
# TLC's times are New York wall-clock times. The tables hold that wall-clock time in `timestamp` columns read with
# the session time zone UTC (include/spark/submit.py): `2025-01-05 08:00:00` is 8 a.m. in New York.
SOURCE_TIME_ZONE = "America/New_York"
STORAGE_SESSION_TIME_ZONE = "UTC"
FIRST_SUPPORTED_MONTH = "2011-01"
# Columns only the 2009 (`vendor_name`, `Trip_Pickup_DateTime`, `Start_Lon`...) and 2010 (`vendor_id`,
# `pickup_datetime`, `pickup_longitude`...) files have, lower-cased.
LEGACY_2009_2010_COLUMNS = {
    "vendor_name",
    "trip_pickup_datetime",
    "start_lon",
    "start_lat",
    "vendor_id",
    "pickup_datetime",
    "pickup_longitude",
    "pickup_latitude",
}


class SchemaError(BadInputError):
    pass


class UnsupportedEraError(SchemaError):
    pass


def _canonical_names() -> dict[str, str]:
    names = {name.lower(): name for name, _ in CANONICAL_COLUMNS}
    names.update({old.lower(): new for old, new in RENAMED.items()})
    return names


def _matches(df: DataFrame, source: str) -> dict[str, str]:
    """Canonical name -> the file's column, matched case-insensitively. Raises on two columns differing by case."""
    canonical = _canonical_names()
    found: dict[str, str] = {}
    for column in df.columns:
        target = canonical.get(column.lower())
        if target is None:
            continue
        if target in found:
            raise SchemaError(
                f"{source}: columns {found[target]} and {column} both mean {target} (names differ only by case)"
            )
        found[target] = column
    return found


def schema_drift(df: DataFrame) -> dict:
    """How the file's columns differ from the canonical schema (renamed, missing-but-optional, unexpected)."""
    canonical = _canonical_names()
    present = {column: canonical.get(column.lower()) for column in df.columns}
    matched = {target for target in present.values() if target}
    return {
        "renamed": {column: target for column, target in present.items() if target and column != target},
        "filled_with_null": sorted(c for c in INTRODUCED_LATER if c not in matched),
        "unexpected": sorted(column for column, target in present.items() if target is None),
    }


def refuse_unsupported_era(df: DataFrame, source: str) -> None:
    """2009 and 2010 files have no pickup zone; every table downstream is keyed by it."""
    columns = {column.lower() for column in df.columns}
    legacy = sorted(columns & LEGACY_2009_2010_COLUMNS)
    if legacy and "pulocationid" not in columns:
        raise UnsupportedEraError(
            f"{source}: a TLC file of the 2009-2010 era (columns {', '.join(legacy)}: text pickup times and "
            f"coordinates instead of pickup zones) cannot be ingested: the raw, actuals and forecast tables are keyed "
            f"by pickup zone (PULocationID), which these files do not have. The first supported month is "
            f"{FIRST_SUPPORTED_MONTH}."
        )


def wall_clock_time(column, source_type: T.DataType, zoned: bool = False, nanoseconds: bool = False):
    """A timestamp column of the file as New York wall-clock time (see SOURCE_TIME_ZONE).

    - naive timestamps (Parquet ``isAdjustedToUTC=false``, Spark ``timestamp_ntz``) already are wall-clock times;
    - zoned timestamps (``isAdjustedToUTC=true``, Spark ``timestamp``) are instants, rendered in New York time;
    - nanosecond timestamps arrive as longs (``spark.sql.legacy.parquet.nanosAsLong``), truncated to microseconds,
      then treated as naive or zoned as the file's footer says.
    """
    if nanoseconds:
        if not isinstance(source_type, T.LongType):
            raise ValueError(f"a nanosecond timestamp must be read as long, not {source_type.simpleString()}")
        # Exact integer division (a double would lose the last microsecond at today's epoch values).
        instant_or_wall = F.timestamp_micros(F.floor(column.cast("decimal(20,0)") / F.lit(1000)).cast("long"))
        return F.from_utc_timestamp(instant_or_wall, SOURCE_TIME_ZONE) if zoned else instant_or_wall
    if isinstance(source_type, T.TimestampNTZType):
        return column.cast(T.TimestampType())
    return F.from_utc_timestamp(column, SOURCE_TIME_ZONE)


def normalize_taxi_schema(df: DataFrame, source: str, nanosecond_columns: dict[str, bool] | None = None) -> DataFrame:
    """Rename, fill and cast a TLC file of any supported era into the canonical schema; times to New York wall clock.

    ``nanosecond_columns`` maps a column the footer stores with nanosecond precision to whether it is zoned.
    Raises SchemaError (or UnsupportedEraError) naming the file.
    """
    session_zone = df.sparkSession.conf.get("spark.sql.session.timeZone")
    if session_zone != STORAGE_SESSION_TIME_ZONE:
        raise ValueError(
            f"spark.sql.session.timeZone is {session_zone}; the taxi tables are written in {STORAGE_SESSION_TIME_ZONE}"
        )
    refuse_unsupported_era(df, source)
    found = _matches(df, source)
    missing = [c for c in REQUIRED if c not in found]
    if missing:
        raise SchemaError(f"{source}: missing required column(s) {', '.join(missing)}")
    nanos = {column.lower(): zoned for column, zoned in (nanosecond_columns or {}).items()}
    types = {f.name: f.dataType for f in df.schema.fields}
    for name, wanted in CANONICAL_COLUMNS:
        column = found.get(name)
        if column is None or (name in TIMESTAMP_COLUMNS and column.lower() in nanos):
            continue
        if not isinstance(types[column], COMPATIBLE_SOURCE_TYPES[type(wanted)]):
            raise SchemaError(
                f"{source}: column {column} has type {types[column].simpleString()}, expected {wanted.simpleString()}"
            )
    selected = []
    for name, wanted in CANONICAL_COLUMNS:
        column = found.get(name)
        if column is None:
            selected.append(F.lit(None).cast(wanted).alias(name))
        elif name in TIMESTAMP_COLUMNS:
            is_nanos = column.lower() in nanos
            selected.append(
                wall_clock_time(F.col(f"`{column}`"), types[column], nanos.get(column.lower(), False), is_nanos).alias(
                    name
                )
            )
        else:
            # try_cast, not cast: under ANSI mode (Spark 4's default) a value the canonical type cannot hold (an
            # int64 zone id past 2^31, a double passenger count of 1e19 or NaN) would fail the whole month's job.
            # It becomes null instead: a null PULocationID quarantines the row (null_pickup_zone). Spark 3.5 wrapped
            # or saturated such values silently (4294967306 became zone 10). Fractions still truncate (1.5 -> 1).
            selected.append(F.col(f"`{column}`").try_cast(wanted).alias(name))
    return df.select(*selected)


def row_id_hashes(columns: list[str] = ROW_ID_COLUMNS):
    """The two 64-bit halves of ROW_ID_SCHEME's id: xxhash64 chains over the null mask and the columns' values."""
    null_mask = reduce(
        lambda mask, bit: mask.bitwiseOR(bit),
        [F.when(F.col(c).isNull(), F.lit(1 << i)).otherwise(F.lit(0)).cast("long") for i, c in enumerate(columns)],
    )
    values = [null_mask, *[F.col(c) for c in columns]]
    return F.xxhash64(*values), F.xxhash64(F.lit(_SECOND_CHAIN_SEED), *values)


def hex_digits(value):
    """A long's 64 bits as 16 upper-case hex digits (two's complement for a negative one). Spark's ``hex`` drops
    leading zeros, so values below 2^60 (one non-negative value in 16) are padded; the others are not passed
    through ``lpad`` at all, which copies every string it is given: about 0.6 s per 3,000,000 rows of the
    stage's write (docs/performance.md)."""
    return F.when((value >= 0) & (value < F.lit(1 << 60)), F.lpad(F.hex(value), 16, "0")).otherwise(F.hex(value))


def row_id(columns: list[str] = ROW_ID_COLUMNS):
    """The 128-bit row id of ROW_ID_SCHEME as 32 hex digits: equal rows (nulls included) get equal ids."""
    first, second = row_id_hashes(columns)
    return F.concat(hex_digits(first), hex_digits(second))


def add_row_metadata(df: DataFrame, filename: str, source_month: str, ingest_timestamp) -> DataFrame:
    """unique_row_id (``row_id`` of every canonical column), filename, ingest time, month."""
    return df.select(
        "*",
        row_id().alias("unique_row_id"),
        F.lit(filename).alias("filename"),
        # A text ingest time that is no timestamp is null (as on Spark 3.5), not a failed job under ANSI mode.
        F.lit(ingest_timestamp).try_cast("timestamp").alias("ingest_timestamp"),
        F.lit(source_month).alias("source_month"),
    )


def rows_and_distinct_ids(rows: DataFrame) -> tuple[int, int]:
    """(rows, distinct ``unique_row_id``s), exactly. Distinct 64-bit hashes of the ids are counted first (a long
    key aggregates about a third faster than a 32-character one): as many hashes as rows proves as many ids, since
    equal ids hash alike. Only when some hashes repeat (duplicate rows, or a collision) are the ids themselves counted."""
    counts = rows.agg(F.count(F.lit(1)), F.countDistinct(F.xxhash64("unique_row_id"))).first()
    if counts[0] == counts[1]:
        return counts[0], counts[1]
    return counts[0], rows.agg(F.countDistinct("unique_row_id")).first()[0]


def deduplicate(df: DataFrame) -> DataFrame:
    return df.dropDuplicates(["unique_row_id"])


def month_range(year: int, month: int) -> tuple[str, str]:
    """[first instant of the month, first instant of the next) as timestamp literals."""
    return f"{year:04d}-{month:02d}-01 00:00:00", f"{year + (month == 12):04d}-{month % 12 + 1:02d}-01 00:00:00"


def pickup_in_months(months: list[tuple[int, int]], column: str = "tpep_pickup_datetime") -> str:
    """SQL condition: the pickup falls in one of the (year, month)s. Written as timestamp ranges, which Iceberg
    prunes raw's ``months(tpep_pickup_datetime)`` partitions with (``month(ts) = m`` it cannot)."""
    ranges = [
        f"({column} >= TIMESTAMP '{start}' AND {column} < TIMESTAMP '{end}')"
        for start, end in (month_range(year, month) for year, month in months)
    ]
    return " OR ".join(ranges) or "FALSE"


def hourly_actuals(raw: DataFrame) -> DataFrame:
    """Rides per pickup zone and hour of pickup."""
    pickup = F.col("tpep_pickup_datetime")
    return (
        raw.where(F.col("PULocationID").isNotNull())
        .groupBy(
            F.year(pickup).alias("year"),
            F.month(pickup).alias("month"),
            F.dayofmonth(pickup).alias("day"),
            F.hour(pickup).alias("hour"),
            F.col("PULocationID").alias("pulocationid"),
        )
        .agg(F.count(F.lit(1)).alias("total_rides"))
    )


def quarantine_rules() -> list[tuple[str, object]]:
    """Row-level problems, in order of precedence: (reason, condition that breaks it)."""
    return [
        ("null_pickup_zone", F.col("PULocationID").isNull()),
        ("negative_total", F.col("total_amount") < 0),
        ("pickup_outside_file_month", F.date_format("tpep_pickup_datetime", "yyyy-MM") != F.col("source_month")),
        ("dropoff_before_pickup", F.col("tpep_dropoff_datetime") < F.col("tpep_pickup_datetime")),
    ]


def with_quarantine_reason(df: DataFrame) -> DataFrame:
    """Add ``quarantine_reason``: the first rule a row breaks, or null for a good row."""
    reason = F.lit(None).cast("string")
    for name, broken in reversed(quarantine_rules()):
        reason = F.when(F.coalesce(broken, F.lit(False)), F.lit(name)).otherwise(reason)
    return df.withColumn("quarantine_reason", reason)


def split_flagged(flagged: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(good rows without the reason column, quarantined rows with their reason) of ``with_quarantine_reason``'s
    output: split after the fact, so a cached ``flagged`` is computed once for both."""
    good = flagged.where(F.col("quarantine_reason").isNull()).drop("quarantine_reason")
    return good, flagged.where(F.col("quarantine_reason").isNotNull())


def split_quarantine(df: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(good rows without the reason column, quarantined rows with their reason)."""
    return split_flagged(with_quarantine_reason(df))
