"""Reliability through a real DAG run: lineage backends that are down, fail or stall, and secrets that must not reach
lineage."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from include.airflow import runs
from include.core import settings
from include.sources import sample_server
from tests.support import RecordingBackend, free_port

pytestmark = pytest.mark.integration

SECRETS = {
    "env": "s3cr3t-from-env-7f3a",
    "spark_password": "s3cr3t-spark-password-91c2",
    "spark_secret": "s3cr3t-spark-secret-key-5d10",
    "spark_token": "s3cr3t-spark-token-c0de",
    "spark_key": "s3cr3t-spark-api-key-beef",
    "connection": "s3cr3t-connection-password-44aa",
}


BEHAVIOURS = ("down", "fail_half", "stall")


@dataclass
class Backend:
    port: int
    spool_dir: Path
    recorder: RecordingBackend | None  # None: nothing listens on the port (down)

    def spooling(self) -> dict:
        return {
            "type": "include.lineage.emit.spool.SpoolingTransport",
            "timeout": 0.5,
            "spool_dir": str(self.spool_dir),
            "inner": {
                "type": "http",
                "url": f"http://127.0.0.1:{self.port}",
                "endpoint": "api/v1/lineage",
                "timeout": 5,
                "retry": {"total": 0},
            },
        }


@dataclass
class ReliabilityRun:
    result: runs.DagTestResult
    reference: Path
    backends: dict[str, Backend]


@pytest.fixture(scope="module")
def reliability_run(paths, source_folder, tmp_path_factory):
    """One taxi DAG run whose lineage goes, through a composite transport, to a file (the reference: every event
    emitted) and to three spooling transports whose backends are down, fail every other request, and stall; and whose
    environment, Spark properties and connections hold secrets. One run serves every test here: each backend has its
    own spool, so what one test replays is its own backend's share alone."""
    folder = tmp_path_factory.mktemp("reliability")
    backends = {}
    for behaviour in BEHAVIOURS:
        port = free_port()
        recorder = None if behaviour == "down" else RecordingBackend(port, behaviour)
        backends[behaviour] = Backend(port, folder / f"spool-{behaviour}", recorder)
    reference = folder / "reference.jsonl"
    transport = {
        "type": "composite",
        "transports": [
            {"type": "file", "log_file_path": str(reference), "append": True},
            *[backend.spooling() for backend in backends.values()],
        ],
    }
    spark_conf = {
        "spark.hadoop.javax.jdo.option.ConnectionPassword": SECRETS["spark_password"],
        "spark.hadoop.fs.s3a.secret.key": SECRETS["spark_secret"],
        "spark.openlineage.transport.auth.token": SECRETS["spark_token"],
        "spark.myservice.api.key": SECRETS["spark_key"],
    }
    env = {
        "PIPELINE_DEPLOY_TOKEN": SECRETS["env"],
        "SPARK_CONF_EXTRA": json.dumps(spark_conf),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {"conn_type": "spark", "host": "local[*]", "password": SECRETS["connection"]}
        ),
        "AIRFLOW_CONN_WAREHOUSE_DB": json.dumps(
            {"conn_type": "postgres", "host": "db", "login": "u", "password": SECRETS["connection"]}
        ),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
    }
    try:
        with sample_server.serve(source_folder) as source_env:
            result = runs.dags_test(
                "ingest_yellow_taxi_data",
                "2025-02-01",
                {"force": True},
                env={**source_env, **env},
                log_file=paths.var / "test-logs" / "reliability.log",
            )
        yield ReliabilityRun(result, reference, backends)
    finally:
        for backend in backends.values():
            if backend.recorder is not None:
                backend.recorder.stop()


def test_secrets_in_env_spark_conf_and_connections_reach_no_lineage_byte(reliability_run, paths):
    assert reliability_run.result.succeeded
    folders = [paths.lineage, reliability_run.reference.parent]  # the events, the spools, the reference file
    files = [path for folder in folders for path in folder.rglob("*") if path.is_file()]
    leaks = [
        f"{name} in {path}"
        for path in files
        for name, secret in SECRETS.items()
        if secret.encode() in path.read_bytes()
    ]
    assert leaks == []
    assert len(files) >= 3


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_taxi_dag_succeeds_whatever_the_backend_does_and_replay_delivers_every_event(reliability_run, paths, behaviour):
    """The reference file records every emitted event independently of the backends."""
    assert reliability_run.result.succeeded, f"the DAG must succeed while its lineage backend is {behaviour}"
    backend = reliability_run.backends[behaviour]
    emitted = {
        (e["run"]["runId"], e["eventType"], e["eventTime"])
        for e in map(json.loads, reliability_run.reference.read_text().splitlines())
    }
    assert len(emitted) >= 5, "START and COMPLETE of the two tasks and the DAG's COMPLETE"
    assert list(backend.spool_dir.glob("*.json")), f"with the backend {behaviour}, events must have been spooled"

    recorder = backend.recorder or RecordingBackend(backend.port)
    recorder.behaviour = "ok"
    replay = subprocess.run(
        [str(Path(sys.executable).parent / "lineage"), "replay"],
        env={
            **os.environ,
            **settings.airflow_env(paths),
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(backend.spooling()),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    time.sleep(3.5 if behaviour == "stall" else 0)  # let the stalled first attempts land too: duplicates, not losses
    recorder.stop()
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert re.search(r"sent \d+, remaining 0", replay.stdout)
    assert recorder.unique() == emitted, "every emitted event is received, each once after de-duplication"
    assert list(backend.spool_dir.glob("*.json")) == []
