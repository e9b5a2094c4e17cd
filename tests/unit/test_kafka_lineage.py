"""Pure parts of lineage through Kafka: message keys, the consumer's parsing and report, the Spark listener's setting,
the broker's jars in the lock."""

from __future__ import annotations

import json

import pytest

from include.core import jars, naming, settings
from include.lineage.consume import ConsumeReport, parse
from include.lineage.emit.kafka_transport import AckedKafkaTransport, message_key
from include.lineage.emit.spool import SpoolingConfig, SpoolingTransport
from include.lineage.errors import InvalidEventError
from include.services import kafka_broker
from include.spark import submit


def _event(parent: dict | None = None) -> dict:
    facets = {"parent": parent} if parent else {}
    return {
        "eventType": "START",
        "eventTime": "2026-11-22T00:00:00Z",
        "run": {"runId": "r", "facets": facets},
        "job": {"namespace": "ns", "name": "dag.task"},
    }


def test_message_key_is_the_root_job_then_the_parent_job_then_the_job():
    root = {"run": {"runId": "d"}, "job": {"namespace": "ns", "name": "dag"}}
    parent = {"run": {"runId": "t"}, "job": {"namespace": "ns", "name": "dag.task"}}
    assert message_key(_event({**parent, "root": root})) == "run:ns/dag"
    assert message_key(_event(parent)) == "run:ns/dag.task"
    assert message_key(_event()) == "run:ns/dag.task"
    assert message_key({"eventTime": "t", "dataset": {"namespace": "file", "name": "/x"}}) == "dataset:file//x"
    assert message_key({"eventTime": "t", "job": {"namespace": "ns", "name": "j"}}) == "job:ns/j"


def test_a_spark_application_and_its_airflow_task_share_the_key_of_their_dag():
    dag = {"namespace": "nyc_taxi_pipeline", "name": "ingest_yellow_taxi_data"}
    task_event = _event(
        {
            "run": {"runId": "t"},
            "job": dag | {"name": "ingest_yellow_taxi_data.stage"},
            "root": {"run": {"runId": "d"}, "job": dag},
        }
    )
    spark_event = _event(
        {
            "run": {"runId": "s"},
            "job": dag | {"name": "ingest_yellow_taxi_data.stage"},
            "root": {"run": {"runId": "d"}, "job": dag},
        }
    )
    dag_event = {**_event(), "job": dag}
    assert message_key(task_event) == message_key(spark_event) == message_key(dag_event)


def test_the_spool_sends_kafka_through_the_acknowledging_transport(tmp_path):
    params = {
        "timeout": 0.5,
        "spool_dir": str(tmp_path),
        "inner": {"type": "kafka", "topic": "t", "config": {"bootstrap.servers": "127.0.0.1:1", "acks": "all"}},
    }
    transport = SpoolingTransport(SpoolingConfig.from_dict(params))
    assert isinstance(transport.inner, AckedKafkaTransport)
    assert transport.inner.producer_config["partitioner"] == "murmur2_random"
    assert transport.inner.producer_config["acks"] == "all"


def test_kafka_transport_without_bootstrap_servers_names_the_setting():
    with pytest.raises(ValueError, match="bootstrap.servers"):
        AckedKafkaTransport({"topic": "t", "config": {}})


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"{oops", "not JSON"),
        (None, "empty message"),
        (b"[]", "JSON object"),
        (
            json.dumps(
                {"eventTime": "2026-11-22T00:00:00Z", "run": {}, "job": {"namespace": "n", "name": "j"}}
            ).encode(),
            "runId",
        ),
        (
            json.dumps(
                {
                    "eventTime": "yesterday",
                    "producer": "p",
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
                    "job": {"namespace": "n", "name": "j"},
                }
            ).encode(),
            "ISO-8601",
        ),
    ],
)
def test_parse_gives_the_reason_a_message_is_not_an_event(value, reason):
    with pytest.raises(InvalidEventError, match=reason):
        parse(value)


def test_a_message_whose_time_is_before_the_year_1_in_utc_goes_to_the_dead_letters_not_through_the_consumer():
    """A valid ISO-8601 time whose UTC instant is before the year 1 raised OverflowError out of ``parse``: not one of
    the reasons the consumer sends to the dead-letter topic, so `lineage consume` stopped on that message, left it
    uncommitted, and stopped on it again at every start."""
    with pytest.raises(InvalidEventError, match="outside the years 1 to 9999"):
        parse(json.dumps(_valid_event(eventTime="0001-01-01T00:00:00+14:00")).encode())


def _valid_event(**changes) -> dict:
    return {
        **_event(),
        "producer": "https://example.com/test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        **changes,
    }


def test_parse_accepts_an_event():
    event = _valid_event()
    assert parse(json.dumps(event).encode()) == event


