"""Reliability through real DAG runs: a lineage backend that is down, and secrets that must not reach lineage."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from include import airflow_runs, config, local_source

pytestmark = pytest.mark.integration

SECRETS = {
    "env": "s3cr3t-from-env-7f3a",
    "spark_password": "s3cr3t-spark-password-91c2",
    "spark_secret": "s3cr3t-spark-secret-key-5d10",
    "spark_token": "s3cr3t-spark-token-c0de",
    "spark_key": "s3cr3t-spark-api-key-beef",
    "connection": "s3cr3t-connection-password-44aa",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_secrets_in_env_spark_conf_and_connections_reach_no_lineage_byte(pipeline_run):
    env = {
        "PIPELINE_DEPLOY_TOKEN": SECRETS["env"],
        "SPARK_CONF_EXTRA": json.dumps({
            "spark.hadoop.javax.jdo.option.ConnectionPassword": SECRETS["spark_password"],
            "spark.hadoop.fs.s3a.secret.key": SECRETS["spark_secret"],
            "spark.openlineage.transport.auth.token": SECRETS["spark_token"],
            "spark.myservice.api.key": SECRETS["spark_key"],
        }),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]", "password": SECRETS["connection"]}),
        "AIRFLOW_CONN_WAREHOUSE_DB": json.dumps({"conn_type": "postgres", "host": "db", "login": "u", "password": SECRETS["connection"]}),
    }
    with local_source.serve(pipeline_run.paths.var / "source") as source_env:
        result = airflow_runs.dags_test("ingest_weather_data", "2025-02-01", {"force": True}, env={**source_env, **env})
    assert result.succeeded
    leaks = []
    for path in pipeline_run.paths.lineage.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            leaks += [f"{name} in {path}" for name, secret in SECRETS.items() if secret.encode() in data]
    assert leaks == []
    scanned = sum(1 for p in pipeline_run.paths.lineage.rglob("*") if p.is_file())
    assert scanned >= 3


def test_taxi_dag_succeeds_with_the_lineage_backend_down_and_replay_delivers_every_event(pipeline_run, tmp_path):
    from tests.unit.test_spool import Backend

    port = _free_port()
    spool_dir = tmp_path / "spool"
    transport = {
        "type": "include.lineage.spool.SpoolingTransport", "timeout": 1.0, "spool_dir": str(spool_dir),
        "inner": {"type": "http", "url": f"http://127.0.0.1:{port}", "endpoint": "api/v1/lineage", "timeout": 5},
    }
    env = {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport)}
    with local_source.serve(pipeline_run.paths.var / "source") as source_env:
        result = airflow_runs.dags_test("ingest_yellow_taxi_data", "2025-02-01", {"force": True}, env={**source_env, **env})
    assert result.succeeded, "the DAG must succeed while its lineage backend is down"
    spooled = sorted(spool_dir.glob("*.json"))
    emitted = {(e["run"]["runId"], e["eventType"], e["eventTime"]) for e in (json.loads(p.read_text()) for p in spooled)}
    assert len(spooled) >= 7, "START and COMPLETE of the three tasks and the DAG's COMPLETE are spooled"

    backend = Backend(port)
    replay = subprocess.run(
        [str(Path(sys.executable).parent / "lineage"), "replay"],
        env={**os.environ, **config.airflow_env(pipeline_run.paths), **env}, capture_output=True, text=True, timeout=120,
    )
    backend.stop()
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert f"sent {len(spooled)}, remaining 0" in replay.stdout
    assert backend.unique() == emitted
    assert list(spool_dir.glob("*.json")) == []
