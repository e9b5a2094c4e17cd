"""A table read or written at an Iceberg ref (a write-audit-publish branch, a tag, time travel) is the same table:
the OpenLineage Spark listener names it `db.table.branch_<ref>` in its `symlinks` facet (seen on the audit of a real
merge), and the store's label, aliases and the rollback's table name must still be `db.table`."""

from __future__ import annotations

import pytest

from include.lineage.events import dataset_aliases, dataset_label, table_of_symlink

WAREHOUSE = "/var/warehouse/nyc_taxi/yellow_taxi_raw"


def _symlinked(name: str) -> dict:
    return {"symlinks": {"identifiers": [{"namespace": "http://127.0.0.1:8181", "name": name, "type": "TABLE"}]}}


@pytest.mark.parametrize(
    "name, table",
    [
        ("nyc_taxi.yellow_taxi_raw.branch_audit_taxi_202501_20261124T031617738410", "nyc_taxi.yellow_taxi_raw"),
        ("nyc_taxi.yellow_taxi_raw.tag_2025_01_published", "nyc_taxi.yellow_taxi_raw"),
        ("nyc_taxi.yellow_taxi_raw.snapshot_id_3348590220085539939", "nyc_taxi.yellow_taxi_raw"),
        ("nyc_taxi.yellow_taxi_raw.at_timestamp_1735689600000", "nyc_taxi.yellow_taxi_raw"),
        ("nyc_taxi.yellow_taxi_raw", "nyc_taxi.yellow_taxi_raw"),  # no ref
        ("nyc_taxi.branch_office", "nyc_taxi.branch_office"),  # a table whose name starts like a ref: two parts only
        ("warehouse.nyc_taxi.branchy", "warehouse.nyc_taxi.branchy"),  # no underscore: not a ref
        ("a.b.branch_x.c", "a.b.branch_x.c"),  # the ref is only ever the last part
    ],
)
def test_the_table_of_a_symlink_drops_only_a_trailing_iceberg_ref(name, table):
    assert table_of_symlink(name) == table


def test_a_dataset_read_at_a_branch_is_labelled_and_found_by_its_table_name():
    facets = _symlinked("nyc_taxi.yellow_taxi_raw.branch_audit_taxi_202501_x")
    assert dataset_label("file", WAREHOUSE, facets) == "nyc_taxi.yellow_taxi_raw"
    aliases = dataset_aliases("file", WAREHOUSE, facets)
    assert {"nyc_taxi.yellow_taxi_raw", "nyc_taxi.yellow_taxi_raw.branch_audit_taxi_202501_x"} <= aliases
