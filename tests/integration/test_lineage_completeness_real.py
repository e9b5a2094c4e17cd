"""Know what is missing, made for real: a DAG run whose first Spark task's driver is killed (SIGKILL of a real
spark-submit whose OpenLineage listener writes a file), whose second Spark task's application START is dropped from the
listener's real file, and whose third task left a refused line in Airflow's event file. ``lineage checks`` names each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from datetime import UTC, datetime

import pytest

from include.core import settings
from include.lineage import cli
from include.spark import submit
from tests.support import spark_submit_command

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
NS = "pipeline"
DAG = "completeness_dag"
PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/2.20.3"
JOB = settings.PROJECT_ROOT / "tests" / "jobs" / "lineage_burst_job.py"


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _airflow_event(kind: str, job: str, run_id: str, job_type: str, parent: tuple[str, str] | None = None) -> dict:
    """An event as the Airflow provider writes it: the job type, the parent, the task's operator."""
    run_facets: dict = {}
    if parent is not None:
        run_facets["parent"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
            "run": {"runId": parent[0]},
            "job": {"namespace": NS, "name": parent[1]},
        }
        run_facets["airflow"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet",
            "task": {"operator_class": "SparkSubmitOperator", "operator_class_path": "airflow.providers.apache.spark"},
        }
    job_facets = {
        "jobType": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
            "processingType": "BATCH",
            "integration": "AIRFLOW",
            "jobType": job_type,
        }
    }
    return {
        "eventType": kind,
        "eventTime": _now(),
        "run": {"runId": run_id, "facets": run_facets},
        "job": {"namespace": NS, "name": job, "facets": job_facets},
        "inputs": [],
        "outputs": [],
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def _spark(paths: settings.Paths, task: tuple[str, str], dag_run: str, out: str, writes: int, pause: float, log):
    """spark-submit of the tiny job, its listener writing this var/'s Spark event file, its parent the task run."""
    conf = submit.spark_conf(lineage=True)
    conf.update(
        {
            "spark.openlineage.parentJobNamespace": NS,
            "spark.openlineage.parentJobName": task[1],
            "spark.openlineage.parentRunId": task[0],
            "spark.openlineage.rootParentJobNamespace": NS,
            "spark.openlineage.rootParentJobName": DAG,
            "spark.openlineage.rootParentRunId": dag_run,
        }
    )
    return subprocess.Popen(
        spark_submit_command(conf, "local[1]", str(JOB), out, str(writes), str(pause)),
        env={**os.environ, **submit.spark_submit_env(paths)},
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )


def _append(path, *events: dict) -> None:
    with path.open("a") as stream:
        for lineage_event in events:
            stream.write(json.dumps(lineage_event) + "\n")


def test_lineage_checks_names_a_killed_driver_a_dropped_event_and_a_refused_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    paths = settings.Paths.current().ensure()
    paths.lineage.mkdir(parents=True, exist_ok=True)
    airflow_file, spark_file = paths.lineage_events, paths.spark_lineage_events
    ids = {name: str(uuid.uuid4()) for name in ("dag", "killed", "dropped", "refused")}
    tasks = {name: (ids[name], f"{DAG}.{name}") for name in ("killed", "dropped", "refused")}
    dag = (ids["dag"], DAG)
    _append(airflow_file, _airflow_event("START", DAG, ids["dag"], "DAG"))
    log = (tmp_path / "spark.log").open("w")

    # 1. a killed Spark driver: its application sent START, never COMPLETE; its task failed
    _append(airflow_file, _airflow_event("START", tasks["killed"][1], ids["killed"], "TASK", dag))
    driver = _spark(paths, tasks["killed"], ids["dag"], str(tmp_path / "killed"), 60, 1.0, log)
    deadline = time.monotonic() + 240
    while not (
        spark_file.exists() and '"APPLICATION"' in spark_file.read_text() and '"SQL_JOB"' in spark_file.read_text()
    ):
        assert driver.poll() is None and time.monotonic() < deadline, (tmp_path / "spark.log").read_text()[-3000:]
        time.sleep(0.2)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(timeout=60)
    _append(airflow_file, _airflow_event("FAIL", tasks["killed"][1], ids["killed"], "TASK", dag))
    killed_lines = spark_file.read_text().splitlines()

    # 2. a dropped event: a Spark application that ran to its end, its START line lost on the way
    _append(airflow_file, _airflow_event("START", tasks["dropped"][1], ids["dropped"], "TASK", dag))
    finished = _spark(paths, tasks["dropped"], ids["dag"], str(tmp_path / "dropped"), 1, 0.0, log)
    assert finished.wait(timeout=300) == 0, (tmp_path / "spark.log").read_text()[-3000:]
    _append(airflow_file, _airflow_event("COMPLETE", tasks["dropped"][1], ids["dropped"], "TASK", dag))
    lines = spark_file.read_text().splitlines()
    application_start = next(
        index
        for index, line in enumerate(lines[len(killed_lines) :], len(killed_lines))
        if json.loads(line)["eventType"] == "START" and '"APPLICATION"' in line
    )
    dropped = json.loads(lines.pop(application_start))
    spark_file.write_text("\n".join(lines) + "\n")

    # 3. a refused line: the third task's COMPLETE, its time mangled on the way
    _append(airflow_file, _airflow_event("START", tasks["refused"][1], ids["refused"], "TASK", dag))
    mangled = _airflow_event("COMPLETE", tasks["refused"][1], ids["refused"], "TASK", dag) | {"eventTime": "soon"}
    _append(airflow_file, mangled, _airflow_event("COMPLETE", DAG, ids["dag"], "DAG"))

    assert cli.main(["checks", "--dag-run", ids["dag"], "--grace", "0"]) == 1
    printed = capsys.readouterr().out
    with capsys.disabled():
        print(f"\n$ lineage checks --dag-run {ids['dag']} --grace 0\n{printed}")
    assert f"{DAG}  run {ids['dag']}  COMPLETED" in printed and "lineage incomplete" in printed
    killed_app = next(
        json.loads(line)["run"]["runId"] for line in killed_lines if '"APPLICATION"' in line and '"START"' in line
    )
    assert f"- Spark application without COMPLETE: lineage_burst_job (run {killed_app}): started under task " in printed
    assert f"- no START: lineage_burst_job (run {dropped['run']['runId']})" in printed
    assert f"- a line set aside: {tasks['refused'][1]} (run {ids['refused']})" in printed and "'soon'" in printed
    assert f"- no terminal event: {tasks['refused'][1]} (run {ids['refused']})" in printed
    assert cli.main(["checks", "--dag-run", ids["dag"], "--grace", "3600"]) == 1, "a line set aside stays missing"
    within = capsys.readouterr().out
    assert "Spark application without COMPLETE" not in within and "a line set aside" in within
