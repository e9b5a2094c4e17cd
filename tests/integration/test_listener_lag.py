"""What the OpenLineage Spark listener does when it falls behind the job it watches, on this project's stack (Spark 4.1,
openlineage-spark 1.53, the Iceberg REST catalog server): a command (a SQL execution that runs no Spark job, such as
CREATE TABLE or ALTER TABLE ... CREATE BRANCH) that ended before the listener handled its start loses its START, and
still gets its COMPLETE with the table it wrote. An execution that runs Spark jobs gets its START from its first job's
start instead, if it is still running when the listener gets there; when it is not, it too keeps only its COMPLETE.

The rule is OpenLineage's, not this project's (read in its source: ``ContextFactory.createSparkSQLExecutionContext``
looks the execution's plan up with ``SQLExecution.getQueryExecution``, which Spark forgets when the execution ends, and
logs "Query execution is null: can't emit event"; the COMPLETE is built from the plan the end event carries). It
happens in real runs here: the project's CI logs of 26 November 2026 show it for the short DDL of several Spark tasks
(Trap 36 in docs/versions-and-traps.md). Two things follow, and are pinned here:

- nothing in the project may make the listener fall further behind (a lower thread priority, a slow listener in its
  queue, a transport that blocks), or it loses more STARTs: that is why the listener's cost on the task's path
  (docs/performance.md) is not moved that way;
- the lineage store must build a Spark child run and its output from a COMPLETE alone.

A listener of the test's own (tests/jobs/LaggingListener.java) holds the shared listener queue for 4 s at each
execution's start, ahead of OpenLineage's listener, so the lag is certain rather than a matter of the machine's load.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from include.core import settings
from include.lineage.queries import LineageQueries
from include.lineage.store.store import LineageStore
from include.services.local_service import java_tool
from include.spark import codeship, submit
from tests.support import spark_submit_command

pytestmark = pytest.mark.integration

OPENLINEAGE_LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
JOB = settings.PROJECT_ROOT / "tests" / "jobs" / "iceberg_roundtrip.py"
LAGGING_LISTENER = settings.PROJECT_ROOT / "tests" / "jobs" / "LaggingListener.java"
LOST_START = "Query execution is null: can't emit event"
COMMAND = ".create_table."  # the listener's job name for a CREATE TABLE: a command, which runs no Spark job


@pytest.fixture(scope="module")
def lagging_listener_classes(tmp_path_factory) -> Path:
    build = tmp_path_factory.mktemp("lagging-listener")
    spark_jars = Path(importlib.util.find_spec("pyspark").origin).parent / "jars"
    subprocess.run(
        [java_tool("javac", "the lagging listener"), "-d", str(build), "-cp", f"{spark_jars}/*", str(LAGGING_LISTENER)],
        check=True,
        capture_output=True,
    )
    return build


def _run_roundtrip(paths, tmp_path: Path, label: str, lag_from: Path | None) -> tuple[str, list[dict], str]:
    """The test job (create, append, MERGE) under the project's Spark properties, its listener writing a file of its
    own; with ``lag_from``, the lagging listener first in the queue. Returns the table, the events and stderr."""
    table = settings.CatalogSettings.current(paths).table(f"listener_lag_{label}_{uuid.uuid4().hex[:8]}")
    events = tmp_path / f"{label}.ndjson"
    conf = submit.spark_conf(paths)
    conf["spark.openlineage.transport.location"] = str(events)
    if lag_from is not None:
        conf["spark.extraListeners"] = f"LaggingListener,{OPENLINEAGE_LISTENER}"
        conf["spark.driver.extraClassPath"] += os.pathsep + str(lag_from)
    completed = subprocess.run(
        spark_submit_command(conf, "local[2]", "--py-files", str(codeship.ensure_built(paths)), str(JOB), table),
        env={**os.environ, **submit.spark_submit_env(paths)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    return table, [json.loads(line) for line in events.read_text().splitlines()], completed.stderr


def _folder(table: str) -> str:
    """The end of the table's location as the listener names it: ``lakehouse.nyc_taxi.t`` ends ``/nyc_taxi/t``."""
    return "/" + table.split(".", 1)[1].replace(".", "/")


def _kind(job: str) -> str:
    """``iceberg_roundtrip.append_data.lakehouse_nyc_taxi_t`` -> ``iceberg_roundtrip.append_data``."""
    return job.rsplit(".", 1)[0]


def _of_command(writes: dict[str, list[str]]) -> list[str]:
    (types,) = [types for job, types in writes.items() if COMMAND in job]
    return types


def _writes(events: list[dict], table: str) -> dict[str, list[str]]:
    """Event types per child job that names the table's folder as an output (the CREATE TABLE, the append, the MERGE)."""
    writers = {e["job"]["name"] for e in events for o in e.get("outputs", []) if o["name"].endswith(_folder(table))}
    return {job: [e["eventType"] for e in events if e["job"]["name"] == job] for job in sorted(writers)}


def test_a_listener_that_falls_behind_loses_the_start_of_a_command_and_keeps_its_complete_with_the_table(
    paths, catalog, tmp_path, lagging_listener_classes
):
    table, on_time, _ = _run_roundtrip(paths, tmp_path, "on_time", None)
    on_time_writes = _writes(on_time, table)
    # the control: a listener that keeps up gives the CREATE TABLE (a command: no Spark job) its START and COMPLETE
    assert _of_command(on_time_writes) == ["START", "COMPLETE"], on_time_writes

    table, late, late_log = _run_roundtrip(paths, tmp_path, "late", lagging_listener_classes)
    late_writes = _writes(late, table)
    assert LOST_START in late_log, late_log[-3000:]
    # the same writes are named (a job's name ends with the table's, which differs between the two runs)
    assert {_kind(job) for job in late_writes} == {_kind(job) for job in on_time_writes}
    # the command ended before the listener handled its start: its START is gone, its COMPLETE names the table;
    # every write keeps exactly one COMPLETE (the append's and the MERGE's STARTs depend on whether they still ran when
    # the listener reached their first Spark job: on an idle machine they are gone too)
    assert _of_command(late_writes) == ["COMPLETE"], late_writes
    assert all(types.count("COMPLETE") == 1 and types[-1] == "COMPLETE" for types in late_writes.values()), late_writes

    # the store makes a run of each write from what is left, and names it as a writer of the table
    completes = [e for e in late if e["eventType"] == "COMPLETE" and e["job"]["name"] in late_writes]
    (output,) = {
        (o["namespace"], o["name"]) for e in completes for o in e["outputs"] if o["name"].endswith(_folder(table))
    }
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest(late)
        writers = LineageQueries(store).runs(f"dataset:{output[0]}:{output[1]}")["runs"]
    assert {(run["id"], run["state"]) for run in writers} >= {(e["run"]["runId"], "COMPLETED") for e in completes}
