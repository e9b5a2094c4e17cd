"""OpenLineage to Kafka where "sent" means "acknowledged by the broker": the inner transport of the spooling transport.

The spooling transport (``include/lineage/emit/spool.py``) selects it for an inner ``{"type": "kafka", ...}`` (the same
configuration as openlineage-python's ``KafkaTransport``: ``topic``, ``config``, optional ``messageKey``).
openlineage-python's own transport is not usable behind a spool:

- its delivery callback only logs an error, and ``flush`` returns once the message *failed* as well, so ``emit``
  returns normally for an event the broker never got: the spool would count it as sent, and lose it;
- it keys an event given as a dict (what the spool replays) with ``None``, so a replayed event lands on any
  partition, out of order with its run;
- a producer created before ``os.fork`` (the Airflow provider forks to emit unless ``[openlineage]
  execute_in_thread``, which the project's airflow.cfg sets) has no threads in the child: the event waits in a dead
  queue;
- ``close()`` flushes without a bound (up to ``message.timeout.ms``, 5 minutes by default, with the broker down).

Here ``emit`` returns only after the broker acknowledged the event (``acks=all``) and raises
otherwise; the spool gives it ``timeout`` seconds and keeps the event when it does not return in time. Re-sending an
event that is still in flight (the spool's replay of an event whose first attempt is late) waits for that attempt
instead of producing a second copy, so a late acknowledgement never leaves a duplicate on the topic. Messages are
keyed like OpenLineage's Java and Python transports (``run:<root job namespace>/<root job name>``, else the parent
job, else the job), and partitioned with ``murmur2_random``, the Java client's partitioner: an Airflow task's events
and the Spark listener's events of the same DAG land on one partition, in order.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from typing import Any

from openlineage.client.serde import Serde

from include.lineage.errors import KafkaDeliveryError

PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    # No idempotent producer: its producer-id handshake waits for the broker's transaction coordinator (seconds after a
    # restart: "Coordinator load in progress"), longer than the spool's bound; a fresh process's first event would be
    # spooled while it is still being delivered.
    "partitioner": "murmur2_random",  # the Java client's: the same key lands on the same partition from Spark
    "linger.ms": 0,
    "message.timeout.ms": 5000,  # a message not acknowledged by then fails (the spool keeps the event)
    "reconnect.backoff.ms": 100,
    "reconnect.backoff.max.ms": 1000,
}


def message_key(event: dict) -> str | None:
    """OpenLineage's Kafka message key of an event given as a dict (the Java and Python transports' rule)."""
    if "run" not in event:
        if "dataset" in event:
            return f"dataset:{event['dataset'].get('namespace')}/{event['dataset'].get('name')}"
        if "job" in event:
            return f"job:{event['job'].get('namespace')}/{event['job'].get('name')}"
        return None
    parent = ((event.get("run") or {}).get("facets") or {}).get("parent") or {}
    for job in ((parent.get("root") or {}).get("job"), parent.get("job"), event.get("job")):
        if job and job.get("namespace") and job.get("name"):
            return f"run:{job['namespace']}/{job['name']}"
    return None


class _Delivery:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: Any = None

    def settle(self, error, _message) -> None:
        self.error = error
        self.done.set()


class AckedKafkaTransport:
    kind = "kafka"

    def __init__(self, params: dict[str, Any]) -> None:
        if not isinstance(params.get("config"), dict) or "bootstrap.servers" not in params["config"]:
            raise ValueError(
                "the kafka transport needs a 'config' with 'bootstrap.servers' (airflow.cfg [openlineage])"
            )
        if not params.get("topic"):
            raise ValueError("the kafka transport needs a 'topic' (airflow.cfg [openlineage] transport)")
        self.topic = params["topic"]
        self.fixed_key = params.get("messageKey") or params.get("message_key")
        self.producer_config = {**PRODUCER_DEFAULTS, **params["config"]}
        self.ack_timeout = float(self.producer_config["message.timeout.ms"]) / 1000 + 1
        self._producer = None
        self._pid = None
        self._in_flight: dict[str, _Delivery] = {}
        self._lock = threading.Lock()

    def _producer_here(self):
        """This process's producer (a forked child builds its own: librdkafka's threads do not survive a fork)."""
        if self._producer is None or self._pid != os.getpid():
            from confluent_kafka import Producer

            # librdkafka's own log (a refused connection every few 100 ms while the broker is down) goes through
            # Python's logging, served when this transport polls, not written to stderr from librdkafka's threads.
            settings = {"logger": logging.getLogger(f"{__name__}.librdkafka"), **self.producer_config}
            self._producer, self._pid, self._in_flight = Producer(settings), os.getpid(), {}
        return self._producer

    def emit(self, event: Any) -> None:
        payload = event if isinstance(event, str) else Serde.to_json(event)
        key = self.fixed_key or message_key(json.loads(payload))
        digest = hashlib.sha256(payload.encode()).hexdigest()
        with self._lock:
            producer = self._producer_here()
            delivery = self._in_flight.get(digest)
            if delivery is None or (delivery.done.is_set() and delivery.error is not None):  # none, or one that failed
                delivery = _Delivery()
                producer.produce(self.topic, key=key, value=payload.encode(), on_delivery=delivery.settle)
                self._in_flight[digest] = delivery
        deadline = time.monotonic() + self.ack_timeout
        while not delivery.done.is_set() and time.monotonic() < deadline:
            producer.poll(0.05)
        with self._lock:
            if delivery.done.is_set() and self._in_flight.get(digest) is delivery:
                del self._in_flight[digest]
        if not delivery.done.is_set():
            raise KafkaDeliveryError(f"no acknowledgement from {self.producer_config['bootstrap.servers']}")
        if delivery.error is not None:
            raise KafkaDeliveryError(f"kafka: {delivery.error}")

    def close(self, timeout: float = -1) -> bool:
        """Flush what is queued, for at most ``timeout`` seconds, and never more than one (no unbounded wait)."""
        if self._producer is None or self._pid != os.getpid():
            return True
        left = self._producer.flush(min(timeout, 1.0) if timeout >= 0 else 1.0)
        return not left
