"""A fleet's burst is held, not dropped: 64 stock openlineage-python clients (the plain ``http`` transport, ``api_key``
auth, its default retries) posting 20 events each at once, and the OpenLineage Spark listener's own ``http``
transport in a real Spark application, all with the one ``writer`` token, against a real ``lineage serve`` on
loopback. Every event is counted in the store; none is refused (no 429, no 503, no dead letter)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.transport.http import HttpConfig, HttpTransport
from sqlalchemy import func, select

from include.core import settings
from include.lineage.emit import tokens
from include.lineage.events import event_dedup_key
from include.lineage.store import LineageStore
from include.lineage.store.schema import events_table
from include.spark import submit
from tests.support import spark_submit_command, start_lineage_serve

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
CLIENTS, EVENTS_PER_CLIENT = 64, 20
SPARK_WRITES = 8
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
JOB = settings.PROJECT_ROOT / "tests" / "jobs" / "lineage_burst_job.py"


def _client_events(client: int) -> list[RunEvent]:
    """Ten runs of one client's job, START and COMPLETE each: 20 distinct events."""
    events = []
    for run in range(EVENTS_PER_CLIENT // 2):
        run_id = str(uuid.uuid4())
        for state in (RunState.START, RunState.COMPLETE):
            events.append(
                RunEvent(
                    eventType=state,
                    eventTime=datetime.now(UTC).isoformat(),
                    run=Run(runId=run_id),
                    job=Job(namespace="fleet", name=f"client_{client:02d}.run_{run:02d}"),
                    producer=PRODUCER,
                )
            )
    return events


def _spark_conf(url: str, writer: str, witness: Path) -> dict[str, str]:
    """The project's Spark properties with the listener's own ``http`` transport posting to ``lineage serve``, inside
    openlineage-java's ``composite`` (no thread pool: one after the other) beside a ``file`` transport that witnesses
    every event the listener emitted: what the store must hold. The listener drops some events itself, before any
    transport ("Query execution is null: can't emit event", the START of a fast SQL job: OpenLineage#1646, and more
    often when its bus lags); those never reach either, and ``lineage checks`` names them."""
    conf = submit.spark_conf(lineage=True)
    conf.pop("spark.openlineage.transport.location")
    prefix = "spark.openlineage.transport"
    conf.update(
        {
            f"{prefix}.type": "composite",
            f"{prefix}.continueOnFailure": "true",
            f"{prefix}.withThreadPool": "false",
            f"{prefix}.transports.witness.type": "file",
            f"{prefix}.transports.witness.location": str(witness),
            f"{prefix}.transports.serve.type": "http",
            f"{prefix}.transports.serve.url": url,
            f"{prefix}.transports.serve.endpoint": "/api/v1/lineage",
            f"{prefix}.transports.serve.auth.type": "api_key",
            f"{prefix}.transports.serve.auth.apiKey": writer,
            "spark.openlineage.namespace": "burst",
        }
    )
    return conf


def _events(url: str) -> int:
    return requests.get(f"{url}/api/v1/health", timeout=5).json()["events"]


def test_64_stock_clients_and_the_spark_listener_sharing_the_writer_token_lose_no_event(tmp_path):
    var = tmp_path / "var"
    env = {**os.environ, "PIPELINE_VAR_DIR": str(var)}
    env.pop("LINEAGE_SERVE_TOKEN", None)
    file = tokens.ensure_tokens(var / "secrets" / tokens.TOKENS_FILE_NAME)
    writer = next(token.value for token in tokens.load_tokens(file) if token.name == "writer")
    store_url = f"sqlite:///{tmp_path / 'burst.db'}"
    witness = tmp_path / "listener-emitted.jsonl"
    server, url = start_lineage_serve(["--store", store_url, "--tokens", str(file)], env, log=tmp_path / "serve.log")
    try:
        spark = subprocess.Popen(
            spark_submit_command(
                _spark_conf(url, writer, witness), "local[1]", str(JOB), str(tmp_path / "out"), str(SPARK_WRITES), "0.5"
            ),
            env={**env, **submit.spark_submit_env()},
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "spark.log").open("w"),
        )
        deadline = time.monotonic() + 240
        while _events(url) == 0:  # the listener's first event: the application runs
            assert spark.poll() is None and time.monotonic() < deadline, (tmp_path / "spark.log").read_text()[-3000:]
            time.sleep(0.1)

        failures: list[str] = []
        gate = threading.Barrier(CLIENTS)

        def fleet_member(index: int) -> None:
            # a stock client: the plain http transport, api_key auth, openlineage-python's default retries
            config = {
                "type": "http",
                "url": url,
                "endpoint": "api/v1/lineage",
                "auth": {"type": "api_key", "apiKey": writer},
            }
            client = OpenLineageClient(transport=HttpTransport(HttpConfig.from_dict(config)))
            gate.wait()
            for lineage_event in _client_events(index):
                try:
                    client.emit(lineage_event)
                except Exception as error:  # what a stock client's caller would lose
                    failures.append(f"client {index}: {error}")

        started = time.monotonic()
        threads = [threading.Thread(target=fleet_member, args=(index,)) for index in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        fleet_seconds = time.monotonic() - started
        assert spark.wait(timeout=300) == 0, (tmp_path / "spark.log").read_text()[-3000:]
        health = requests.get(f"{url}/api/v1/health", timeout=5).json()
    finally:
        server.terminate()
        server.wait(timeout=30)

    assert failures == [], failures[:5]
    assert health["intake"]["refused"] == {"capacity": 0, "share": 0, "waited": 0}, "no 429, no 503"
    assert health["deadLetters"] == 0
    with LineageStore(store_url) as store, store.engine.connect() as conn:
        fleet = conn.execute(
            select(func.count()).select_from(events_table).where(events_table.c.job_namespace == "fleet")
        ).scalar_one()
        stored_keys = set(conn.execute(select(events_table.c.dedup_key)).scalars())
        spark_events = conn.execute(
            select(func.count()).select_from(events_table).where(events_table.c.job_namespace == "burst")
        ).scalar_one()
    assert fleet == CLIENTS * EVENTS_PER_CLIENT, "every event of every stock client is in the store"
    emitted = [json.loads(line) for line in witness.read_text().splitlines() if line.strip()]
    kinds = {(e["job"].get("facets") or {}).get("jobType", {}).get("jobType") for e in emitted}
    # each write's COMPLETE at least: a listener behind its job loses a quick command's START, never its COMPLETE
    # (Trap 36); counting START and COMPLETE of every write failed a CI run on a loaded machine (13 of 16 emitted)
    completed = {e["job"]["name"].rsplit(".", 1)[-1] for e in emitted if e["eventType"] == "COMPLETE"}
    assert {"APPLICATION", "SQL_JOB"} <= kinds and {f"out_part_{index}" for index in range(SPARK_WRITES)} <= completed
    missing = [e["eventType"] for e in emitted if event_dedup_key(e) not in stored_keys]
    assert missing == [], "every event the Spark listener emitted over its http transport is in the store"
    assert spark_events == len({event_dedup_key(e) for e in emitted})
    log = (tmp_path / "spark.log").read_text()
    assert "HttpTransportResponseException" not in log and "OpenLineageClientException" not in log
    dropped_by_the_listener = len(set(re.findall(r"can't emit event for executionId (\d+)", log)))
    print(
        f"\nburst: {CLIENTS} stock clients x {EVENTS_PER_CLIENT} events = {fleet} stored of "
        f"{CLIENTS * EVENTS_PER_CLIENT} in {fleet_seconds:.1f} s, plus {spark_events} of the {len(emitted)} events the "
        f"Spark listener emitted ({dropped_by_the_listener} SQL executions it could not emit itself); 429: 0, 503: 0, "
        "dead letters: 0"
    )
