"""Spark events are never lost (issue 24, item 7): the taxi DAG runs with its lineage backend down, Kafka or
`lineage serve`, and succeeds; every Spark listener event of the run waits in the spool exactly once; once the backend
is back, `lineage replay` delivers each of them (compared by run id, event type and time with the local file).

The listener only writes its outbox file; the project's operator forwards it through airflow.cfg's transport (here
the README's spooling transport around the backend) after each Spark task (include/lineage/emit/spark_forwarder.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from include.airflow import runs
from include.core import settings
from include.lineage.emit import spark_forwarder
from include.lineage.store import LineageStore, iter_events
from include.services import kafka_broker
from include.sources import sample_server
from tests.support import free_port, read_topic

pytestmark = pytest.mark.integration

LINEAGE = str(Path(sys.executable).parent / "lineage")


def _identity(event: dict) -> tuple[str, str, str]:
    return (event["run"]["runId"], event["eventType"], event["eventTime"])


def _is_spark(event: dict) -> bool:
    return "/integration/spark" in str(event.get("producer", ""))


def _spooled(folder: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]


def _kafka_messages(bootstrap: str, topic: str) -> list[dict]:
    return [json.loads(message.value()) for message in read_topic(bootstrap, topic)]


class _Kafka:
    """The broker of the module's `broker` fixture, down during the run, with a topic of its own."""

    def __init__(self, request, paths, tmp_path):
        from confluent_kafka.admin import AdminClient, NewTopic

        self.paths = paths
        self.broker = request.getfixturevalue("broker")
        self.topic = f"test.spark-never-lost.{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap})
        for future in admin.create_topics([NewTopic(self.topic, num_partitions=3, replication_factor=1)]).values():
            future.result(30)
        self.inner = {
            "type": "kafka",
            "topic": self.topic,
            "config": {"bootstrap.servers": self.broker.bootstrap, "acks": "all"},
        }

    def down(self) -> None:
        kafka_broker.stop(self.paths)

    def up(self) -> None:
        kafka_broker.ensure_running(self.paths)

    def delivered(self) -> list[dict]:
        return _kafka_messages(self.broker.bootstrap, self.topic)

    def close(self) -> None:
        kafka_broker.ensure_running(self.paths)  # the module's other tests, whatever happened


class _LineageServe:
    """`lineage serve` on a port chosen now, with a store of its own, not started until the run is over."""

    def __init__(self, request, paths, tmp_path):
        self.port = free_port()
        self.store = f"sqlite:///{tmp_path / 'served.db'}"
        self.log = tmp_path / "serve.log"
        self.process = None
        self.inner = {
            "type": "http",
            "url": f"http://127.0.0.1:{self.port}",
            "endpoint": "api/v1/lineage",
            "timeout": 5,
            "auth": {"type": "include.lineage.emit.tokens.LineageServeTokenProvider"},
        }

    def down(self) -> None:
        pass

    def up(self) -> None:
        """Started on the port the transport was given (tests.support.start_lineage_serve chooses its own)."""
        import requests

        self.process = subprocess.Popen(
            [LINEAGE, "serve", "--port", str(self.port), "--store", self.store],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{self.port}/api/v1/health", timeout=1).ok:
                    return
            except requests.ConnectionError:
                pass
            assert self.process.poll() is None and time.monotonic() < deadline, self.log.read_text()[-2000:]
            time.sleep(0.2)

    def delivered(self) -> list[dict]:
        with LineageStore(self.store) as store:
            return list(iter_events(store))

    def close(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)


@pytest.mark.parametrize("kind", ["kafka", "lineage_serve"])
def test_taxi_dag_with_its_backend_down_succeeds_and_replay_delivers_every_spark_event_once(
    kind, request, paths, source_folder, tmp_path
):
    backend = (_Kafka if kind == "kafka" else _LineageServe)(request, paths, tmp_path)
    spool = tmp_path / "spool"
    transport = {
        "type": "include.lineage.emit.spool.SpoolingTransport",
        "timeout": 0.5,
        "spool_dir": str(spool),
        "inner": backend.inner,
    }
    local = paths.spark_lineage_events
    before = local.stat().st_size if local.exists() else 0
    try:
        backend.down()
        env = {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport)}
        with sample_server.serve(source_folder) as source_env:
            started = time.monotonic()
            # reprocess: the month may already be loaded in this var/ (the other backend's run, another module),
            # and a recognised re-load starts no Spark application (spark_jobs/common/loaded_source.py)
            conf = {"force": True, "reprocess": True}
            result = runs.dags_test("ingest_yellow_taxi_data", "2025-02-01", conf, env={**source_env, **env})
            seconds = time.monotonic() - started
        assert result.succeeded, f"the DAG must succeed while {kind} is down"

        with local.open("rb") as stream:
            stream.seek(before)
            ours = [json.loads(line) for line in stream.read().decode().splitlines() if line.strip()]
        assert len(ours) >= 6, "the stage and merge applications' START and COMPLETE events, in the local file"
        assert all(_is_spark(event) for event in ours)
        expected = Counter(map(_identity, ours))
        assert not [o.path for o in spark_forwarder.pending_outboxes(paths) if not o.is_live()], "all forwarded"
        in_spool = Counter(_identity(e) for e in _spooled(spool) if _is_spark(e))
        assert in_spool == expected, "every Spark event of the run waits in the spool, once"

        backend.up()
        replay = subprocess.run(
            [LINEAGE, "replay"],
            env={**os.environ, **settings.airflow_env(paths), **env},
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert replay.returncode == 0, replay.stdout + replay.stderr
        assert "remaining 0" in replay.stdout
        assert _spooled(spool) == []
        delivered = Counter(_identity(e) for e in backend.delivered() if _is_spark(e))
        assert delivered == expected, "after the backend is back, every Spark event delivered exactly once"
        print(
            f"\n{kind} down: taxi DAG {seconds:.1f} s, {len(ours)} Spark events spooled then delivered; "
            f"{replay.stdout.strip().splitlines()[-1]}"
        )
    finally:
        backend.close()
