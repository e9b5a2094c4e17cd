"""The local stack works end to end: spark-submit + official Iceberg jars + JDBC catalog + pyiceberg + OL listener."""

from __future__ import annotations

import json
import os
import re
from importlib.metadata import version
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from include.core import settings
from include.core.jars import load_lock
from include.spark import submit

pytestmark = pytest.mark.integration


def _lock_versions() -> dict[str, str]:
    _, artifacts = load_lock()
    return {artifact.artifact: artifact.version for artifact in artifacts}


def test_installed_pyspark_matches_the_spark_line_of_the_iceberg_runtime_jar():
    runtime = next(name for name in _lock_versions() if name.startswith("iceberg-spark-runtime-"))
    spark_line, scala_line = re.match(r"iceberg-spark-runtime-(\d+\.\d+)_(\d+\.\d+)", runtime).groups()
    assert ".".join(version("pyspark").split(".")[:2]) == spark_line == settings.SPARK_VERSION
    assert scala_line == settings.SCALA_VERSION
    assert "openlineage-spark_" + scala_line in _lock_versions()


def test_openlineage_spark_jar_is_on_the_release_line_of_openlineage_python():
    # openlineage-spark 1.54.0 is not on Maven Central (checked 2026-11-22): the newest jar may trail by one minor.
    jar_major, jar_minor, _ = map(int, _lock_versions()["openlineage-spark_" + settings.SCALA_VERSION].split("."))
    py_major, py_minor, _ = map(int, version("openlineage-python").split("."))
    assert jar_major == py_major and 0 <= py_minor - jar_minor <= 1


def test_pyspark_client_is_exactly_pyspark_and_classic_pyspark_imports_in_process(tmp_path):
    """Trap 1 (docs/versions-and-traps.md): the Spark provider 6.x depends on pyspark-client, which ships part of the same ``pyspark``
    package. Any other version than pyspark's breaks every in-process ``import pyspark`` (the tests' session, a
    ``python job.py``) while spark-submit, which imports pyspark from its own zip, still works."""
    import subprocess
    import sys

    assert version("pyspark-client") == version("pyspark")
    assert version("apache-airflow-providers-apache-spark").startswith("6.")
    # A fresh interpreter: the classic (JVM) API imports and a local SparkSession runs a query.
    job = tmp_path / "classic.py"
    job.write_text(
        "import pyspark.sql.classic\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "print('classic', spark.version, spark.range(3).count(), spark.conf.get('spark.sql.ansi.enabled'))\n"
        "spark.stop()\n"
    )
    plain = subprocess.run([sys.executable, str(job)], capture_output=True, text=True, timeout=300, check=False)
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert f"classic {version('pyspark')} 3 true" in plain.stdout
    # spark-submit of the same venv runs the same file.
    submitted = subprocess.run(
        [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]", str(job)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    assert f"classic {version('pyspark')} 3 true" in submitted.stdout


def test_spark_submit_job_creates_appends_and_merges_and_pyiceberg_reads_it(paths, catalog, monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    # Outside a task, Airflow 3's SDK resolves connections from the environment only (no metadata DB).
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[*]"}')

    table = "stack_roundtrip"
    hook = SparkSubmitHook(
        **submit.spark_submit_kwargs(paths),
        application_args=[settings.CatalogSettings.current().table(table)],
    )
    hook.submit(str(settings.PROJECT_ROOT / "tests" / "jobs" / "iceberg_roundtrip.py"))

    iceberg_table = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{table}")
    rows = sorted(iceberg_table.scan().to_arrow().to_pylist(), key=lambda row: row["id"])
    assert rows == [
        {"id": 1, "name": "a", "amount": 1.0},
        {"id": 2, "name": "b2", "amount": 20.0},
        {"id": 3, "name": "c", "amount": 3.0},
    ]
    operations = [snapshot.summary.operation.value for snapshot in iceberg_table.snapshots()]
    assert operations == ["append", "overwrite"]
    assert iceberg_table.metadata.location.startswith(settings.CatalogSettings.current().warehouse)

    events = [json.loads(line) for line in paths.spark_lineage_events.read_text().splitlines()]
    app_events = [e for e in events if e["job"]["name"] == "iceberg_roundtrip"]
    assert [e["eventType"] for e in app_events] == ["START", "COMPLETE"]
    assert all(e["producer"].startswith("https://github.com/OpenLineage/OpenLineage") for e in events)


def test_table_created_by_pyiceberg_is_read_and_merged_by_spark(spark, catalog):
    namespace = settings.ICEBERG_NAMESPACE
    catalog.create_namespace_if_not_exists(namespace)
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
    )
    table = catalog.create_table(f"{namespace}.from_pyiceberg", schema=schema)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["x", "y"]}))

    qualified = settings.CatalogSettings.current().table("from_pyiceberg")
    # A new session has its own catalog connection: with SQLite, a session that already used the catalog keeps
    # reading the catalog as of its first read (Trap 16 in docs/versions-and-traps.md), and would not see this table.
    spark = spark.newSession()
    assert sorted(spark.table(qualified).collect()) == sorted(
        spark.createDataFrame([(1, "x"), (2, "y")], "id long, name string").collect()
    )
    spark.createDataFrame([(2, "y2"), (3, "z")], "id long, name string").createOrReplaceTempView("pyiceberg_updates")
    spark.sql(
        f"MERGE INTO {qualified} t USING pyiceberg_updates u ON t.id = u.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )

    table.refresh()
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "x"},
        {"id": 2, "name": "y2"},
        {"id": 3, "name": "z"},
    ]
    assert len(table.snapshots()) == 2
