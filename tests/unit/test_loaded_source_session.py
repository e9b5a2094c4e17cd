"""The snapshot a stage's last commit names (spark_jobs/common/loaded_source.py), read through pyiceberg from a real
Iceberg table that Spark writes: with stages of other months committing after this month's (a backfill runs several
months at once), it must be this month's commit, not the table's current snapshot (the suite's backfill through a
scheduler failed its merges when it was)."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from spark_jobs.common import loaded_source
from spark_jobs.common.tables import current_snapshot_id, ensure_table, qualified

SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("source_month", T.StringType())])


@pytest.fixture
def table(spark):
    name = "loaded_source_session"
    spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
    ensure_table(spark, name, SCHEMA, partitioned_by="source_month")
    yield name
    spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")


def _commit(spark, table: str, month: str, tagged: bool = True) -> int:
    rows = spark.createDataFrame([(1, month)], SCHEMA)
    if tagged:
        with loaded_source.tagged_commits(spark, loaded_source.commit_tags(month, f"source of {month}", None)):
            rows.writeTo(qualified(table)).overwritePartitions()
    else:
        rows.writeTo(qualified(table)).overwritePartitions()
    return current_snapshot_id(spark, table)


def _month_snapshot_id(table: str, month: str) -> int | None:
    from include.core import settings

    return loaded_source.month_state(settings.pyiceberg_catalog(), table, month).month_snapshot_id


def test_the_months_own_commit_is_named_when_other_months_committed_after_it(spark, table):
    from include.core import settings

    assert _month_snapshot_id(table, "2025-01") is None
    january = _commit(spark, table, "2025-01")
    assert _month_snapshot_id(table, "2025-01") == january
    february = _commit(spark, table, "2025-02")  # another month's stage, after January's
    assert current_snapshot_id(spark, table) == february
    state = loaded_source.month_state(settings.pyiceberg_catalog(), table, "2025-01")
    assert state.identity == "source of 2025-01"
    assert state.month_snapshot_id == january
    assert state.snapshot_id == current_snapshot_id(spark, table) != state.month_snapshot_id
    assert _month_snapshot_id(table, "2025-02") == february
    again = _commit(spark, table, "2025-01")
    assert _month_snapshot_id(table, "2025-01") == again != january
    _commit(spark, table, "2025-03", tagged=False)  # a commit the jobs did not make: nothing can be told
    assert _month_snapshot_id(table, "2025-01") is None
