"""The project's Python code as one zip that spark-submit ships with every job (``--py-files``).

A Spark job imports ``include`` and ``spark_jobs``. On one machine they are importable from the project folder; on a
cluster the driver and executors only see what spark-submit ships. The zip holds every ``.py`` file of the two
packages, is named by the digest of their content (``var/spark/code/project-<digest>.zip``, git-ignored) and is
rebuilt only when a file changed. The zip is reproducible: entries sorted, fixed timestamps.

The third-party packages (pyspark, pyarrow, openlineage-python, ...) are not in the zip: the executors' Python must
have them (``SPARK_PYSPARK_PYTHON``: the same image as Airflow's, or a venv packed with venv-pack and shipped with
``--archives``).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

from include.core import settings

PACKAGES = ("include", "spark_jobs")
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
KEEP = 5


def source_files(root: Path = settings.PROJECT_ROOT) -> list[Path]:
    """Every Python file of the shipped packages, relative to ``root``, in a stable order."""
    files = [
        path.relative_to(root)
        for package in PACKAGES
        for path in (root / package).rglob("*.py")
        if "__pycache__" not in path.parts
    ]
    return sorted(files, key=lambda path: path.as_posix())


def digest(root: Path = settings.PROJECT_ROOT) -> str:
    hasher = hashlib.sha256()
    for relative in source_files(root):
        hasher.update(relative.as_posix().encode() + b"\0")
        hasher.update((root / relative).read_bytes() + b"\0")
    return hasher.hexdigest()[:16]


def code_dir(paths: settings.Paths) -> Path:
    return paths.var / "spark" / "code"


def ensure_built(paths: settings.Paths | None = None, root: Path = settings.PROJECT_ROOT) -> Path:
    """The zip of the current code, built when missing. Older zips are kept a while (a job still running may be
    serving one to its executors); only the newest ``KEEP`` stay."""
    paths = paths or settings.Paths.current()
    folder = code_dir(paths)
    target = folder / f"project-{digest(root)}.zip"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    descriptor, partial = tempfile.mkstemp(dir=folder, suffix=".part")
    os.close(descriptor)
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for relative in source_files(root):
            entry = zipfile.ZipInfo(relative.as_posix(), date_time=_FIXED_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, (root / relative).read_bytes())
    os.replace(partial, target)  # atomic: concurrent tasks build the same bytes under the same name
    for old in sorted(folder.glob("project-*.zip"), key=lambda path: path.stat().st_mtime, reverse=True)[KEEP:]:
        old.unlink(missing_ok=True)
    return target


def main() -> int:
    print(f"codeship: {ensure_built()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
