"""Provision the pinned Spark jars from Maven Central into ``jars/``, verified against committed checksums.

Standard library only: it runs during set-up. ``jars/jars.lock.json`` is the single source of the coordinates,
sizes and SHA-256 digests. A jar already cached with the right digest is never fetched again, so a second set-up
makes no network access.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
JARS_DIR = PROJECT_ROOT / "jars"
LOCK_FILE = JARS_DIR / "jars.lock.json"
DOWNLOAD_ATTEMPTS = 3
DOWNLOAD_TIMEOUT_SECONDS = 60


class JarProvisioningError(RuntimeError):
    pass


@dataclass(frozen=True)
class Artifact:
    group: str
    artifact: str
    version: str
    sha256: str
    size: int

    @classmethod
    def from_lock(cls, entry: dict) -> "Artifact":
        group, artifact, version = entry["coordinates"].split(":")
        return cls(group, artifact, version, entry["sha256"], int(entry["size"]))

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    def url(self, repository: str) -> str:
        return f"{repository}/{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


def load_lock(lock_file: Path = LOCK_FILE) -> tuple[str, list[Artifact]]:
    lock = json.loads(lock_file.read_text())
    return lock["repository"].rstrip("/"), [Artifact.from_lock(entry) for entry in lock["artifacts"]]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_valid(path: Path, artifact: Artifact) -> bool:
    return path.is_file() and path.stat().st_size == artifact.size and sha256_of(path) == artifact.sha256


def download(url: str, target: Path) -> None:
    partial = target.with_suffix(".part")
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response, partial.open("wb") as out:
        while block := response.read(1 << 20):
            out.write(block)
    os.replace(partial, target)


def ensure_artifact(artifact: Artifact, repository: str, jars_dir: Path, log=print) -> Path:
    target = jars_dir / artifact.file_name
    if is_valid(target, artifact):
        return target
    if target.exists():
        log(f"jars: {artifact.file_name} does not match its checksum (corrupt or truncated); fetching it again")
    url = artifact.url(repository)
    last_problem = "no attempt made"
    for attempt in range(1, DOWNLOAD_ATTEMPTS + 1):
        try:
            log(f"jars: fetching {artifact.coordinates} from {url}")
            download(url, target)
        except OSError as error:
            last_problem = f"download failed: {error}"
        else:
            if is_valid(target, artifact):
                return target
            last_problem = (
                f"checksum mismatch: got sha256 {sha256_of(target)} ({target.stat().st_size} bytes), "
                f"expected {artifact.sha256} ({artifact.size} bytes)"
            )
            target.unlink(missing_ok=True)
        time.sleep(min(2**attempt, 10) if attempt < DOWNLOAD_ATTEMPTS else 0)
    raise JarProvisioningError(
        f"jars: could not provision {artifact.coordinates} into {target} after {DOWNLOAD_ATTEMPTS} attempts: "
        f"{last_problem}"
    )


def ensure_jars(jars_dir: Path = JARS_DIR, lock_file: Path = LOCK_FILE, log=print) -> list[Path]:
    repository, artifacts = load_lock(lock_file)
    jars_dir.mkdir(parents=True, exist_ok=True)
    return [ensure_artifact(artifact, repository, jars_dir, log) for artifact in artifacts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jars-dir", type=Path, default=JARS_DIR)
    parser.add_argument("--lock-file", type=Path, default=LOCK_FILE)
    args = parser.parse_args(argv)
    try:
        paths = ensure_jars(args.jars_dir, args.lock_file)
    except JarProvisioningError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"jars: {len(paths)} verified in {args.jars_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
