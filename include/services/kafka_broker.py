"""A local Apache Kafka broker for lineage through a queue: one per ``var/``, KRaft (no ZooKeeper), 127.0.0.1 only.

Apache Kafka's own server (``kafka_2.13`` from Maven Central, pinned and checksummed in ``jars/jars.lock.json`` with
the role ``kafka-broker``) runs as one node that is both broker and controller. The storage is formatted once
(``kafka.tools.StorageTool format``) and the node started with ``kafka.Kafka server.properties``. Automatic topic
creation is off: the project creates its topics (:func:`ensure_topics`), the lineage events topic and its
dead-letter topic.

State lives in ``var/kafka/``: ``broker.json`` (pid, ports), ``server.properties``, ``log4j2.properties``, the data
under ``data/``, and the log ``var/logs/kafka.log``. The client port is ``KAFKA_PORT`` (default 19092); the
controller's port is chosen free at the first start and kept in ``server.properties``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from include.core import naming, ports, settings
from include.core.errors import ServiceError
from include.services import local_service

HOST = "127.0.0.1"
DEFAULT_PORT = 19092
PARTITIONS = 3
START_TIMEOUT_SECONDS = 120.0
BROKER_HEAP = "384m"
MAIN_CLASS = "kafka.Kafka"
JAR_ROLE = "kafka-broker"  # jars/jars.lock.json: the broker and its runtime dependencies
SPARK_JAR_ROLE = "spark-kafka"  # kafka-clients, added to Spark's class path when its listener sends to Kafka


class KafkaBrokerError(ServiceError):
    pass


@dataclass(frozen=True)
class BrokerState:
    pid: int
    host: str
    port: int
    controller_port: int
    started_at: float
    start_seconds: float

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


def port() -> int:
    try:
        return settings.kafka_port()
    except settings.SettingError as error:
        raise KafkaBrokerError(str(error)) from None


def bootstrap_servers() -> str:
    return f"{HOST}:{port()}"


def kafka_dir(paths: settings.Paths) -> Path:
    return paths.var / "kafka"


def _state_file(paths: settings.Paths) -> Path:
    return kafka_dir(paths) / "broker.json"


def _properties_file(paths: settings.Paths) -> Path:
    return kafka_dir(paths) / "server.properties"


def log_file(paths: settings.Paths) -> Path:
    return paths.logs / "kafka.log"


def _java() -> str:
    return local_service.java_tool("java", "kafka broker")


def _classpath() -> str:
    from include.core import jars

    paths = jars.jar_paths(JAR_ROLE)
    missing = [path for path in paths if not path.exists()]
    if missing:
        raise KafkaBrokerError(f"kafka broker: jars missing ({missing[0]} …); run `make setup`")
    return os.pathsep.join(str(path) for path in paths)


def _write_server_properties(paths: settings.Paths, client_port: int) -> int:
    """Write ``server.properties`` for ``client_port``; keep the controller port of an earlier start."""
    target = _properties_file(paths)
    controller_port = None
    if target.exists():
        found = re.search(r"^controller\.quorum\.voters=1@[^:]+:(\d+)$", target.read_text(), re.MULTILINE)
        controller_port = int(found.group(1)) if found else None
    if controller_port is None or controller_port == client_port:
        controller_port = ports.free_port(HOST)
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{client_port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{client_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(kafka_dir(paths) / "data"),
        "auto.create.topics.enable": "false",
        "num.partitions": str(PARTITIONS),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.retention.hours": "168",
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    (kafka_dir(paths) / "log4j2.properties").write_text(
        "status = warn\n"
        "appender.out.type = Console\nappender.out.name = OUT\nappender.out.layout.type = PatternLayout\n"
        "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = INFO\nrootLogger.appenderRef.out.ref = OUT\n"
        "logger.kafka.name = kafka\nlogger.kafka.level = WARN\n"
        "logger.apache.name = org.apache.kafka\nlogger.apache.level = WARN\n"
        "logger.started.name = kafka.server.KafkaRaftServer\nlogger.started.level = INFO\n"
    )
    return controller_port


def new_cluster_id() -> str:
    """A random KRaft cluster id: 16 random bytes, URL-safe base64 without padding, as Kafka's own ``Uuid``.

    Drawn again when it would start with ``-``. One id in 64 does, and ``kafka-storage format -t -Xy...`` then
    reads the id as an option: "argument --cluster-id/-t: expected one argument" (a suite run failed on it on
    25 November 2026). Kafka's ``Uuid.randomUuid`` skips such ids for the same reason."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def _format_storage(paths: settings.Paths, log) -> None:
    """Format the log directory once (a KRaft node refuses to start on an unformatted one)."""
    if (kafka_dir(paths) / "data" / "meta.properties").exists():
        return
    cluster_id = new_cluster_id()
    result = subprocess.run(
        [_java(), "-cp", _classpath(), *_log4j(paths), "kafka.tools.StorageTool", "format", "-t", cluster_id]
        + ["-c", str(_properties_file(paths))],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        raise KafkaBrokerError(f"kafka-storage format failed (code {result.returncode}); log {log_file(paths)}")


def _log4j(paths: settings.Paths) -> list[str]:
    return [f"-Dlog4j2.configurationFile={kafka_dir(paths) / 'log4j2.properties'}"]


def is_healthy(bootstrap: str, timeout: float = 2.0) -> bool:
    """The broker answers a metadata request and has a controller."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    host, _, number = bootstrap.rpartition(":")
    if not local_service.port_taken(host, int(number)):
        return False
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000)})
        metadata = admin.list_topics(timeout=timeout)
        return bool(metadata.brokers)
    except KafkaException:
        return False


def _lock_file(paths: settings.Paths) -> Path:
    return kafka_dir(paths) / "broker.lock"


def _exclusive(paths: settings.Paths):
    return local_service.exclusive(_lock_file(paths))


def read_state(paths: settings.Paths) -> BrokerState | None:
    return local_service.read_state(_state_file(paths), BrokerState)


def running(paths: settings.Paths | None = None) -> BrokerState | None:
    paths = paths or settings.Paths.current()
    return local_service.running(_state_file(paths), BrokerState, MAIN_CLASS, lambda state: is_healthy(state.bootstrap))


def ensure_running(paths: settings.Paths | None = None) -> BrokerState:
    """Start this ``var/``'s broker unless it runs, and create the project's topics."""
    paths = (paths or settings.Paths.current()).ensure()
    client_port = port()
    with _exclusive(paths):
        state = running(paths)
        if state and state.port != client_port:
            raise KafkaBrokerError(
                f"kafka broker of {paths.var} runs on port {state.port}, but KAFKA_PORT is {client_port}: "
                f"stop it (`pipeline kafka stop`) or set KAFKA_PORT={state.port}"
            )
        state = state or _start(paths, client_port)
    ensure_topics(state.bootstrap)
    return state


def _start(paths: settings.Paths, client_port: int) -> BrokerState:
    if local_service.port_taken(HOST, client_port):
        raise KafkaBrokerError(
            f"port {client_port} on {HOST} is already in use by another process (not the kafka broker of "
            f"{paths.var}); set KAFKA_PORT to a free port"
        )
    controller_port = _write_server_properties(paths, client_port)
    if local_service.port_taken(
        HOST, controller_port
    ):  # the kept controller port is taken now: choose another (one static voter)
        _properties_file(paths).unlink()
        controller_port = _write_server_properties(paths, client_port)
    log_path = log_file(paths)
    started = time.monotonic()
    process = local_service.launch(
        [_java(), f"-Xmx{BROKER_HEAP}", "-Xms64m", *_log4j(paths), "-cp", _classpath(), MAIN_CLASS]
        + [str(_properties_file(paths))],
        log_path,
        paths.var,
        prepare=lambda log: _format_storage(paths, log),
    )
    bootstrap = f"{HOST}:{client_port}"
    seconds = local_service.wait_until_healthy(
        process,
        lambda: is_healthy(bootstrap, timeout=1.0),
        started=started,
        timeout=START_TIMEOUT_SECONDS,
        poll=0.3,
        name="kafka broker",
        address=bootstrap,
        log_path=log_path,
        error=KafkaBrokerError,
    )
    state = BrokerState(process.pid, HOST, client_port, controller_port, time.time(), seconds)
    _state_file(paths).write_text(json.dumps(asdict(state)))
    return state


def ensure_topics(bootstrap: str, timeout: float = 30.0) -> None:
    """Create the events topic and its dead-letter topic when missing (one replica: one node)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=timeout).topics
    wanted = [
        NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)
        for topic in (naming.KAFKA_EVENTS_TOPIC, naming.KAFKA_DEAD_LETTER_TOPIC)
        if topic not in existing
    ]
    if not wanted:
        return
    for topic, future in admin.create_topics(wanted, operation_timeout=timeout, request_timeout=timeout).items():
        try:
            future.result()
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise KafkaBrokerError(f"kafka broker: could not create topic {topic}: {error}") from error


def stop(paths: settings.Paths | None = None, timeout: float = 30.0) -> bool:
    """Stop this ``var/``'s broker (controlled shutdown, then SIGKILL after ``timeout``); True if one was running."""
    paths = paths or settings.Paths.current()
    return local_service.stop(_lock_file(paths), _state_file(paths), BrokerState, MAIN_CLASS, timeout)
