"""`lineage consume` refuses what `lineage serve` refuses (include/lineage/validation.check_incoming): through a real
broker, an event whose standard facet has the wrong shape is reported with its topic, partition and offset and goes
to the dead-letter topic with the reason, while the events around it are stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from include.lineage.events import event_dedup_key
from include.lineage.store import LineageStore
from include.lineage.store.schema import events_table
from tests.support import read_topic

pytestmark = pytest.mark.integration

LINEAGE = str(Path(sys.executable).parent / "lineage")
SCHEMA_FACET = "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"


def _event(job: str, fields) -> dict:
    return {
        "eventType": "COMPLETE",
        "eventTime": "2026-11-24T00:00:00.000000Z",
        "producer": "https://example.com/test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "consume-validation", "name": job},
        "inputs": [
            {
                "namespace": "file",
                "name": f"/in/{job}",
                "facets": {"schema": {"_producer": "p", "_schemaURL": SCHEMA_FACET, "fields": fields}},
            }
        ],
        "outputs": [{"namespace": "file", "name": f"/out/{job}"}],
    }


def test_consume_dead_letters_an_event_lineage_serve_would_refuse_naming_facet_and_offset(broker, tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, dead = f"test.validation.{uuid.uuid4().hex[:6]}", f"test.validation.dead.{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics(
        [NewTopic(t, num_partitions=1, replication_factor=1) for t in (topic, dead)]
    ).values():
        future.result(30)
    good = [_event("good_1", [{"name": "a", "type": "int"}]), _event("good_2", [])]
    bad = _event("bad", "a:int,b:string")  # schema.fields must be an array
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for event in (good[0], bad, good[1]):
        producer.produce(topic, key=b"k", value=json.dumps(event).encode())
    assert producer.flush(30) == 0

    store = f"sqlite:///{tmp_path / 'store.db'}"
    consumed = subprocess.run(
        [LINEAGE, "consume", "--bootstrap-servers", broker.bootstrap, "--store", store, "--topic", topic]
        + ["--dead-letter-topic", dead, "--idle-timeout", "20"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
    )
    assert consumed.returncode == 0, consumed.stdout + consumed.stderr
    assert "read 3, stored 2 new, 0 already stored, 1 to the dead-letter topic" in consumed.stdout
    reason = "facet 'schema' at inputs[0].facets.schema does not match its schema at $.fields"
    assert f"{topic}/0@1 is not stored: {reason}" in consumed.stdout, consumed.stdout
    with LineageStore(store) as opened, opened.engine.connect() as conn:
        from sqlalchemy import select

        stored = sorted(conn.execute(select(events_table.c.dedup_key)).scalars())
    assert stored == sorted(map(event_dedup_key, good))
    [letter] = read_topic(broker.bootstrap, dead)
    headers = {name: value.decode() for name, value in letter.headers()}
    assert json.loads(letter.value()) == bad, "the message unchanged"
    assert headers["lineage.error"].startswith(reason)
    assert (headers["lineage.topic"], headers["lineage.partition"], headers["lineage.offset"]) == (topic, "0", "1")
