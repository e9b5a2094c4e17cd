"""Lineage through a real queue: Apache Kafka's own broker (KRaft, one node, 127.0.0.1) started by the project.

The README's Kafka transport line with the broker down then restarted during a real taxi DAG run; `lineage consume`
into the lineage store with its dead-letter topic; a consumer killed between the store and the offset commit.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from include.core import naming, settings
from include.lineage.events import event_dedup_key
from include.lineage.store import LineageStore
from include.lineage.store.schema import events_table
from include.services import kafka_broker
from include.sources import downloads, sample_server
from tests.integration.isolated_var import IsolatedVar
from tests.integration.listening import all_threads_stopped, pid_listening_on
from tests.support import free_port, read_topic

pytestmark = pytest.mark.integration

LINEAGE = str(Path(sys.executable).parent / "lineage")
CONSUME_THEN_CRASH = settings.PROJECT_ROOT / "tests" / "jobs" / "consume_then_crash.py"
MONTH = (2025, 1)
ROWS = 2_000
# The broker comes back once the DAG run's START and the download task's START and COMPLETE wait in the spool.
SPOOLED_BEFORE_RESTART = 3


def readme_kafka_transport(bootstrap: str) -> str:
    readme = (settings.PROJECT_ROOT / "README.md").read_text()
    section = readme.split("#### Kafka", 1)[1]
    line = re.search(r"^transport = (.+)$", section, re.MULTILINE).group(1)
    assert "kafka:9092" in line, "the README's Kafka line names its broker kafka:9092"
    return line.replace("kafka:9092", bootstrap)


def create_topics(bootstrap: str, *topics: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, num_partitions=3, replication_factor=1) for t in topics]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, values: list[bytes | str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, key=b"test", value=value)
    assert producer.flush(30) == 0


def run_event(job: str, event_type: str = "COMPLETE", **extra) -> dict:
    return {
        "eventType": event_type,
        "eventTime": "2026-11-22T00:00:00.000000Z",
        "producer": "https://example.com/test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "kafka-test", "name": job},
        "inputs": [{"namespace": "file", "name": f"/in/{job}"}],
        "outputs": [{"namespace": "file", "name": f"/out/{job}"}],
        **extra,
    }


def consume(bootstrap: str, store: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LINEAGE, "consume", "--bootstrap-servers", bootstrap, "--store", store, "--idle-timeout", "20", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def stored_keys(store_url: str) -> list[str]:
    from sqlalchemy import select

    with LineageStore(store_url) as store, store.engine.connect() as conn:
        return [row[0] for row in conn.execute(select(events_table.c.dedup_key))]


def test_malformed_events_go_to_the_dead_letter_topic_with_their_reason_while_the_others_are_stored(broker, tmp_path):
    topic, dead = "test.malformed.events", "test.malformed.dead-letters"
    create_topics(broker.bootstrap, topic, dead)
    good = [run_event(f"job_{i}") for i in range(5)]
    no_run_id = run_event("broken")
    no_run_id["run"] = {"facets": {}}
    values = [json.dumps(good[0]), b"{not json", json.dumps(good[1]), json.dumps(no_run_id)]
    values += [json.dumps(e) for e in good[2:]]
    produce(broker.bootstrap, topic, values)
    store = f"sqlite:///{tmp_path / 'store.db'}"

    first = consume(broker.bootstrap, store, "--topic", topic, "--dead-letter-topic", dead)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "read 7, stored 5 new, 0 already stored, 2 to the dead-letter topic" in first.stdout
    assert "lag 0 " in first.stdout
    assert sorted(stored_keys(store)) == sorted(event_dedup_key(e) for e in good)

    letters = read_topic(broker.bootstrap, dead)
    reasons = {m.value(): dict(m.headers())["lineage.error"].decode() for m in letters}
    assert set(reasons) == {b"{not json", json.dumps(no_run_id).encode()}, "unchanged payloads"
    assert reasons[b"{not json"].startswith("not JSON")
    # the check lineage serve runs too (include/lineage/validation.check_incoming): the schema's words and the path
    assert reasons[json.dumps(no_run_id).encode()] == (
        'not an OpenLineage RunEvent (OpenLineage.json) at $.run: "runId" is a required property'
    )
    assert {dict(m.headers())["lineage.topic"] for m in letters} == {topic.encode()}

    # Replaying the dead letters: both still fail; they stay (written again, one more attempt), nothing is stored.
    replay = consume(broker.bootstrap, store, "--topic", topic, "--dead-letter-topic", dead, "--replay-dead-letters")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "read 2, stored 0 new, 0 already stored, 2 to the dead-letter topic" in replay.stdout
    again = [m for m in read_topic(broker.bootstrap, dead) if dict(m.headers())["lineage.attempts"] == b"2"]
    assert {m.value() for m in again} == set(reasons)
    assert len(stored_keys(store)) == 5


def test_dead_letters_that_can_be_stored_now_are_stored_by_the_replay(broker, tmp_path):
    """A dead letter whose reason went away (here: a store that refused it) is stored by --replay-dead-letters."""
    topic, dead = "test.replay.events", "test.replay.dead-letters"
    create_topics(broker.bootstrap, topic, dead)
    event = run_event("late")
    produce(broker.bootstrap, dead, [json.dumps(event)])  # as the consumer would have written it
    store = f"sqlite:///{tmp_path / 'store.db'}"
    replay = consume(broker.bootstrap, store, "--topic", topic, "--dead-letter-topic", dead, "--replay-dead-letters")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "read 1, stored 1 new" in replay.stdout
    assert stored_keys(store) == [event_dedup_key(event)]


def test_a_consumer_killed_between_the_store_and_the_offset_commit_stores_nothing_twice(broker, tmp_path):
    topic, dead = "test.crash.events", "test.crash.dead-letters"
    create_topics(broker.bootstrap, topic, dead)
    events = [run_event(f"job_{i}", event_type) for i in range(20) for event_type in ("START", "COMPLETE")]
    produce(broker.bootstrap, topic, [json.dumps(e) for e in events])
    store = f"sqlite:///{tmp_path / 'store.db'}"

    killed = subprocess.run(
        [sys.executable, str(CONSUME_THEN_CRASH), broker.bootstrap, store, topic, dead],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(settings.PROJECT_ROOT)},
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    after_crash = stored_keys(store)
    assert after_crash, "the first batch reached the store before the kill"

    restarted = consume(broker.bootstrap, store, "--topic", topic, "--dead-letter-topic", dead)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert f"{len(after_crash)} already stored" in restarted.stdout, "the uncommitted batch was read again"
    keys = stored_keys(store)
    assert len(keys) == len(set(keys)) == len(events)
    assert sorted(keys) == sorted(event_dedup_key(e) for e in events)
    assert "lag 0 " in restarted.stdout


def test_readme_kafka_transport_costs_at_most_its_timeout_per_event_with_the_broker_down_and_loses_nothing(
    broker, tmp_path
):
    """The README's line, broker down: each emit waits at most the transport's timeout for the broker, then makes the
    event durable in the spool (a file written and fsynced) and returns; once the broker is back, `replay` delivers
    each event once (a late acknowledgement removes the spooled copy).

    The bound is the timeout plus the spool's own durable write, measured beside each emit on a spool of its own: on
    a loaded disk the first emit took 1.33 s (CI, 28 November), which is not waiting for the broker. Without the
    bound an emit waits for the project's Kafka transport's acknowledgement timeout (6 s)."""
    from openlineage.client.transport import get_default_factory

    from include.lineage.emit.spool import Spool

    topic = "test.down.events"
    create_topics(broker.bootstrap, topic)
    down = f"127.0.0.1:{free_port()}"
    params = json.loads(readme_kafka_transport(down))
    params["spool_dir"] = str(tmp_path / "spool")
    params["inner"]["topic"] = topic
    transport = get_default_factory().create(params)
    events = [run_event(f"job_{i}") for i in range(4)]
    probe = Spool(tmp_path / "durable-write-probe")
    costs, durable_writes = [], []
    for event in events:
        started = time.monotonic()
        transport.emit(json.dumps(event))
        costs.append(time.monotonic() - started)
        started = time.monotonic()
        probe.append(json.dumps(event))
        durable_writes.append(time.monotonic() - started)
    print(
        f"\nbroker down: {max(costs) * 1000:.0f} ms per event at most ({params['timeout']} s bound; a durable write "
        f"of the spool alone {max(durable_writes) * 1000:.0f} ms at most)"
    )
    for cost, durable_write in zip(costs, durable_writes, strict=True):
        # a second of scheduling on a loaded machine; an emit that waited for the broker takes 6 s (message.timeout.ms
        # of 5 s, then the transport's second)
        assert cost <= params["timeout"] + 2 * durable_write + 1.0, (costs, durable_writes)
    assert len(transport.spool) == len(events)

    params["inner"]["config"]["bootstrap.servers"] = broker.bootstrap
    back = get_default_factory().create(params)
    sent, remaining = back.replay()
    while remaining and sent:
        more, remaining = back.replay()
        sent += more
    assert remaining == 0
    values = [json.loads(m.value()) for m in read_topic(broker.bootstrap, topic)]
    assert Counter(map(event_dedup_key, values)) == Counter(map(event_dedup_key, events))


@pytest.fixture(scope="module")
def taxi_through_kafka(broker, paths):
    """The taxi DAG in a var/ of its own with the README's Kafka line, the broker down when the run starts and started
    again once the DAG's and the first task's events wait in the spool; its Spark jobs' listener sends to the same topic."""
    run = IsolatedVar(paths.var / "kafka-run", {"KAFKA_PORT": str(broker.port)}).setup()
    source_root = paths.var / "kafka-run-source"
    sample_server.publish_months(source_root, [MONTH], ROWS)
    reference = run.paths.var / "emitted.jsonl"  # what Airflow emitted, recorded independently
    transport = json.dumps(
        {
            "type": "composite",
            "continue_on_failure": True,
            "transports": [
                {"type": "file", "log_file_path": str(reference), "append": True},
                json.loads(readme_kafka_transport(broker.bootstrap)),
            ],
        }
    )
    kafka_broker.stop(paths)
    spool = run.paths.lineage_spool
    restarted = {}
    run_over = threading.Event()

    def restart_when_spooled() -> None:
        while not run_over.is_set() and len(list(spool.glob("*.json"))) < SPOOLED_BEFORE_RESTART:
            time.sleep(0.2)
        restarted["spooled_before_restart"] = len(list(spool.glob("*.json")))
        if not run_over.is_set():
            kafka_broker.ensure_running(paths)
            restarted["during_run"] = True

    watcher = threading.Thread(target=restart_when_spooled, daemon=True)
    watcher.start()
    with sample_server.serve(source_root) as source_env:
        env = {
            **source_env,
            "AIRFLOW__OPENLINEAGE__TRANSPORT": transport,
            settings.SPARK_LINEAGE_KAFKA.name: broker.bootstrap,
        }
        try:
            result = run.dags_test("taxi", "ingest_yellow_taxi_data", "2025-02-01", env=env)
        finally:
            run_over.set()
            watcher.join(180)
            kafka_broker.ensure_running(paths)  # for the replay and the other tests, whatever happened
            run.stop()  # its catalog server
        replay = subprocess.run(
            [LINEAGE, "replay"],
            env={
                **run.env,
                **settings.airflow_env(run.paths),
                "AIRFLOW__OPENLINEAGE__TRANSPORT": readme_kafka_transport(broker.bootstrap),
            },
            capture_output=True,
            text=True,
            timeout=300,
        )
    return {
        "run": run,
        "result": result,
        "reference": reference,
        "replay": replay,
        "source_env": source_env,
        **restarted,
    }


