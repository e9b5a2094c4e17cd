"""``spark_jobs.common.tables.ensure_namespace``: a job's CREATE NAMESPACE IF NOT EXISTS that loses a race with
another job's (the REST catalog's JDBC store answers the second of two concurrent creations with a server error, not
"already exists": Trap 67) goes on when the namespace exists, and fails when it does not.

The race itself cannot be staged on demand (it needs two Spark sessions' requests to reach the catalog server within
the same few milliseconds), so the Spark session here is a stand-in that raises the server's error, exactly as the
fleet's task log showed it, and answers ``catalog.databaseExists`` as the catalog would after the race."""

from __future__ import annotations

import pytest

from include.core import settings
from spark_jobs.common import tables

SERVER_ERROR = (
    "An error occurred while calling o68.sql.\n: org.apache.iceberg.exceptions.ServiceFailureException: Server error: "
    "UncheckedSQLException: Failed to execute: INSERT INTO iceberg_namespace_properties (catalog_name, namespace, "
    "property_key, property_value) VALUES (?,?,?,?), (?,?,?,?)"
)


class _Catalog:
    def __init__(self, exists: bool):
        self.exists, self.asked = exists, []

    def databaseExists(self, name: str) -> bool:  # noqa: N802 (pyspark's name)
        self.asked.append(name)
        return self.exists


class _Session:
    """A Spark session whose CREATE NAMESPACE fails as the losing side of the race did."""

    def __init__(self, exists_after: bool, error: Exception | None):
        self.catalog, self.error, self.statements = _Catalog(exists_after), error, []

    def sql(self, statement: str):
        self.statements.append(statement)
        if statement.startswith("CREATE NAMESPACE") and self.error is not None:
            raise self.error


def _namespace() -> str:
    return f"{settings.CatalogSettings.current().name}.{settings.ICEBERG_NAMESPACE}"


@pytest.mark.parametrize(
    "error, exists_after, raised",
    [
        (None, True, None),  # no race: created (or there already), nothing asked
        (RuntimeError(SERVER_ERROR), True, None),  # lost the race: the other job made it
        (RuntimeError(SERVER_ERROR), False, RuntimeError),  # a server error and still no namespace: a real failure
        (PermissionError("catalog refused the token"), False, PermissionError),  # any other failure, as it was
    ],
    ids=["created", "lost-the-race", "server-error-no-namespace", "other-failure"],
)
def test_a_namespace_created_by_another_job_at_the_same_moment_is_enough(error, exists_after, raised):
    spark = _Session(exists_after, error)
    if raised is None:
        tables.ensure_namespace(spark)
    else:
        with pytest.raises(raised) as failure:
            tables.ensure_namespace(spark)
        assert failure.value is error  # raised as the session raised it, not wrapped
    assert spark.statements == [f"CREATE NAMESPACE IF NOT EXISTS {_namespace()}"]
    assert spark.catalog.asked == ([] if error is None else [_namespace()])


def test_ensure_table_goes_on_to_create_the_table_after_losing_the_namespace_race(monkeypatch):
    from pyspark.sql.types import LongType, StructField, StructType

    spark = _Session(exists_after=True, error=RuntimeError(SERVER_ERROR))
    monkeypatch.setattr(tables, "table_exists", lambda session, table: False)
    tables.ensure_table(spark, "weather_raw", StructType([StructField("id", LongType())]))
    assert spark.statements[0] == f"CREATE NAMESPACE IF NOT EXISTS {_namespace()}"
    assert spark.statements[1].startswith(f"CREATE TABLE IF NOT EXISTS {tables.qualified('weather_raw')} (`id` bigint)")
