"""``lineage consume``: OpenLineage events from a Kafka topic into the lineage store, at least once, stored once.

A consumer group (``lineage-store`` by default) reads the events topic with automatic commits off. Each batch is
stored in one transaction of the store, and only then are the batch's offsets committed: a consumer that dies
between the two reads the batch again, and the store recognises every event it already has (run id + event type +
event time), so nothing is stored twice and nothing is skipped.

A message that is not an OpenLineage event (not JSON, not an object, no eventTime, a run without a runId, …), that
fails the check ``lineage serve`` runs on every event (``include/lineage/validation.py``: the OpenLineage schemas and
the limits; a facet of the wrong shape is named with its JSON path) or that the store refuses is reported with its
topic, partition and offset and goes to the dead-letter topic, unchanged, with the reason in its headers
(``lineage.error``, and where it came from: ``lineage.topic``, ``lineage.partition``, ``lineage.offset``); its offset
is committed once the broker acknowledged the dead letter. The store being unreachable is not the event's fault:
the batch is not committed and the command fails (the events are read again next time).

``--replay-dead-letters`` reads the dead-letter topic (its own group) up to where it ended when the command started,
stores what can be stored now and writes what still fails back to the dead-letter topic with the new reason and
``lineage.attempts`` + 1.

"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from include.core import naming, settings
from include.lineage import validation
from include.lineage.errors import ConsumeError, InvalidEventError
from include.lineage.events import SourcedEvent, check_event
from include.lineage.store import LineageStore

DEFAULT_GROUP = "lineage-store"


@dataclass
class ConsumeReport:
    read: int = 0
    stored: int = 0
    duplicates: int = 0
    dead_letters: int = 0
    seconds: float = 0.0
    first_message: float | None = None  # time.monotonic() of the first message read
    finished: float | None = None
    lag: dict[int, int] = field(default_factory=dict)

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())

    def line(self, command: str = "lineage consume") -> str:
        partitions = ", ".join(f"{partition}: {lag}" for partition, lag in sorted(self.lag.items()))
        return (
            f"{command}: read {self.read}, stored {self.stored} new, {self.duplicates} already stored, "
            f"{self.dead_letters} to the dead-letter topic, in {self.seconds:.1f} s; "
            f"lag {self.total_lag} (partition {partitions or '-'})"
        )


def default_bootstrap() -> str:
    return settings.kafka_bootstrap_servers()


def parse(value: bytes | None) -> dict:
    """The event of a message, or InvalidEventError with the reason: not JSON, not the store's shape, or refused
    by the very check ``lineage serve`` runs (``include/lineage/validation.py``: the OpenLineage schemas, event and
    standard facets, and the limits)."""
    if value is None:
        raise InvalidEventError("empty message (no value)")
    try:
        event = json.loads(value)
    except (UnicodeDecodeError, ValueError) as error:
        raise InvalidEventError(f"not JSON: {error}") from None
    except RecursionError:
        raise InvalidEventError("not JSON: nested too deeply") from None
    validation.check_incoming(event)  # first, as lineage serve: the same event gets the same reason
    check_event(event)
    return event


class _DeadLetters:
    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Producer

        self.topic = topic
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
        )
        self.failures: list[str] = []

    def send(self, message, reason: str, attempts: int = 1) -> None:
        headers = {
            "lineage.error": reason[:2000],
            "lineage.topic": message.topic(),
            "lineage.partition": str(message.partition()),
            "lineage.offset": str(message.offset()),
            "lineage.attempts": str(attempts),
        }
        original = dict(message.headers() or [])
        if "lineage.topic" in original:  # a replayed dead letter keeps where it first came from
            for name in ("lineage.topic", "lineage.partition", "lineage.offset"):
                headers[name] = original[name].decode()

        def acknowledged(error, _message) -> None:
            if error is not None:
                self.failures.append(str(error))

        self.producer.produce(
            self.topic, key=message.key(), value=message.value(), headers=headers, on_delivery=acknowledged
        )

    def flush(self, timeout: float = 30.0) -> None:
        """Every dead letter of the batch acknowledged, or ConsumeError (nothing of the batch is committed)."""
        left = self.producer.flush(timeout)
        if left or self.failures:
            failures, self.failures = self.failures, []
            raise ConsumeError(f"could not write to the dead-letter topic {self.topic}: {failures or f'{left} left'}")


def _store_batch(store: LineageStore, events: list[tuple[object, dict]], dead: _DeadLetters, report, attempts) -> None:
    """Store the batch in one transaction; if the store refuses it, event by event, refused ones to dead letters."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    def source(message) -> str:
        return f"kafka:{message.topic()}/{message.partition()}@{message.offset()}"

    try:
        result = store.ingest([SourcedEvent(event, source(message)) for message, event in events])
        report.stored += result.new
        report.duplicates += result.duplicates
        return
    except OperationalError as error:  # the store is down or locked: not the events' fault
        raise ConsumeError(f"the lineage store refused the batch ({error.orig}); offsets not committed") from error
    except (InvalidEventError, DBAPIError, ValueError, KeyError, TypeError):
        pass
    for message, event in events:
        try:
            result = store.ingest([SourcedEvent(event, source(message))])
        except OperationalError as error:
            raise ConsumeError(f"the lineage store refused an event ({error.orig}); offsets not committed") from error
        except (InvalidEventError, DBAPIError, ValueError, KeyError, TypeError) as error:
            dead.send(message, f"not stored: {type(error).__name__}: {error}", attempts(message))
            report.dead_letters += 1
            continue
        report.stored += result.new
        report.duplicates += result.duplicates


def _attempts(message) -> int:
    headers = dict(message.headers() or [])
    try:
        return int(headers.get("lineage.attempts", b"0")) + 1
    except ValueError:
        return 1