def test_taxi_dag_through_kafka_with_the_broker_down_at_start_delivers_every_event_once(taxi_through_kafka, broker):
    outcome = taxi_through_kafka
    assert outcome["result"].succeeded
    assert outcome["spooled_before_restart"] >= SPOOLED_BEFORE_RESTART, "a task ran with the broker down"
    assert outcome.get("during_run"), "the broker came back while the DAG ran"
    assert outcome["replay"].returncode == 0, outcome["replay"].stdout + outcome["replay"].stderr
    assert not list(outcome["run"].paths.lineage_spool.glob("*.json")), "nothing left in the spool"
    print(
        f"\ntaxi DAG with the broker down at start: {outcome['result'].seconds:.1f} s, "
        f"{outcome['spooled_before_restart']} event(s) spooled before the restart; {outcome['replay'].stdout.strip()}"
    )

    emitted = [json.loads(line) for line in outcome["reference"].read_text().splitlines() if line.strip()]
    messages = read_topic(broker.bootstrap, naming.KAFKA_EVENTS_TOPIC)
    values = [json.loads(m.value()) for m in messages]
    airflow_on_topic = [v for v in values if "spark" not in v["producer"]]
    assert len(emitted) >= 4
    assert Counter(map(event_dedup_key, airflow_on_topic)) == Counter(map(event_dedup_key, emitted)), (
        "every Airflow event on the topic exactly once"
    )
    spark = [(m, v) for m, v in zip(messages, values, strict=True) if "spark" in v["producer"]]
    assert spark, "the Spark listener's events are on the same topic"
    dag_key = f"run:{emitted[0]['job']['namespace']}/ingest_yellow_taxi_data".encode()
    ours = [m for m in messages if m.key() == dag_key]
    assert {m.key() for m, _ in spark} == {dag_key}, "Spark events keyed by their root job, the DAG"
    assert len({m.partition() for m in ours}) == 1, "one DAG's Airflow and Spark events on one partition"
    others = Counter((m.key(), json.loads(m.value())["job"]["name"]) for m in messages if m.key() != dag_key)
    assert not others, f"every event of the run keyed by its DAG: {others}"


