"""What one task hands to the next, on an object store (moto's S3 server on loopback): a landed file (downloaded,
uploaded whole, fingerprinted, recorded in the ledger) and a model, each named in lineage by its ``s3://`` URI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import xxhash

from include.core import naming, object_store, settings
from include.lineage.emit import observed
from include.sources import downloads
from tests.support import QuietHandler, free_port, loopback_server

BUCKET = "handoff"
ENV = {
    "AWS_ACCESS_KEY_ID": "AKIAHANDOFFTEST00001",
    "AWS_SECRET_ACCESS_KEY": "handoff-secret",
    "AWS_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as stream:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
            stdout=stream,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            requests.put(f"{endpoint}/{BUCKET}", timeout=1)  # creates the bucket (moto accepts any credentials)
            break
        except requests.RequestException:
            time.sleep(0.2)
    yield endpoint
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture()
def shared(s3_endpoint, monkeypatch, tmp_path):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("S3_ENDPOINT", s3_endpoint)
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    prefix = f"s3://{BUCKET}/{tmp_path.name}"
    monkeypatch.setenv("PIPELINE_LANDING_URI", f"{prefix}/landing")
    monkeypatch.setenv("PIPELINE_MODELS_URI", f"{prefix}/models")
    return prefix


@pytest.fixture()
def source():
    body = {"bytes": b"PAR1" + b"trips" * 2000 + b"PAR1"}

    class Handler(QuietHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body["bytes"])))
            self.end_headers()
            self.wfile.write(body["bytes"])

    with loopback_server(Handler) as base:
        yield f"{base}/trip-data/yellow_tripdata_2025-01.parquet", body


def test_a_landed_file_is_uploaded_whole_to_the_store_and_nothing_stays_on_this_machine(shared, source):
    url, body = source
    target = downloads.tlc_landed_path("2025-01")
    assert isinstance(target, object_store.StoredFile)
    assert str(target) == f"{shared}/landing/tlc/yellow_tripdata_2025-01.parquet"
    assert target.name == "yellow_tripdata_2025-01.parquet" and not target.exists()

    result = downloads.fetch(url, target, policy=downloads.DownloadPolicy(attempts=1))
    assert result.status == "downloaded" and result.to_dict()["path"] == str(target)
    assert target.exists() and object_store.read_bytes(str(target)) == body["bytes"]
    assert downloads.fingerprint_file(target) == xxhash.xxh64(body["bytes"]).hexdigest() == result.fingerprint
    local = settings.Paths.current().var
    assert not [path for path in local.rglob("*") if path.is_file()], "the local copy is deleted once uploaded"


def test_the_ingest_ledger_lives_on_the_store_one_object_per_file_and_fingerprint(shared, source):
    url, _ = source
    target = downloads.tlc_landed_path("2025-01")
    first = downloads.fetch(url, target, policy=downloads.DownloadPolicy(attempts=1))
    ledger = downloads.IngestLedger()  # as the load job makes it, on another machine: it reads the store
    assert not ledger.contains(target.name, first.fingerprint)
    ledger.record(target.name, first.fingerprint, naming.TAXI_RAW)
    assert downloads.IngestLedger().contains(target.name, first.fingerprint)
    assert object_store.list_files(f"{shared}/landing/_ingested") == [
        f"{shared}/landing/_ingested/{target.name}/{first.fingerprint}.json"
    ]
    assert downloads.fetch(url, target, policy=downloads.DownloadPolicy(attempts=1)).status == "already_ingested"
    assert not ledger.path.exists(), "no local ledger is written"


def test_pyarrow_reads_a_stored_parquet_file_through_the_store_endpoint(shared, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    local = tmp_path / "f.parquet"
    pq.write_table(pa.table({"ts": pa.array([1, 2], pa.timestamp("ns"))}), local)
    uri = f"{shared}/landing/tlc/f.parquet"
    object_store.upload(local, uri)
    assert pq.read_schema(object_store.readable(uri)).field("ts").type == pa.timestamp("ns")
    assert object_store.readable(str(local)) == str(local), "a local path is handed to pyarrow as it is"


def test_a_model_is_put_in_place_whole_and_the_old_version_leaves_nothing_behind(shared):
    model = naming.model_uri("weather")
    assert model == f"{shared}/models/weather"
    object_store.write_bytes(f"{model}/spark_model/stages/old", b"old")
    object_store.write_bytes(f"{model}/model.json", b"{}")
    staging = model + naming.MODEL_STAGING_SUFFIX
    object_store.write_bytes(f"{staging}/spark_model/metadata/part-0", b"new")
    object_store.write_bytes(f"{staging}/model.json", json.dumps({"model_version": "v2"}).encode())
    object_store.replace_tree(staging, model)
    assert object_store.list_files(model) == [f"{model}/model.json", f"{model}/spark_model/metadata/part-0"]
    assert object_store.list_files(staging) == []
    assert object_store.exists(f"{model}/spark_model") and not object_store.exists(f"{model}/spark_model/stages")


def test_the_model_on_the_store_has_one_identity_for_the_extractor_and_the_listener(shared):
    bucket_key = f"{shared.removeprefix('s3://')}/models/weather"
    bucket, key = bucket_key.split("/", 1)
    assert naming.model_id("weather") == naming.DatasetId(f"s3://{bucket}", key)
    assert naming.dataset_for_key(naming.model_key("weather"))[0] == naming.model_id("weather")
    # what the OpenLineage Spark listener names (the staging folder cut by the remove-path pattern)
    assert observed.dataset_key(f"s3://{bucket}", key) == naming.model_key("weather")
    landed = f"{shared}/landing/tlc/yellow_tripdata_2025-01.parquet"
    assert observed.dataset_key(f"s3://{bucket}", landed.split("/", 3)[3]) == landed
    assert naming.dataset_for_key(landed)[0] == naming.storage_id(landed)


def test_spark_reads_the_store_through_s3a_only_when_a_hand_off_is_there(shared, monkeypatch):
    props = object_store.spark_properties()
    assert props["spark.hadoop.fs.s3.impl"] == props["spark.hadoop.fs.s3a.impl"] == object_store.S3A_FILESYSTEM
    assert props["spark.hadoop.fs.s3a.endpoint"].startswith("http://127.0.0.1:")
    assert props["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert not any("secret" in value for value in props.values()), "credentials stay in the AWS variables"
    monkeypatch.delenv("PIPELINE_LANDING_URI")
    monkeypatch.delenv("PIPELINE_MODELS_URI")
    assert object_store.spark_properties() == {}


def test_without_the_settings_everything_stays_under_var(monkeypatch, tmp_path):
    monkeypatch.delenv("PIPELINE_LANDING_URI", raising=False)
    monkeypatch.delenv("PIPELINE_MODELS_URI", raising=False)
    paths = settings.Paths(tmp_path / "var")
    assert downloads.tlc_landed_path("2025-01", paths) == paths.landing / "tlc" / "yellow_tripdata_2025-01.parquet"
    assert (
        naming.model_uri("weather", paths) == str(paths.models / "weather") == str(naming.model_dir("weather", paths))
    )
    assert naming.model_id("weather", paths) == naming.DatasetId("file", str(paths.models / "weather"))
