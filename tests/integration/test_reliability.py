"""Reliability through real DAG runs: a lineage backend that is down, and secrets that must not reach lineage."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
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


def test_secrets_in_env_spark_conf_and_connections_reach_no_lineage_byte(paths, source_folder):
    env = {
        "PIPELINE_DEPLOY_TOKEN": SECRETS["env"],
        "SPARK_CONF_EXTRA": json.dumps(
            {
                "spark.hadoop.javax.jdo.option.ConnectionPassword": SECRETS["spark_password"],
                "spark.hadoop.fs.s3a.secret.key": SECRETS["spark_secret"],
                "spark.openlineage.transport.auth.token": SECRETS["spark_token"],
                "spark.myservice.api.key": SECRETS["spark_key"],
            }
        ),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {"conn_type": "spark", "host": "local[*]", "password": SECRETS["connection"]}
        ),
        "AIRFLOW_CONN_WAREHOUSE_DB": json.dumps(
            {"conn_type": "postgres", "host": "db", "login": "u", "password": SECRETS["connection"]}
        ),
    }
    with sample_server.serve(source_folder) as source_env:
        result = runs.dags_test("ingest_weather_data", "2025-02-01", {"force": True}, env={**source_env, **env})
    assert result.succeeded
    leaks = []
    for path in paths.lineage.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            leaks += [f"{name} in {path}" for name, secret in SECRETS.items() if secret.encode() in data]
    assert leaks == []
    scanned = sum(1 for p in paths.lineage.rglob("*") if p.is_file())
    assert scanned >= 3


@pytest.mark.parametrize("behaviour", ["down", "fail_half", "stall"])
def test_taxi_dag_succeeds_whatever_the_backend_does_and_replay_delivers_every_event(
    paths, source_folder, tmp_path, behaviour
):
    """A file transport beside the spooling one records every emitted event independently of the backend."""
    port = free_port()
    backend = None if behaviour == "down" else RecordingBackend(port, behaviour)
    spool_dir, reference = tmp_path / "spool", tmp_path / "reference.jsonl"
    spooling = {
        "type": "include.lineage.emit.spool.SpoolingTransport",
        "timeout": 0.5,
        "spool_dir": str(spool_dir),
        "inner": {
            "type": "http",
            "url": f"http://127.0.0.1:{port}",
            "endpoint": "api/v1/lineage",
            "timeout": 5,
            "retry": {"total": 0},
        },
    }
    transport = {
        "type": "composite",
        "transports": [{"type": "file", "log_file_path": str(reference), "append": True}, spooling],
    }
    with sample_server.serve(source_folder) as source_env:
        result = runs.dags_test(
            "ingest_yellow_taxi_data",
            "2025-02-01",
            {"force": True},
            env={**source_env, "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport)},
        )
    assert result.succeeded, f"the DAG must succeed while its lineage backend is {behaviour}"
    emitted = {
        (e["run"]["runId"], e["eventType"], e["eventTime"]) for e in map(json.loads, reference.read_text().splitlines())
    }
    assert len(emitted) >= 7, "START and COMPLETE of the three tasks and the DAG's COMPLETE"
    assert list(spool_dir.glob("*.json")), f"with the backend {behaviour}, events must have been spooled"

    if backend is None:
        backend = RecordingBackend(port)
    backend.behaviour = "ok"
    replay = subprocess.run(
        [str(Path(sys.executable).parent / "lineage"), "replay"],
        env={
            **os.environ,
            **settings.airflow_env(paths),
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(spooling),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    time.sleep(3.5 if behaviour == "stall" else 0)  # let the stalled first attempts land too: duplicates, not losses
    backend.stop()
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert re.search(r"sent \d+, remaining 0", replay.stdout)
    assert backend.unique() == emitted, "every emitted event is received, each once after de-duplication"
    assert list(spool_dir.glob("*.json")) == []
