"""Jar provisioning against a real HTTP server on loopback acting as a Maven repository."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from tenacity import wait_none

from include.core import jars
from tests.support import recording_file_server


@pytest.fixture()
def maven_repo(tmp_path):
    """A loopback HTTP server serving tmp_path/repo; records every request path."""
    root = tmp_path / "repo"
    root.mkdir()
    with recording_file_server(root) as (url, requests):
        yield root, url, requests


def _publish(root: Path, url: str, content: bytes, tmp_path: Path) -> Path:
    jar = root / "org/example/demo-lib/1.0.0/demo-lib-1.0.0.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(content)
    lock = tmp_path / "jars.lock.json"
    lock.write_text(
        json.dumps(
            {
                "repository": url,
                "artifacts": [
                    {
                        "coordinates": "org.example:demo-lib:1.0.0",
                        "sha256": hashlib.sha256(content).hexdigest(),
                        "size": len(content),
                    }
                ],
            }
        )
    )
    return lock


def test_fetches_verifies_and_then_reuses_the_cache_without_network(maven_repo, tmp_path):
    root, url, requests = maven_repo
    lock = _publish(root, url, b"jar-bytes" * 1000, tmp_path)
    cache = tmp_path / "jars"

    [path] = jars.ensure_jars(cache, lock, log=lambda message: None)
    assert path.read_bytes() == b"jar-bytes" * 1000
    assert len(requests) == 1

    jars.ensure_jars(cache, lock, log=lambda message: None)
    assert len(requests) == 1, "a valid cache must not touch the network"


def test_truncated_jar_in_cache_is_detected_and_refetched(maven_repo, tmp_path):
    root, url, requests = maven_repo
    lock = _publish(root, url, b"0123456789" * 500, tmp_path)
    cache = tmp_path / "jars"
    cache.mkdir()
    (cache / "demo-lib-1.0.0.jar").write_bytes(b"0123456789" * 20)
    messages: list[str] = []

    [path] = jars.ensure_jars(cache, lock, log=messages.append)
    assert path.read_bytes() == b"0123456789" * 500
    assert any("does not match its checksum" in message for message in messages)
    assert len(requests) == 1


def test_repository_serving_corrupt_bytes_stops_setup_naming_the_artifact(maven_repo, tmp_path, monkeypatch):
    root, url, _ = maven_repo
    lock = _publish(root, url, b"good", tmp_path)
    (root / "org/example/demo-lib/1.0.0/demo-lib-1.0.0.jar").write_bytes(b"evil")
    cache = tmp_path / "jars"

    with pytest.raises(jars.JarProvisioningError, match=r"org\.example:demo-lib:1\.0\.0.*checksum mismatch"):
        jars.ensure_jars(cache, lock, log=lambda message: None, wait=wait_none())
    assert not (cache / "demo-lib-1.0.0.jar").exists(), "a jar that failed verification must not stay in the cache"


def test_committed_lock_pins_the_official_maven_central_artifacts():
    repository, artifacts = jars.load_lock()
    assert repository == "https://repo1.maven.org/maven2"
    spark_jars = {a.group + ":" + a.artifact for a in artifacts if jars.SPARK in a.roles}
    assert spark_jars == {
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13",
        "io.openlineage:openlineage-spark_2.13",
        "org.xerial:sqlite-jdbc",
        "org.postgresql:postgresql",
        "org.apache.iceberg:iceberg-aws-bundle",
        # hadoop-aws's S3A filesystem for s3:// landed files and models (include/core/object_store.py), on the AWS
        # SDK of iceberg-aws-bundle plus the two modules it leaves out
        "org.apache.hadoop:hadoop-aws",
        "software.amazon.awssdk:s3-transfer-manager",
        "software.amazon.awssdk:apache-client",
    }
    server_jars = {a.coordinates for a in artifacts if jars.CATALOG_SERVER in a.roles}
    iceberg_server = {c for c in server_jars if c.startswith("org.apache.iceberg:iceberg-core:")}
    assert iceberg_server == {"org.apache.iceberg:iceberg-core:1.11.0", "org.apache.iceberg:iceberg-core:1.11.0:tests"}
    assert any(c.startswith("org.eclipse.jetty:jetty-server:") for c in server_jars)
    assert all(len(artifact.sha256) == 64 for artifact in artifacts)
    assert len({a.file_name for a in artifacts}) == len(artifacts), "two artifacts would share one cache file"


def test_transient_server_error_is_retried(maven_repo, tmp_path):
    root, url, requests = maven_repo
    lock = _publish(root, url, b"payload" * 100, tmp_path)
    jar = root / "org/example/demo-lib/1.0.0/demo-lib-1.0.0.jar"
    real = jar.read_bytes()
    jar.write_bytes(b"half")  # first request gets wrong bytes, then the repository heals
    original = jars.download

    def heal_after_first(url_, target):
        original(url_, target)
        jar.write_bytes(real)

    jars_download = pytest.MonkeyPatch()
    jars_download.setattr(jars, "download", heal_after_first)
    try:
        [path] = jars.ensure_jars(tmp_path / "jars", lock, log=lambda m: None, wait=wait_none())
    finally:
        jars_download.undo()
    assert path.read_bytes() == real
    assert len(requests) == 2