def test_lineage_consume_fills_the_store_and_upstream_of_raw_taxi_reaches_the_tlc_source(
    taxi_through_kafka, broker, monkeypatch
):
    run = taxi_through_kafka["run"]
    store = f"sqlite:///{run.paths.lineage / 'kafka-store.db'}"
    consumed = consume(broker.bootstrap, store)
    assert consumed.returncode == 0, consumed.stdout + consumed.stderr
    print(f"\n{consumed.stdout.strip()}")
    assert "lag 0 " in consumed.stdout
    assert ", 0 to the dead-letter topic" in consumed.stdout
    upstream = subprocess.run(
        [LINEAGE, "upstream", f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}", "--json", "--store", store],
        capture_output=True,
        text=True,
        env={**run.env, **settings.airflow_env(run.paths)},
        timeout=120,
    )
    assert upstream.returncode == 0, upstream.stderr
    ids = {node["id"] for node in json.loads(upstream.stdout)["graph"]}
    monkeypatch.setenv("TLC_BASE_URL", taxi_through_kafka["source_env"]["TLC_BASE_URL"])
    tlc = naming.source_url_id(downloads.tlc_url(f"{MONTH[0]}-{MONTH[1]:02d}"))
    assert f"dataset:{tlc.namespace}:{tlc.name}" in ids


