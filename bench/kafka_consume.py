"""How many events per second ``lineage consume`` sustains from Kafka into the lineage store (SQLite).

``python -m bench.kafka_consume [--events N]``: starts this ``var/``'s broker if needed (``pipeline kafka start``),
writes N OpenLineage events (START and COMPLETE of chained jobs, each reading its predecessor's output: the store
extends its closure table on every new edge) to a topic of their own, then times ``lineage consume`` from the first
message to caught up into a new SQLite store under ``var/bench/``. Reports events/s of wall clock and per CPU
second of the consuming process; the result is also written to ``var/bench/kafka-consume.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import uuid

from include.core import settings
from include.services import kafka_broker


def synthetic_events(count: int, chain: int = 20) -> list[str]:
    """``count`` events: pipelines of ``chain`` jobs, each job run a START and a COMPLETE."""
    events = []
    pipeline = 0
    while len(events) < count:
        pipeline += 1
        for stage in range(chain):
            run_id = str(uuid.uuid4())
            for event_type in ("START", "COMPLETE"):
                events.append(
                    json.dumps(
                        {
                            "eventType": event_type,
                            "eventTime": f"2026-11-22T00:{stage:02d}:{0 if event_type == 'START' else 1:02d}Z",
                            "producer": "https://github.com/example/bench_kafka",
                            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                            "run": {"runId": run_id, "facets": {}},
                            "job": {"namespace": "bench", "name": f"pipeline_{pipeline}.stage_{stage}"},
                            "inputs": [{"namespace": "file", "name": f"/bench/{pipeline}/{stage}"}],
                            "outputs": [{"namespace": "file", "name": f"/bench/{pipeline}/{stage + 1}"}],
                        }
                    )
                )
    return events[:count]


def bench(events: int = 10_000, bootstrap: str | None = None) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from include.lineage.consume import consume
    from include.lineage.store import LineageStore

    paths = settings.Paths.current().ensure()
    bootstrap = bootstrap or kafka_broker.ensure_running(paths).bootstrap
    tag = uuid.uuid4().hex[:8]
    topic, dead = f"bench.lineage.{tag}", f"bench.lineage.{tag}.dead-letters"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(t, num_partitions=3, replication_factor=1) for t in (topic, dead)]
    ).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for value in synthetic_events(events):
        producer.produce(topic, key=b"bench", value=value)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("bench: the broker did not acknowledge every event")
    paths.bench.mkdir(parents=True, exist_ok=True)
    store_path = paths.bench / f"kafka-consume-{tag}.db"
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    with LineageStore(f"sqlite:///{store_path}") as store:
        report = consume(
            store, bootstrap, topic=topic, dead_letter_topic=dead, group=f"bench-{tag}", log=lambda _: None
        )
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    busy = report.finished - report.first_message  # first message read to last offset committed
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    admin.delete_topics([topic, dead])
    store_path.unlink(missing_ok=True)
    result = {
        "events": events,
        "stored": report.stored,
        "seconds": round(busy, 2),
        "events_per_second": round(report.stored / busy, 1),
        "seconds_with_group_join": round(report.seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "events_per_cpu_second": round(report.stored / cpu, 1) if cpu else None,
        "lag": report.total_lag,
        "load_average": [round(x, 2) for x in __import__("os").getloadavg()],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (paths.bench / "kafka-consume.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--bootstrap-servers", default=None, help="a running broker (default: this var/'s)")
    options = parser.parse_args(argv)
    result = bench(options.events, options.bootstrap_servers)
    print(
        f"bench kafka: {result['stored']} events consumed into the store in {result['seconds']} s: "
        f"{result['events_per_second']} events/s ({result['events_per_cpu_second']} per CPU second), "
        f"load {result['load_average']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
