"""Dataset identity: one module, the OpenLineage naming spec, the same ids for Assets and lineage."""

from __future__ import annotations

from include.core import naming


def test_files_and_object_storage_follow_the_naming_spec():
    assert naming.storage_id("/tmp/a/../b/f.parquet") == naming.DatasetId("file", "/tmp/b/f.parquet")
    assert naming.storage_id("file:///tmp/w/t") == naming.DatasetId("file", "/tmp/w/t")
    assert naming.storage_id("s3a://bucket/warehouse/nyc_taxi/t") == naming.DatasetId(
        "s3://bucket", "warehouse/nyc_taxi/t"
    )
    assert naming.source_url_id(
        "https://d37ci6vzurychx.cloudfront.net/trip-data/yellow_tripdata_2024-01.parquet"
    ) == naming.DatasetId("https://d37ci6vzurychx.cloudfront.net", "/trip-data/yellow_tripdata_2024-01.parquet")


def test_iceberg_table_is_its_location_with_the_catalog_name_as_symlink(monkeypatch, tmp_path):
    monkeypatch.setenv("ICEBERG_WAREHOUSE", "s3://lake/wh")
    assert naming.table_id(naming.TAXI_RAW) == naming.DatasetId("s3://lake", "wh/nyc_taxi/yellow_taxi_raw")
    monkeypatch.setenv("ICEBERG_REST_PORT", "18999")
    assert naming.table_symlink(naming.TAXI_RAW) == naming.DatasetId(
        "http://127.0.0.1:18999", "nyc_taxi.yellow_taxi_raw"
    )
    monkeypatch.setenv("ICEBERG_CATALOG_TYPE", "jdbc")
    assert naming.table_symlink(naming.TAXI_RAW) == naming.DatasetId("s3://lake/wh", "nyc_taxi.yellow_taxi_raw")
    monkeypatch.delenv("ICEBERG_CATALOG_TYPE")
    monkeypatch.setenv("ICEBERG_WAREHOUSE", (tmp_path / "wh").as_uri())
    asset = naming.table_asset(naming.TAXI_RAW)
    assert asset.name == "lakehouse.nyc_taxi.yellow_taxi_raw"
    assert (
        naming.storage_id(asset.uri)
        == naming.table_id(naming.TAXI_RAW)
        == naming.DatasetId("file", str(tmp_path / "wh/nyc_taxi/yellow_taxi_raw"))
    )


def test_lineage_keys_resolve_to_tables_models_files_and_urls():
    assert naming.dataset_for_key(naming.TAXI_RAW)[1] is not None
    assert naming.dataset_for_key("model:weather")[0].name.endswith("/models/weather")
    assert naming.dataset_for_key("/abs/file.csv") == (naming.DatasetId("file", "/abs/file.csv"), None)
    assert naming.dataset_for_key("https://host/p.csv") == (naming.DatasetId("https://host", "/p.csv"), None)
    assert (
        naming.is_table_key("yellow_taxi_raw") and not naming.is_table_key("model:x") and not naming.is_table_key("/a")
    )
