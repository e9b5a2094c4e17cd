"""Pure DataFrame -> DataFrame transforms of the taxi side."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from include.contract import TAXI_COLUMNS
from spark_jobs.common.runner import BadInputError

# Canonical schema (include/contract.py): the 2025 TLC file. Older years are normalised to it explicitly.
_SPARK_TYPES = {t.typeName(): t for t in (T.IntegerType(), T.LongType(), T.DoubleType(), T.StringType(), T.TimestampType())}
CANONICAL_COLUMNS: list[tuple[str, T.DataType]] = [(name, _SPARK_TYPES[type_name]) for name, type_name in TAXI_COLUMNS]
# Renamed across years: old name -> canonical name.
RENAMED = {"airport_fee": "Airport_fee"}
# Absent in older years: filled with null and recorded as drift.
INTRODUCED_LATER = {"cbd_congestion_fee", "Airport_fee", "congestion_surcharge"}
REQUIRED = [name for name, _ in CANONICAL_COLUMNS if name not in INTRODUCED_LATER]
# Types a column may arrive as and be cast from without loss of meaning.
COMPATIBLE_SOURCE_TYPES = {
    T.IntegerType: (T.IntegerType, T.LongType, T.ShortType),
    T.LongType: (T.LongType, T.IntegerType, T.DoubleType),
    T.DoubleType: (T.DoubleType, T.FloatType, T.IntegerType, T.LongType),
    T.TimestampType: (T.TimestampType, T.TimestampNTZType),
    T.StringType: (T.StringType,),
}
ROW_ID_COLUMNS = [name for name, _ in CANONICAL_COLUMNS]


class SchemaError(BadInputError):
    pass


def schema_drift(df: DataFrame) -> dict:
    """How the file's columns differ from the canonical schema (renamed, missing-but-optional, unexpected)."""
    present = set(df.columns)
    canonical = {name for name, _ in CANONICAL_COLUMNS}
    return {
        "renamed": {old: new for old, new in RENAMED.items() if old in present},
        "filled_with_null": sorted(c for c in INTRODUCED_LATER if c not in present and not any(RENAMED.get(p) == c for p in present)),
        "unexpected": sorted(c for c in present if c not in canonical and c not in RENAMED),
    }


def normalize_taxi_schema(df: DataFrame, source: str) -> DataFrame:
    """Rename, fill and cast a TLC file of any year into the canonical schema. Raises SchemaError naming the file."""
    for old, new in RENAMED.items():
        if old in df.columns and new not in df.columns:
            df = df.withColumnRenamed(old, new)
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise SchemaError(f"{source}: missing required column(s) {', '.join(missing)}")
    types = dict((f.name, f.dataType) for f in df.schema.fields)
    for name, wanted in CANONICAL_COLUMNS:
        if name in types and not isinstance(types[name], COMPATIBLE_SOURCE_TYPES[type(wanted)]):
            raise SchemaError(
                f"{source}: column {name} has type {types[name].simpleString()}, expected {wanted.simpleString()}"
            )
    return df.select(
        *[
            (F.col(name) if name in df.columns else F.lit(None)).cast(wanted).alias(name)
            for name, wanted in CANONICAL_COLUMNS
        ]
    )


def add_row_metadata(df: DataFrame, filename: str, source_month: str, ingest_timestamp) -> DataFrame:
    """unique_row_id (hash of every canonical column, nulls distinguished), filename, ingest time, month."""
    hashed = [F.coalesce(F.col(c).cast("string"), F.lit("\u0000")) for c in ROW_ID_COLUMNS]
    return df.select(
        "*",
        F.sha2(F.concat_ws("\u0001", *hashed), 256).alias("unique_row_id"),
        F.lit(filename).alias("filename"),
        F.lit(ingest_timestamp).cast("timestamp").alias("ingest_timestamp"),
        F.lit(source_month).alias("source_month"),
    )


def deduplicate(df: DataFrame) -> DataFrame:
    return df.dropDuplicates(["unique_row_id"])


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


def split_quarantine(df: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(good rows without the reason column, quarantined rows with their reason)."""
    flagged = with_quarantine_reason(df)
    good = flagged.where(F.col("quarantine_reason").isNull()).drop("quarantine_reason")
    return good, flagged.where(F.col("quarantine_reason").isNotNull())
