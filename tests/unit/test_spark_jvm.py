"""The Spark driver's JVM options (include/spark/jvm.py): the class-data-sharing archive is used only when it exists for
this very class path and JDK, never half-written, and the settings that control it refuse bad values by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from include.core.settings import SettingError
from include.spark import jvm, submit

CLASS_PATH = [Path("/opt/jars/iceberg.jar"), Path("/opt/jars/openlineage.jar")]


@pytest.fixture
def archive_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(jvm, "ARCHIVE_DIR", tmp_path / "cds")
    monkeypatch.delenv("SPARK_CLASS_DATA_SHARING", raising=False)
    monkeypatch.delenv("SPARK_DRIVER_JIT", raising=False)
    monkeypatch.delenv("SPARK_DRIVER_GC", raising=False)
    return tmp_path / "cds"


def test_the_archive_is_named_after_the_class_path_and_the_jdk(archive_dir, monkeypatch):
    first = jvm.archive_path(CLASS_PATH)
    assert first == jvm.archive_path(list(CLASS_PATH)), "the same class path names the same archive"
    assert first.parent == archive_dir
    assert jvm.archive_path([*CLASS_PATH, Path("/opt/jars/kafka-clients.jar")]) != first
    assert jvm.archive_path(list(reversed(CLASS_PATH))) != first, "class path order matters to CDS"
    other_java = archive_dir.parent / "jdk" / "bin" / "java"
    other_java.parent.mkdir(parents=True)
    other_java.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(other_java.parent.parent))
    assert jvm.archive_path(CLASS_PATH) != first, "another JDK names another archive"


def test_an_archive_is_mapped_only_when_it_exists_and_sharing_is_on(archive_dir, monkeypatch):
    assert not any("SharedArchiveFile" in option for option in jvm.driver_java_options(CLASS_PATH))
    archive = jvm.archive_path(CLASS_PATH)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    options = jvm.driver_java_options(CLASS_PATH)
    assert f"-XX:SharedArchiveFile={archive}" in options
    assert "-Xshare:auto" in options, "a stale or foreign archive must fall back to normal loading, not fail"
    assert not any("SharedArchiveFile" in o for o in jvm.driver_java_options([Path("/elsewhere.jar")]))
    monkeypatch.setenv("SPARK_CLASS_DATA_SHARING", "false")
    assert not any("SharedArchiveFile" in option for option in jvm.driver_java_options(CLASS_PATH))


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("quick", ["-XX:TieredStopAtLevel=1"]), ("full", []), (" Quick ", ["-XX:TieredStopAtLevel=1"])],
)
def test_jit_mode(archive_dir, monkeypatch, mode, expected):
    monkeypatch.setenv("SPARK_DRIVER_JIT", mode)
    assert jvm.driver_java_options(CLASS_PATH) == [*expected, "-XX:+UseParallelGC"]


@pytest.mark.parametrize(
    ("collector", "expected"),
    [(None, "-XX:+UseParallelGC"), ("parallel", "-XX:+UseParallelGC"), (" G1 ", "-XX:+UseG1GC")],
)
def test_the_collector_is_the_throughput_one_unless_g1_is_asked_for(archive_dir, monkeypatch, collector, expected):
    if collector is not None:
        monkeypatch.setenv("SPARK_DRIVER_GC", collector)
    options = jvm.driver_java_options(CLASS_PATH)
    assert [option for option in options if option.endswith("GC")] == [expected], "exactly one collector is chosen"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SPARK_DRIVER_JIT", "fast"),
        ("SPARK_CLASS_DATA_SHARING", "yes"),
        ("SPARK_DRIVER_JIT", "c2"),
        ("SPARK_DRIVER_GC", "zgc"),
        ("SPARK_DRIVER_GC", "-XX:+UseSerialGC"),
    ],
)
def test_a_bad_value_is_refused_naming_the_setting(archive_dir, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingError, match=name):
        jvm.driver_java_options(CLASS_PATH)


def test_the_driver_options_follow_the_driver_class_path_the_launch_really_uses(archive_dir, monkeypatch):
    """The archive is looked up for the class path in the very Spark properties of the launch, after the lineage and
    catalog parts changed it, and a user's SPARK_CONF_EXTRA still has the last word."""
    conf = submit.spark_conf()
    archive = jvm.archive_path(submit.driver_class_path(conf))
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    conf = submit.spark_conf()
    assert f"-XX:SharedArchiveFile={archive}" in conf["spark.driver.extraJavaOptions"]
    assert "-Dlog4j2.configurationFile=" in conf["spark.driver.extraJavaOptions"], "the log4j option is kept"
    assert "-XX:+UseParallelGC" in conf["spark.driver.extraJavaOptions"]
    monkeypatch.setenv("SPARK_CONF_EXTRA", '{"spark.driver.extraJavaOptions": "-Dmine=1"}')
    assert submit.spark_conf()["spark.driver.extraJavaOptions"] == "-Dmine=1"


@pytest.mark.spark
def test_a_failed_warm_up_leaves_no_archive_and_says_why(archive_dir, monkeypatch):
    """spark-submit of a warm-up that cannot run: no archive, no temporary file, one line naming the failure."""
    monkeypatch.setattr(jvm, "WARM_UP_JOB", archive_dir.parent / "missing_job.py")
    said = []
    assert jvm.ensure_archive(submit.spark_conf(), CLASS_PATH, log=said.append) is None
    assert not list(archive_dir.glob("*")), "nothing half-made is left"
    assert said[-1].startswith("spark: no class-data-sharing archive (the warm-up job ended ")


def test_sharing_off_makes_no_archive(archive_dir, monkeypatch):
    monkeypatch.setenv("SPARK_CLASS_DATA_SHARING", "false")
    assert jvm.ensure_archive({}, CLASS_PATH, log=pytest.fail) is None
    assert not archive_dir.exists()


def test_a_task_builds_its_spark_submit_arguments_without_importing_pyspark():
    """Every Spark task's process (the scheduler's, or `airflow dags test`'s) builds the launch; importing pyspark only
    to find where it is installed cost it half a second of CPU per process."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from include.spark import jvm, submit\n"
        "submit.spark_conf()\n"
        "assert (jvm._spark_home() / 'jars').is_dir()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=submit.PROJECT_ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