SCHEMA_FACET = "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"producer": None}, "producer"),
        ({"eventType": ["START"]}, "eventType"),
        ({"eventTime": "2026-11-22T00:00:00Z", "schemaURL": 7}, "schemaURL"),
        (
            {
                "inputs": [
                    {
                        "namespace": "n",
                        "name": "d",
                        "facets": {"schema": {"_producer": "p", "_schemaURL": SCHEMA_FACET, "fields": "a,b"}},
                    }
                ]
            },
            r"facet 'schema' at inputs\[0\]\.facets\.schema does not match its schema at \$\.fields",
        ),
        ({"run": {"runId": "r", "facets": {"custom": "a string"}}}, "facet 'custom' at run.facets.custom is a str"),
        ({"outputs": [{"namespace": "n", "name": f"d{i}"} for i in range(20_001)]}, "LINEAGE_MAX_EVENT_DATASETS"),
        (
            {
                "job": {
                    "namespace": "n",
                    "name": "j",
                    "facets": {"big": {"_producer": "p", "_schemaURL": "u", "x": "y" * 3_000_000}},
                }
            },
            "LINEAGE_MAX_FACET_BYTES",
        ),
    ],
    ids=[
        "no-producer",
        "type-list",
        "schema-url-number",
        "schema-facet-fields-string",
        "custom-facet-string",
        "too-many-datasets",
        "facet-too-big",
    ],
)
def test_consume_refuses_what_lineage_serve_refuses_with_the_same_reason(changes, reason):
    """`lineage consume` runs the one check `lineage serve` runs (include/lineage/validation.check_incoming): a
    message either refuses is refused by both, with the same message naming the facet and its JSON path."""
    from include.lineage.api.server import check_incoming

    value = json.dumps({k: v for k, v in _valid_event(**changes).items() if v is not None}).encode()
    with pytest.raises(InvalidEventError, match=reason) as consumed:
        parse(value)
    with pytest.raises(InvalidEventError) as served:
        check_incoming(json.loads(value))
    assert str(consumed.value) == str(served.value)


def test_parse_refuses_json_nested_deeper_than_python_parses():
    with pytest.raises(InvalidEventError, match="not JSON"):
        parse(b"[" * 100_000 + b"]" * 100_000)


def test_report_line_names_counts_and_lag_per_partition():
    report = ConsumeReport(read=7, stored=5, duplicates=0, dead_letters=2, seconds=1.25, lag={1: 3, 0: 0})
    assert report.line() == (
        "lineage consume: read 7, stored 5 new, 0 already stored, 2 to the dead-letter topic, in 1.2 s; "
        "lag 3 (partition 0: 0, 1: 3)"
    )


def test_spark_listener_always_writes_its_file_and_kafka_is_where_the_forwarder_sends(monkeypatch, tmp_path):
    """The Java listener has no spool: it only writes its file, whatever SPARK_LINEAGE_KAFKA_BOOTSTRAP_SERVERS says;
    that setting sends the forwarded Spark events to its Kafka, through a spooling transport of their own."""
    from include.lineage.emit import spark_forwarder

    paths = settings.Paths(tmp_path)
    monkeypatch.delenv(settings.SPARK_LINEAGE_KAFKA.name, raising=False)
    default = submit.spark_conf(paths, settings.CatalogSettings.current(paths))
    monkeypatch.setenv(settings.SPARK_LINEAGE_KAFKA.name, "127.0.0.1:19092")
    conf = submit.spark_conf(paths, settings.CatalogSettings.current(paths))
    for spark in (default, conf):
        assert spark["spark.openlineage.transport.type"] == "file"
        assert spark["spark.openlineage.transport.location"] == str(paths.spark_lineage_events)
        assert "kafka" not in spark["spark.driver.extraClassPath"]
        assert not any(key.startswith("spark.openlineage.transport.properties") for key in spark)
    target = spark_forwarder.target_configuration(paths)
    assert target["type"] == "include.lineage.emit.spool.SpoolingTransport"
    assert target["spool_dir"] == spark_forwarder.SPARK_SPOOL
    assert target["inner"] == {
        "type": "kafka",
        "topic": naming.KAFKA_EVENTS_TOPIC,
        "config": {"bootstrap.servers": "127.0.0.1:19092", "acks": "all"},
    }


def test_the_broker_role_pins_kafka_4_and_every_jar_with_a_digest():
    _, artifacts = jars.load_lock()
    broker = [a for a in artifacts if kafka_broker.JAR_ROLE in a.roles]
    assert {a.coordinates for a in broker} >= {
        "org.apache.kafka:kafka_2.13:4.3.1",
        "org.apache.kafka:kafka-clients:4.3.1",
    }
    assert all(len(a.sha256) == 64 and a.size > 0 for a in broker)
    assert not any("zookeeper" in a.artifact for a in broker)
    assert [a.coordinates for a in artifacts if kafka_broker.SPARK_JAR_ROLE in a.roles] == [
        "org.apache.kafka:kafka-clients:4.3.1"
    ]
