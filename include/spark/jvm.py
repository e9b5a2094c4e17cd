"""The Spark driver's JVM start-up: an application class-data-sharing archive, the JIT mode and the collector.

A Spark task of this project is a short application (seconds to a minute of work on a month of data) whose fixed cost
is the JVM's: starting, loading and verifying some 15,000 classes (Spark, Iceberg, the OpenLineage listener), and
compiling the hot ones. On a two-core machine that fixed cost, not the data, was most of a DAG run (issue 26).

- **Class data sharing** (JEP 350, JDK 13+): one run loads the classes and the JVM dumps them into an archive
  (``-XX:ArchiveClassesAtExit``); every later driver maps it (``-XX:SharedArchiveFile``) instead of parsing and
  verifying each class again. The archive belongs to one JDK and one class path, so its file name carries a digest
  of both: a new jar, a new pyspark or another JDK names another archive, and a stale one is simply never used.
  ``-Xshare:auto`` makes any mismatch a silent fallback to normal loading, never a failure. The archive is made at
  set-up (``ensure_archive``), in ``jars/cds/`` beside the jars it was made from.
- **The JIT** (``SPARK_DRIVER_JIT``): ``quick`` stops at C1 (``-XX:TieredStopAtLevel=1``), which compiles sooner and
  costs far less CPU than C2; right for the demo's and the tests' months, where the application ends before C2's
  code would pay for itself. ``full`` (the JVM's default tiered compilation) is for months of millions of rows.
- **The garbage collector** (``SPARK_DRIVER_GC``): ``parallel`` (``-XX:+UseParallelGC``), the throughput collector,
  instead of the JVM's G1. A driver is a batch process whose pauses nobody waits on, while G1's work beside the
  application takes CPU that a short application on two cores needs for its tasks: the taxi load of 300,000 trips
  ran about 0.35 s (3 %) faster and used half a CPU-second less, and a 3,000,000-row month took the same with either
  (docs/performance.md). ``g1`` restores the JVM's default collector.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

from include.core import settings
from include.core.settings import JARS_DIR, SettingError

ARCHIVE_DIR = JARS_DIR / "cds"
# Outside include/spark/ on purpose: a script's own folder comes first on sys.path, and this folder's profile.py
# would then shadow the standard library's `profile` that pyspark imports.
WARM_UP_JOB = settings.PROJECT_ROOT / "spark_jobs" / "class_data_sharing_warm_up.py"
JIT_OPTIONS = {"quick": ["-XX:TieredStopAtLevel=1"], "full": []}
GC_OPTIONS = {"parallel": ["-XX:+UseParallelGC"], "g1": ["-XX:+UseG1GC"]}
WARM_UP_TIMEOUT_SECONDS = 900  # set-up never hangs on it: without an archive Spark only starts slower


def _spark_home() -> Path:
    # found, not imported: importing pyspark costs a task process half a second of CPU for one path
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SettingError("pyspark is not installed in this environment; run `make setup`")
    return Path(spec.origin).resolve().parent


@lru_cache(maxsize=8)
def _archive_key(class_path: tuple[str, ...], java: str, java_stamp: tuple[int, int]) -> str:
    spark_jars = sorted(p.name for p in (_spark_home() / "jars").glob("*.jar"))
    digest = hashlib.sha256("\n".join([java, str(java_stamp), *class_path, *spark_jars]).encode())
    return digest.hexdigest()[:16]


def _java_binary() -> Path | None:
    home = settings.JAVA_HOME.raw()
    java = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(java).resolve() if java and Path(java).exists() else None


def archive_path(class_path: list[Path]) -> Path | None:
    """The archive for this JDK and this driver class path (None when no JDK is found)."""
    java = _java_binary()
    if java is None:
        return None
    stat = java.stat()
    key = _archive_key(tuple(str(p) for p in class_path), str(java), (stat.st_size, int(stat.st_mtime)))
    return ARCHIVE_DIR / f"spark-driver-{key}.jsa"


def class_data_sharing_enabled() -> bool:
    return settings.SPARK_CLASS_DATA_SHARING.choice(("true", "false")) == "true"


def jit_options() -> list[str]:
    return JIT_OPTIONS[settings.SPARK_DRIVER_JIT.choice(JIT_OPTIONS)]


def gc_options() -> list[str]:
    return GC_OPTIONS[settings.SPARK_DRIVER_GC.choice(GC_OPTIONS)]


def driver_java_options(class_path: list[Path]) -> list[str]:
    """JVM options for the driver: the archive when it exists for this class path, the JIT mode and the collector."""
    options = [*jit_options(), *gc_options()]
    if class_data_sharing_enabled():
        archive = archive_path(class_path)
        if archive is not None and archive.exists():
            options += [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    return options


def ensure_archive(conf: dict[str, str], class_path: list[Path], log=print) -> Path | None:
    """Make the archive for this class path once: submit the warm-up job with ``-XX:ArchiveClassesAtExit`` into a
    temporary file, then rename it into place (two set-ups at once each make one; the last rename wins, and a reader
    never sees half an archive). A failed warm-up leaves no archive and Spark starts as it would without one."""
    if not class_data_sharing_enabled():
        return None
    archive = archive_path(class_path)
    if archive is None or archive.exists():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    for stale in archive.parent.glob("spark-driver-*.jsa"):
        stale.unlink(missing_ok=True)  # archives of an earlier class path or JDK: never used again
    log(f"spark: making the driver's class-data-sharing archive {archive.name} (once per JDK and class path)")
    with tempfile.TemporaryDirectory(prefix="cds-warm-up-") as scratch:
        partial = archive.parent / f".{archive.name}.{os.getpid()}.tmp"
        java_options = " ".join(
            [conf.get("spark.driver.extraJavaOptions", ""), f"-XX:ArchiveClassesAtExit={partial}"]
        ).strip()
        # the warm-up's lineage goes to the scratch folder, never to this var/'s events or a backend
        warm_up_conf = {k: v for k, v in conf.items() if not k.startswith("spark.openlineage.transport.")}
        warm_up_conf.update(
            {
                # its own Hadoop catalog only: at set-up no catalog server runs, and the default catalog must not be
                # the configured one (Spark resolves the default catalog on the first statement)
                "spark.sql.defaultCatalog": "warm_up",
                "spark.openlineage.transport.type": "file",
                "spark.openlineage.transport.location": f"{scratch}/lineage.json",
                "spark.driver.extraJavaOptions": java_options,
            }
        )
        command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]"]
        for key, value in warm_up_conf.items():
            command += ["--conf", f"{key}={value}"]
        command += [str(WARM_UP_JOB), scratch]
        env = {**os.environ, "SPARK_HOME": str(_spark_home())}
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, cwd=scratch, env=env, timeout=WARM_UP_TIMEOUT_SECONDS
            )
        except subprocess.TimeoutExpired:
            partial.unlink(missing_ok=True)
            log(f"spark: no class-data-sharing archive (the warm-up job ran past {WARM_UP_TIMEOUT_SECONDS} s)")
            return None
        if result.returncode != 0 or not partial.exists():
            partial.unlink(missing_ok=True)
            output = [line for line in (result.stdout + result.stderr).splitlines() if not line.startswith("\tat ")]
            causes = [line for line in output if "Error" in line or "Exception" in line]
            tail = "\n".join((causes or output)[-3:])
            log(f"spark: no class-data-sharing archive (the warm-up job ended {result.returncode}): {tail}")
            return None
        os.replace(partial, archive)
    return archive
