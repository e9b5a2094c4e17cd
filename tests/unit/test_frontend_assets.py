"""npm provisioning of the lineage page's JavaScript against a real HTTP server on loopback acting as the registry."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile

import pytest
from tenacity import wait_none

from include.lineage.api import assets
from tests.support import recording_file_server

SCRIPT = b"window.demoGraphLibrary = {version: '1.2.3'};\n" * 50


def _tarball(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, content in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


@pytest.fixture()
def registry(tmp_path):
    """A loopback HTTP server serving tmp_path/registry; records every request path."""
    root = tmp_path / "registry"
    root.mkdir()
    with recording_file_server(root) as (url, requests):
        yield root, url, requests


def _publish(registry, tmp_path, tarball: bytes, locked_tarball: bytes | None = None, script: bytes = SCRIPT):
    root, url, _ = registry
    path = root / "demo-graph" / "-" / "demo-graph-1.2.3.tgz"
    path.parent.mkdir(parents=True)
    path.write_bytes(tarball)
    locked = locked_tarball if locked_tarball is not None else tarball
    lock = tmp_path / "assets.lock.json"
    lock.write_text(
        json.dumps(
            {
                "registry": url,
                "packages": [
                    {
                        "name": "demo-graph",
                        "version": "1.2.3",
                        "tarball": "/demo-graph/-/demo-graph-1.2.3.tgz",
                        "integrity": "sha512-" + base64.b64encode(hashlib.sha512(locked).digest()).decode(),
                        "files": [{"path": "package/dist/demo.min.js", "sha256": hashlib.sha256(script).hexdigest()}],
                    }
                ],
            }
        )
    )
    return lock


def test_fetches_verifies_extracts_and_then_reuses_the_files_without_network(registry, tmp_path):
    _, _, requests = registry
    lock = _publish(registry, tmp_path, _tarball({"package/dist/demo.min.js": SCRIPT, "package/README.md": b"x"}))
    vendor = tmp_path / "vendor"
    first = assets.ensure_assets(lock, vendor, log=lambda _: None)
    assert [path.read_bytes() for path in first] == [SCRIPT]
    assert requests == ["/demo-graph/-/demo-graph-1.2.3.tgz"]
    assert assets.page_scripts(lock, vendor) == first
    assert assets.ensure_assets(lock, vendor, log=lambda _: None) == first
    assert len(requests) == 1, "a second set-up with verified files must not touch the network"


def test_a_tampered_cached_file_is_fetched_again(registry, tmp_path):
    _, _, requests = registry
    lock = _publish(registry, tmp_path, _tarball({"package/dist/demo.min.js": SCRIPT}))
    vendor = tmp_path / "vendor"
    [path] = assets.ensure_assets(lock, vendor, log=lambda _: None)
    path.write_bytes(b"alert('injected')")
    assets.ensure_assets(lock, vendor, log=lambda _: None)
    assert path.read_bytes() == SCRIPT and len(requests) == 2


def test_a_tarball_that_does_not_match_the_lock_is_refused_and_nothing_is_extracted(registry, tmp_path):
    served = _tarball({"package/dist/demo.min.js": b"evil()"})
    lock = _publish(registry, tmp_path, served, locked_tarball=_tarball({"package/dist/demo.min.js": SCRIPT}))
    vendor = tmp_path / "vendor"
    with pytest.raises(assets.AssetProvisioningError, match=r"demo-graph@1\.2\.3.*checksum mismatch"):
        assets.ensure_assets(lock, vendor, log=lambda _: None, wait=wait_none())
    assert not (vendor / "demo-graph").exists()


def test_a_file_missing_from_the_tarball_is_named(registry, tmp_path):
    lock = _publish(registry, tmp_path, _tarball({"package/dist/other.js": SCRIPT}))
    with pytest.raises(
        assets.AssetProvisioningError, match=r"demo-graph@1\.2\.3 has no file package/dist/demo\.min\.js"
    ):
        assets.ensure_assets(lock, tmp_path / "vendor", log=lambda _: None)


def test_page_scripts_says_to_run_setup_when_a_file_is_missing(tmp_path, registry):
    lock = _publish(registry, tmp_path, _tarball({"package/dist/demo.min.js": SCRIPT}))
    with pytest.raises(assets.AssetProvisioningError, match="make setup"):
        assets.page_scripts(lock, tmp_path / "empty")


def test_the_committed_lock_pins_cytoscape_and_its_dagre_layout():
    _, packages = assets.load_lock()
    assert [(p.name, p.version) for p in packages] == [("cytoscape", "3.34.4"), ("cytoscape-dagre", "4.0.1")]
    for package in packages:
        assert package.integrity.startswith("sha512-") and package.tarball.endswith(f"-{package.version}.tgz")
        assert all(len(asset.sha256) == 64 for asset in package.files)