def test_pipeline_kafka_names_kafka_port_when_something_else_holds_it(tmp_path):
    import socket

    pipeline = str(Path(sys.executable).parent / "pipeline")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        env = {**os.environ, "PIPELINE_VAR_DIR": str(tmp_path / "var"), "KAFKA_PORT": str(port)}
        started = subprocess.run([pipeline, "kafka", "start"], capture_output=True, text=True, env=env, timeout=120)
    assert started.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in started.stderr
    assert "set KAFKA_PORT to a free port" in started.stderr
    status = subprocess.run([pipeline, "kafka", "status"], capture_output=True, text=True, env=env, timeout=120)
    assert status.returncode == 1 and "no kafka broker running" in status.stdout


def test_a_late_acknowledgement_after_spooling_leaves_one_copy_on_the_topic_and_none_in_the_spool(
    broker, paths, tmp_path
):
    """The broker frozen (SIGSTOP) while events are sent: each send returns within the bound and the events wait in
    the spool; the next send replays the first, which is still in flight, without producing it again. Thawed, the
    broker acknowledges the in-flight event late and its spooled copy is removed; a replay sends the rest. Each
    event is on the topic once."""
    from openlineage.client.transport import get_default_factory

    topic = "test.late.events"
    create_topics(broker.bootstrap, topic)
    params = json.loads(readme_kafka_transport(broker.bootstrap))
    params["spool_dir"] = str(tmp_path / "spool")
    params["inner"]["topic"] = topic
    transport = get_default_factory().create(params)
    warm, first, second = (run_event(name) for name in ("warm", "first", "second"))
    transport.emit(json.dumps(warm))  # connected, metadata known
    # The process that serves the port, asked of the kernel: the taxi run's test restarted the broker (not the
    # fixture's pid), and a state file naming another process would leave the broker answering (a failed run saw one
    # event acknowledged while "frozen"). Sending starts only once every thread of it is stopped.
    pid = pid_listening_on(broker.port)
    assert pid is not None and pid == kafka_broker.running(paths).pid, f"broker port {broker.port} served by {pid}"
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 10
        while not all_threads_stopped(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all_threads_stopped(pid), f"the broker (pid {pid}) did not stop within 10 s of SIGSTOP"
        for event in (first, second):
            started = time.monotonic()
            transport.emit(json.dumps(event))
            assert time.monotonic() - started <= params["timeout"] + 0.5
        assert len(transport.spool) == 2
    finally:
        os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 30
    while len(transport.spool) > 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    pending = [json.loads(path.read_text()) for path in transport.spool.pending()]
    assert [event_dedup_key(e) for e in pending] == [event_dedup_key(second)], "the late ack removed the first"
    assert transport.replay() == (1, 0)
    values = [json.loads(m.value()) for m in read_topic(broker.bootstrap, topic)]
    assert Counter(map(event_dedup_key, values)) == Counter(map(event_dedup_key, (warm, first, second)))
