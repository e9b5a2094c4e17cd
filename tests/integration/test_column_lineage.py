"""The declared column lineage names real columns: each source and target column exists in the tables (and the
landed file) of a real run of the three DAGs."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from include.core import naming, settings
from include.core.contract import TAXI_ROW_METADATA_COLUMNS
from include.lineage.emit.column_lineage import MAPPINGS
from include.sources import downloads

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def columns_of(pipeline_run, catalog):
    landed_file = downloads.tlc_landed_path("2025-01", pipeline_run.paths)
    file_columns = set(pq.read_schema(landed_file).names)

    def columns(dataset: str) -> set[str]:
        if dataset == "*file*":
            return file_columns
        table = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{dataset}")
        return {field.name for field in table.schema().fields}

    return columns


@pytest.mark.parametrize("script", sorted(MAPPINGS))
def test_every_declared_source_and_target_column_exists(columns_of, script):
    missing = []
    for output_table, mapping in MAPPINGS[script].items():
        target_columns = columns_of(output_table)
        missing += [f"{output_table}.{column} (target)" for column in mapping if column not in target_columns]
        for column, sources_of_column in mapping.items():
            for source_table, source_column, _ in sources_of_column:
                if source_column not in columns_of(source_table):
                    missing.append(f"{source_table}.{source_column} (source of {output_table}.{column})")
    assert missing == []


def test_column_lineage_covers_every_column_of_the_tables_it_maps_one_to_one(columns_of):
    """Raw carries every column of its source on: a column added to a table and not to the lineage is caught here.
    Taxi raw's row metadata other than the id (the file's name, the ingest time, the month) are literals of the load,
    drawn from no column."""
    literals = set(TAXI_ROW_METADATA_COLUMNS) - {"unique_row_id"}
    for script, table, unmapped in (
        ("load_taxi", naming.TAXI_RAW, literals),
        ("merge_weather", naming.WEATHER_RAW, set()),
    ):
        assert set(MAPPINGS[script][table]) == columns_of(table) - unmapped, f"{script}: lineage and {table} differ"
