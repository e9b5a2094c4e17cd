"""The Spark driver's class-data-sharing archive (include/spark/jvm.py), made as set-up makes it on a fresh clone
(no catalog server running yet) and then really mapped by a driver launched with the project's Spark properties:
the JVM's own class-loading log says where each class came from, and its collector log which collector ran."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from include.spark import jvm, submit
from tests.support import free_port, spark_submit_command

pytestmark = pytest.mark.integration
EMPTY_JOB = Path(__file__).resolve().parents[2] / "bench" / "jobs" / "empty_job.py"


def test_set_up_makes_the_archive_without_a_catalog_server_and_a_driver_loads_most_classes_from_it(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(jvm, "ARCHIVE_DIR", tmp_path / "cds")
    monkeypatch.setenv("ICEBERG_REST_PORT", str(free_port()))  # the configured catalog: nothing listens there
    said = []
    archive = submit.ensure_driver_archive(log=said.append)
    assert archive is not None and archive.exists(), said
    assert archive.parent == tmp_path / "cds" and not list(archive.parent.glob(".*.tmp")), "renamed into place"

    kwargs = submit.spark_submit_kwargs()
    conf = dict(kwargs["conf"])
    assert f"-XX:SharedArchiveFile={archive}" in conf["spark.driver.extraJavaOptions"]
    class_log, gc_log = tmp_path / "classes.log", tmp_path / "gc.log"
    conf["spark.driver.extraJavaOptions"] += f" -Xlog:class+load=info:file={class_log} -Xlog:gc=info:file={gc_log}"
    completed = subprocess.run(
        spark_submit_command(conf, "local[1]", str(EMPTY_JOB)),
        env={**os.environ, **kwargs["env_vars"]},
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    lines = class_log.read_text().splitlines()
    shared = [line for line in lines if "source: shared objects file" in line]
    assert len(lines) > 10_000 and len(shared) > 0.6 * len(lines), (len(shared), len(lines))
    # SPARK_DRIVER_GC's default: the archive (dumped by the same options) maps under the throughput collector too
    assert "Using Parallel" in gc_log.read_text(), gc_log.read_text()[:500]