@dataclass
class _Group:
    """Where the consumer stands in its group: the partitions assigned to it and those it has read to the end."""

    assigned: set[int] = field(default_factory=set)
    at_end: set[int] = field(default_factory=set)
    idle_since: float = field(default_factory=time.monotonic)

    def on_assign(self, _consumer, assignment) -> None:
        self.assigned.update(tp.partition for tp in assignment)
        self.idle_since = time.monotonic()  # waiting to join the group is not idleness

    def on_revoke(self, _consumer, assignment) -> None:
        for tp in assignment:
            self.assigned.discard(tp.partition)
            self.at_end.discard(tp.partition)


def _new_consumer(bootstrap: str, group: str):
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "max.poll.interval.ms": 600000,
            # A consumer that died is still a member until its session times out, and the group's next join waits
            # for it: 10 s instead of the default 45 s (the broker's minimum is 6 s).
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000,
        }
    )


def _partitions(consumer, topic: str, bootstrap: str) -> list[int]:
    metadata = consumer.list_topics(topic, timeout=10)
    topic_metadata = metadata.topics.get(topic)
    if topic_metadata is None or topic_metadata.error is not None:
        raise ConsumeError(
            f"topic {topic} not found on {bootstrap} ({getattr(topic_metadata, 'error', None)}); "
            "`pipeline kafka start` creates it"
        )
    return sorted(topic_metadata.partitions)


def _sort_batch(messages, group: _Group, end_at: dict[int, int] | None, dead, report: ConsumeReport, log):
    """(events to store, offsets to commit) of a batch; a message that is no event goes to the dead-letter topic.
    ``end_at``: a dead-letter replay stops at the end the topic had when it started."""
    from confluent_kafka import KafkaError

    events: list[tuple[object, dict]] = []
    offsets: dict[int, int] = {}
    for message in messages:
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                group.at_end.add(message.partition())
                continue
            raise ConsumeError(f"kafka: {error}")
        group.at_end.discard(message.partition())
        if end_at is not None and message.offset() >= end_at.get(message.partition(), 0):
            group.at_end.add(message.partition())  # written after the replay started (by this replay, maybe)
            continue
        report.read += 1
        offsets[message.partition()] = message.offset() + 1
        try:
            events.append((message, parse(message.value())))
        except InvalidEventError as reason:
            where = f"{message.topic()}/{message.partition()}@{message.offset()}"
            log(f"lineage consume: {where} is not stored: {reason}; to the dead-letter topic {dead.topic}")
            dead.send(message, str(reason), _attempts(message))
            report.dead_letters += 1
    return events, offsets


def consume(
    store: LineageStore,
    bootstrap: str | None = None,
    topic: str = naming.KAFKA_EVENTS_TOPIC,
    dead_letter_topic: str = naming.KAFKA_DEAD_LETTER_TOPIC,
    group: str = DEFAULT_GROUP,
    forever: bool = False,
    replay_dead_letters: bool = False,
    batch_size: int = 500,
    idle_timeout: float = 30.0,
    log=print,
    after_store: Callable[[], None] | None = None,
) -> ConsumeReport:
    """Consume until caught up (every partition at its end; ``forever``: until interrupted) and report.

    With ``replay_dead_letters`` the dead-letter topic is read instead (group ``<group>-dead-letters``) up to the end
    it had when the call started."""
    from confluent_kafka import KafkaException, TopicPartition

    bootstrap = bootstrap or default_bootstrap()
    source_topic = dead_letter_topic if replay_dead_letters else topic
    consumer = _new_consumer(bootstrap, f"{group}-dead-letters" if replay_dead_letters else group)
    dead = _DeadLetters(bootstrap, dead_letter_topic)
    report = ConsumeReport()
    started = time.monotonic()
    try:
        partitions = _partitions(consumer, source_topic, bootstrap)
        end_at = {p: consumer.get_watermark_offsets(TopicPartition(source_topic, p), timeout=10)[1] for p in partitions}
        state = _Group()
        consumer.subscribe([source_topic], on_assign=state.on_assign, on_revoke=state.on_revoke)
        while True:
            messages = consumer.consume(num_messages=batch_size, timeout=1.0)
            events, offsets = _sort_batch(messages, state, end_at if replay_dead_letters else None, dead, report, log)
            if offsets:
                state.idle_since = time.monotonic()
                report.first_message = report.first_message or state.idle_since
                if events:
                    _store_batch(store, events, dead, report, _attempts)
                dead.flush()
                if after_store is not None:
                    after_store()  # a batch is stored, its offsets are not committed yet
                consumer.commit(
                    offsets=[TopicPartition(source_topic, p, offset) for p, offset in offsets.items()],
                    asynchronous=False,
                )
                report.finished = time.monotonic()
            if forever:
                continue
            if state.assigned and state.at_end >= state.assigned and state.assigned >= set(partitions):
                break
            if time.monotonic() - state.idle_since > idle_timeout:
                log(f"lineage consume: nothing read for {idle_timeout:.0f} s; stopping")
                break
        report.lag = lag(consumer, source_topic, partitions)
    except KafkaException as error:
        raise ConsumeError(f"kafka at {bootstrap}: {error}") from error
    finally:
        report.seconds = time.monotonic() - started
        consumer.close()
        dead.producer.flush(5)
    return report


def lag(consumer, topic: str, partitions: list[int]) -> dict[int, int]:
    """Per partition: the high watermark minus the group's committed offset (the low watermark when none)."""
    from confluent_kafka import TopicPartition

    committed = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
    result = {}
    for tp in committed:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=10)
        result[tp.partition] = high - (tp.offset if tp.offset >= 0 else low)
    return result
