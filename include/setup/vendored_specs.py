"""The JSON schemas the project validates against, kept in the repository with their provenance and SHA-256.

Each vendored folder holds a ``lock.json``: where its files come from (repository, folder, commit, version,
license) and the SHA-256 of every file. ``drift()`` lists every difference between a folder and its lock; the unit
tests fail on any. After copying a new upstream version into a folder, update its ``source`` by hand and run
``python -m include.setup.vendored_specs --update`` to rewrite the digests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from include.core import settings

OPENLINEAGE_SPEC_DIR = settings.VENDORED_OPENLINEAGE_SPEC_DIR
COMPOSE_SPEC_DIR = settings.PROJECT_ROOT / "tests" / "specs" / "compose"
COMPOSE_SPEC = COMPOSE_SPEC_DIR / "compose-spec.json"
VENDORED_DIRS = (OPENLINEAGE_SPEC_DIR, COMPOSE_SPEC_DIR)
LOCK_NAME = "lock.json"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(folder: Path) -> list[str]:
    return sorted(
        path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file() and path.name != LOCK_NAME
    )


def load_lock(folder: Path) -> dict:
    lock_file = folder / LOCK_NAME
    try:
        lock = json.loads(lock_file.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{lock_file}: unreadable lock file: {error}") from error
    for key in ("source", "files"):
        if key not in lock:
            raise ValueError(f"{lock_file}: missing {key!r}")
    return lock


def drift(folder: Path) -> list[str]:
    """Every file that differs from, is missing from, or is not listed in the folder's lock."""
    lock = load_lock(folder)
    locked: dict[str, str] = lock["files"]
    present = _files(folder)
    problems = [f"{folder / name}: listed in {LOCK_NAME} but missing" for name in sorted(set(locked) - set(present))]
    problems += [f"{folder / name}: not listed in {LOCK_NAME}" for name in present if name not in locked]
    for name in present:
        if name in locked and sha256_of(folder / name) != locked[name]:
            problems.append(
                f"{folder / name}: SHA-256 {sha256_of(folder / name)} differs from the lock's {locked[name]}"
            )
    return problems


def update_lock(folder: Path) -> Path:
    """Rewrite the digests of a folder's lock from its files, keeping its ``source``."""
    lock = load_lock(folder)
    lock["files"] = {name: sha256_of(folder / name) for name in _files(folder)}
    lock_file = folder / LOCK_NAME
    lock_file.write_text(json.dumps(lock, indent=2) + "\n")
    return lock_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check (default) or update the locks of the vendored specs.")
    parser.add_argument("--update", action="store_true", help="rewrite every lock's SHA-256 from the files")
    args = parser.parse_args(argv)
    if args.update:
        for folder in VENDORED_DIRS:
            print(f"updated {update_lock(folder)}")
        return 0
    problems = [problem for folder in VENDORED_DIRS for problem in drift(folder)]
    print("\n".join(problems) or "vendored specs match their locks")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
