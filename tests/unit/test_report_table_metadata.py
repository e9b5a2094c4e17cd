"""The Iceberg facts a job puts in its report give the extractor the same facets pyiceberg would, on a real table."""

from __future__ import annotations

import pytest

from include.core import settings
from include.core.contract import JobReport
from include.lineage.emit.extraction import _TableFacets
from spark_jobs.common.report import describe_tables
from spark_jobs.common.tables import current_snapshot_id, ensure_table, qualified

TABLE = "report_metadata_test"


@pytest.fixture
def table(spark):
    spark.sql(f"DROP TABLE IF EXISTS {qualified(TABLE)}")
    frame = spark.sql(
        "SELECT CAST(id AS INT) AS zone, id AS rides, CAST(id AS DOUBLE) / 3 AS share, CAST(id AS STRING) AS label, "
        "TIMESTAMP '2025-01-01 00:00:00' + make_interval(0, 0, 0, 0, CAST(id AS INT)) AS at, "
        "CAST(id AS DECIMAL(9, 2)) AS fare, DATE '2025-01-01' AS day, id % 2 = 0 AS even FROM range(50)"
    )
    ensure_table(spark, TABLE, frame.schema, partitioned_by="day")
    frame.writeTo(qualified(TABLE)).append()
    frame.limit(7).writeTo(qualified(TABLE)).append()
    yield TABLE
    spark.sql(f"DROP TABLE IF EXISTS {qualified(TABLE)}")


def _facets(table_facets: _TableFacets) -> tuple:
    facets = table_facets.dataset_facets()
    return (
        [(f.name, f.type, f.ordinal_position) for f in facets["schema"].fields],
        facets["version"].datasetVersion,
        table_facets.output_statistics(),
    )


def test_reported_table_facets_equal_those_read_through_pyiceberg(spark, table):
    first = spark.sql(f"SELECT snapshot_id FROM {qualified(table)}.snapshots ORDER BY committed_at").first().snapshot_id
    report = JobReport(inputs={table: {"snapshot_id": first}}, outputs={table: {}})
    describe_tables(spark, report)
    catalog = settings.pyiceberg_catalog()

    reported_input = _TableFacets.from_report(report.inputs[table])
    assert _facets(reported_input) == _facets(_TableFacets.from_catalog(catalog, table, first))
    assert reported_input.output_statistics().rowCount == 50

    reported_output = _TableFacets.from_report(report.outputs[table])
    assert report.outputs[table]["snapshot_id"] == current_snapshot_id(spark, table)
    assert _facets(reported_output) == _facets(_TableFacets.from_catalog(catalog, table, None))
    assert reported_output.output_statistics().rowCount == 7
    assert {name for name, _ in report.outputs[table]["iceberg_schema"]} >= {"zone", "fare", "at", "even"}


def test_a_report_without_table_metadata_falls_back_to_the_catalog():
    assert _TableFacets.from_report({"snapshot_id": 1}) is None


def test_an_output_the_job_did_not_commit_to_has_zero_output_statistics(spark, table):
    current = current_snapshot_id(spark, table)
    report = JobReport(outputs={table: {"previous_snapshot_id": current, "snapshot_id": current}})
    describe_tables(spark, report)
    statistics = _TableFacets.from_report(report.outputs[table]).output_statistics()
    assert (statistics.rowCount, statistics.size, statistics.fileCount) == (0, 0, 0)
