"""Provision the lineage page's JavaScript libraries from the npm registry, pinned and checksum-verified, like the jars.

``include/lineage/api/static/assets.lock.json`` names each package, its version, the tarball's path on the registry, the
tarball's ``sha512`` (npm's ``integrity``) and, for each file the page uses, its path in the tarball and its
SHA-256. Set-up fetches a tarball with urllib only when a file is missing or does not match, verifies the tarball
against the lock before extracting anything, and writes the files into ``include/lineage/api/static/vendor/`` (git-ignored).
A second set-up with the files in place makes no network access; the page is served from those files (no CDN).

    python -m include.lineage.api.assets                      # provision (what set-up runs)
    python -m include.lineage.api.assets --lock cytoscape@3.34.4 cytoscape-dagre@4.0.1   # (re)write the lock
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from include.core.errors import ProvisioningError
from include.core.settings import PROJECT_ROOT
from include.core.verified_download import BadDownloadError, verify_and_report, with_retries
from include.core.verified_download import download_bytes as _download

STATIC_DIR = PROJECT_ROOT / "include" / "lineage" / "api" / "static"
LOCK_FILE = STATIC_DIR / "assets.lock.json"
VENDOR_DIR = STATIC_DIR / "vendor"
DEFAULT_REGISTRY = "https://registry.npmjs.org"
# The files of each package the page loads, in load order (cytoscape-dagre bundles dagre and graphlib).
PAGE_FILES = {
    "cytoscape": ["package/dist/cytoscape.min.js"],
    "cytoscape-dagre": ["package/dist/cytoscape-dagre.min.js"],
}


class AssetProvisioningError(ProvisioningError):
    pass


@dataclass(frozen=True)
class AssetFile:
    path: str  # inside the tarball, e.g. package/dist/cytoscape.min.js
    sha256: str

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    tarball: str  # path on the registry, e.g. /cytoscape/-/cytoscape-3.34.4.tgz
    integrity: str  # sha512-<base64>, as npm records it
    license: str
    files: tuple[AssetFile, ...]

    @classmethod
    def from_lock(cls, entry: dict) -> Package:
        return cls(
            entry["name"],
            entry["version"],
            entry["tarball"],
            entry["integrity"],
            entry.get("license", ""),
            tuple(AssetFile(f["path"], f["sha256"]) for f in entry["files"]),
        )

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"


def load_lock(lock_file: Path = LOCK_FILE) -> tuple[str, list[Package]]:
    try:
        lock = json.loads(lock_file.read_text())
        return lock["registry"].rstrip("/"), [Package.from_lock(entry) for entry in lock["packages"]]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise AssetProvisioningError(f"frontend assets: cannot read the lock file {lock_file}: {error!r}") from error


def vendored_path(package: Package, asset: AssetFile, vendor_dir: Path = VENDOR_DIR) -> Path:
    return vendor_dir / package.name / asset.file_name


def page_scripts(lock_file: Path = LOCK_FILE, vendor_dir: Path = VENDOR_DIR) -> list[Path]:
    """The vendored script files of the lineage page, in load order; an error says to run set-up if one is missing."""
    _, packages = load_lock(lock_file)
    paths = [vendored_path(package, asset, vendor_dir) for package in packages for asset in package.files]
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        raise AssetProvisioningError(f"frontend assets missing: {', '.join(missing)}; run `make setup`")
    return paths


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _is_valid(path: Path, asset: AssetFile) -> bool:
    return path.is_file() and _sha256(path.read_bytes()) == asset.sha256


def _fetch_verified(package: Package, url: str, log) -> bytes:
    log(f"frontend assets: fetching {package.spec} from {url}")
    data = _download(url)
    if _integrity(data) != package.integrity:
        raise BadDownloadError(
            f"checksum mismatch: the tarball has {_integrity(data)} ({len(data)} bytes), "
            f"the lock says {package.integrity}"
        )
    return data


def _extract(package: Package, tarball: bytes, vendor_dir: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        for asset in package.files:
            try:
                member = archive.extractfile(asset.path)
            except KeyError:
                member = None
            if member is None:
                raise AssetProvisioningError(f"frontend assets: {package.spec} has no file {asset.path}")
            content = member.read()
            if _sha256(content) != asset.sha256:
                raise AssetProvisioningError(
                    f"frontend assets: {package.spec} {asset.path} has sha256 {_sha256(content)}, the lock says {asset.sha256}"
                )
            target = vendored_path(package, asset, vendor_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".part")
            partial.write_bytes(content)
            os.replace(partial, target)


def ensure_package(package: Package, registry: str, vendor_dir: Path = VENDOR_DIR, log=print, wait=None) -> list[Path]:
    targets = [vendored_path(package, asset, vendor_dir) for asset in package.files]
    if all(_is_valid(target, asset) for target, asset in zip(targets, package.files, strict=True)):
        return targets
    url = registry + package.tarball
    tarball = with_retries(
        lambda: _fetch_verified(package, url, log),
        f"frontend assets: could not provision {package.spec} from {url}",
        AssetProvisioningError,
        wait,
    )
    _extract(package, tarball, vendor_dir)
    return targets


def ensure_assets(lock_file: Path = LOCK_FILE, vendor_dir: Path = VENDOR_DIR, log=print, wait=None) -> list[Path]:
    registry, packages = load_lock(lock_file)
    return [path for package in packages for path in ensure_package(package, registry, vendor_dir, log, wait)]


def write_lock(specs: list[str], lock_file: Path = LOCK_FILE, registry: str = DEFAULT_REGISTRY) -> None:
    """Pin ``name@version`` specs: read each version's tarball and integrity from the registry, hash the page files."""
    entries = []
    for spec in specs:
        name, _, version = spec.rpartition("@")
        if not name or not version:
            raise AssetProvisioningError(f"frontend assets: {spec!r} is not name@version")
        meta = json.loads(_download(f"{registry}/{name.replace('/', '%2F')}/{version}"))
        tarball_url = meta["dist"]["tarball"]
        tarball = _download(tarball_url)
        if _integrity(tarball) != meta["dist"]["integrity"]:
            raise AssetProvisioningError(f"frontend assets: {spec} tarball does not match the registry's integrity")
        with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
            files = [{"path": path, "sha256": _sha256(archive.extractfile(path).read())} for path in PAGE_FILES[name]]
        entries.append(
            {
                "name": name,
                "version": version,
                "tarball": tarball_url.removeprefix(registry),
                "integrity": meta["dist"]["integrity"],
                "license": meta.get("license", ""),
                "files": files,
            }
        )
    lock_file.write_text(json.dumps({"registry": registry, "packages": entries}, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lock", nargs="+", metavar="NAME@VERSION", help="rewrite the lock file for these packages")
    args = parser.parse_args(argv)

    def provision() -> str:
        if args.lock:
            write_lock(args.lock)
            print(f"frontend assets: wrote {LOCK_FILE}")
        return f"frontend assets: {len(ensure_assets())} files verified in {VENDOR_DIR}"

    return verify_and_report(provision, AssetProvisioningError)


if __name__ == "__main__":
    sys.exit(main())
