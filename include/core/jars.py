"""Provision the pinned jars from Maven Central into ``jars/``, verified against committed checksums.

``jars/jars.lock.json`` is the single source of the coordinates, classifiers, sizes and SHA-256 digests. Each
artifact names the roles it serves: ``spark`` (on every Spark job's class path) and ``catalog-server`` (the local
Iceberg REST catalog server). A jar already cached with the right digest is never fetched again, so a second set-up
makes no network access.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from include.core.errors import ProvisioningError
from include.core.settings import JARS_DIR
from include.core.verified_download import BadDownloadError, verify_and_report, with_retries
from include.core.verified_download import download_to as download

LOCK_FILE = JARS_DIR / "jars.lock.json"
SPARK = "spark"
CATALOG_SERVER = "catalog-server"


class JarProvisioningError(ProvisioningError):
    pass


@dataclass(frozen=True)
class Artifact:
    group: str
    artifact: str
    version: str
    sha256: str
    size: int
    classifier: str | None = None
    roles: tuple[str, ...] = field(default=(SPARK,))

    @classmethod
    def from_lock(cls, entry: dict) -> Artifact:
        group, artifact, version = entry["coordinates"].split(":")
        return cls(
            group,
            artifact,
            version,
            entry["sha256"],
            int(entry["size"]),
            entry.get("classifier"),
            tuple(entry.get("roles", [SPARK])),
        )

    @property
    def coordinates(self) -> str:
        suffix = f":{self.classifier}" if self.classifier else ""
        return f"{self.group}:{self.artifact}:{self.version}{suffix}"

    @property
    def file_name(self) -> str:
        suffix = f"-{self.classifier}" if self.classifier else ""
        return f"{self.artifact}-{self.version}{suffix}.jar"

    def url(self, repository: str) -> str:
        return f"{repository}/{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


def load_lock(lock_file: Path = LOCK_FILE) -> tuple[str, list[Artifact]]:
    lock = json.loads(lock_file.read_text())
    return lock["repository"].rstrip("/"), [Artifact.from_lock(entry) for entry in lock["artifacts"]]


def jar_paths(role: str, jars_dir: Path = JARS_DIR, lock_file: Path = LOCK_FILE) -> list[Path]:
    """The cached jars of one role, in lock order."""
    _, artifacts = load_lock(lock_file)
    return [jars_dir / artifact.file_name for artifact in artifacts if role in artifact.roles]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_valid(path: Path, artifact: Artifact) -> bool:
    return path.is_file() and path.stat().st_size == artifact.size and sha256_of(path) == artifact.sha256


def _fetch_verified(artifact: Artifact, url: str, target: Path, log) -> None:
    log(f"jars: fetching {artifact.coordinates} from {url}")
    download(url, target)
    if not is_valid(target, artifact):
        problem = (
            f"checksum mismatch: got sha256 {sha256_of(target)} ({target.stat().st_size} bytes), "
            f"expected {artifact.sha256} ({artifact.size} bytes)"
        )
        target.unlink(missing_ok=True)
        raise BadDownloadError(problem)


def ensure_artifact(artifact: Artifact, repository: str, jars_dir: Path, log=print, wait=None) -> Path:
    target = jars_dir / artifact.file_name
    if is_valid(target, artifact):
        return target
    if target.exists():
        log(f"jars: {artifact.file_name} does not match its checksum (corrupt or truncated); fetching it again")
    with_retries(
        lambda: _fetch_verified(artifact, artifact.url(repository), target, log),
        f"jars: could not provision {artifact.coordinates} into {target}",
        JarProvisioningError,
        wait,
    )
    return target


def ensure_jars(jars_dir: Path = JARS_DIR, lock_file: Path = LOCK_FILE, log=print, wait=None) -> list[Path]:
    repository, artifacts = load_lock(lock_file)
    jars_dir.mkdir(parents=True, exist_ok=True)
    return [ensure_artifact(artifact, repository, jars_dir, log, wait) for artifact in artifacts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jars-dir", type=Path, default=JARS_DIR)
    parser.add_argument("--lock-file", type=Path, default=LOCK_FILE)
    args = parser.parse_args(argv)
    return verify_and_report(
        lambda: f"jars: {len(ensure_jars(args.jars_dir, args.lock_file))} verified in {args.jars_dir}",
        JarProvisioningError,
    )


if __name__ == "__main__":
    sys.exit(main())
