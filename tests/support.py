"""Helpers shared by the tests: loopback ports and HTTP servers, a lineage backend that records, the raw table's state.

Fixtures stay in the conftest files; what several test modules build the same way lives here, once.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from include.core import naming, settings
from include.core.ports import free_port  # noqa: F401  (the tests' one way to a free port, as the project's)


def spark_submit_command(conf: dict[str, str], master: str, *options: str) -> list[str]:
    """``spark-submit`` of this venv with ``master``, every property of ``conf`` as a ``--conf``, then ``options``
    (jars, py-files, the job and its arguments), as the tests that launch a job directly build it."""
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", master]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, *options]


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A request handler that keeps the test output free of access logs."""

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def loopback_server(handler: type[http.server.BaseHTTPRequestHandler], port: int = 0) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 in a thread; yield the base URL, shut down and close on exit."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


# Variables of the pytest session that must not leak into another var/ (they name the session's own state).
SESSION_ONLY_VARIABLES = (
    "AIRFLOW_HOME",
    "AIRFLOW_CONFIG",
    "AIRFLOW_CONN_SPARK_DEFAULT",
    "ICEBERG_REST_PORT",
    "PIPELINE_VAR_DIR",
)


def environment_of_var(var_dir, **extra: str) -> dict[str, str]:
    """The session's environment for commands of another ``var/``: its own folder and catalog server port."""
    env = {name: value for name, value in os.environ.items() if name not in SESSION_ONLY_VARIABLES}
    env.update({"PIPELINE_VAR_DIR": str(var_dir), "ICEBERG_REST_PORT": str(free_port())}, **extra)
    return env


@contextlib.contextmanager
def recording_file_server(root) -> Iterator[tuple[str, list[str]]]:
    """Serve the files under ``root`` on 127.0.0.1 (a Maven repository, an npm registry); yield the base URL and
    the list of every requested path."""
    requests: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args) -> None:
            pass

        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

    with loopback_server(Handler) as url:
        yield url, requests


class RecordingBackend:
    """An OpenLineage HTTP backend on loopback that records every event POSTed to it.

    behaviour: ``ok``; ``fail_half`` (answers 503 to every other request); ``stall`` (waits 3 s before answering).
    ``batch``: take OpenLineage's ``<endpoint>/batch`` (a JSON array, each event recorded); without it that path
    answers 404, as a backend without the batch endpoint does.
    """

    def __init__(self, port: int = 0, behaviour: str = "ok", batch: bool = False):
        self.behaviour = behaviour
        self.batch = batch
        self.batches: list[int] = []  # the size of every batch accepted
        self.posts: list[tuple[str, dict]] = []  # (request path, event) of every accepted event
        self.requests = 0
        backend = self

        class Handler(QuietHandler):
            def do_POST(self):
                backend.requests += 1
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if backend.behaviour == "stall":
                    time.sleep(3)
                if backend.behaviour == "fail_half" and backend.requests % 2 == 1:
                    self.send_response(503)
                    self.end_headers()
                    return
                if self.path.endswith("/batch"):
                    if not backend.batch:
                        self.send_response(404)
                        self.end_headers()
                        return
                    events = json.loads(body)
                    backend.batches.append(len(events))
                    backend.posts.extend((self.path, event) for event in events)
                    self.send_response(201)
                    self.end_headers()
                    return
                backend.posts.append((self.path, json.loads(body)))
                self.send_response(201)
                self.end_headers()

        self._serving = loopback_server(Handler, port)
        self.url = self._serving.__enter__()
        self.port = int(self.url.rsplit(":", 1)[1])

    @property
    def received(self) -> list[dict]:
        return [event for _, event in self.posts]

    def stop(self) -> None:
        self._serving.__exit__(None, None, None)

    def unique(self) -> set:
        """Events after de-duplication by run id, event type and event time, as a receiver would."""
        return {(e["run"]["runId"], e["eventType"], e["eventTime"]) for e in self.received}


@dataclass(frozen=True)
class RawState:
    snapshot_id: int
    rows: int
    ids: frozenset[str]

    @property
    def distinct(self) -> int:
        return len(self.ids)


def raw_state(catalog) -> RawState:
    """The raw taxi table as pyiceberg sees it: current snapshot, row count and the set of unique_row_id."""
    table = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}")
    ids = table.scan(selected_fields=("unique_row_id",)).to_arrow()["unique_row_id"].to_pylist()
    return RawState(table.current_snapshot().snapshot_id, len(ids), frozenset(ids))


def start_lineage_serve(args: list[str], env: dict | None = None, timeout: float = 60, log=None):
    """`lineage serve --port <free> ARGS` started for real, returned as (process, base URL) once its health answers;
    an AssertionError with its output if it exits or does not answer within ``timeout`` seconds. A server that will
    answer many requests writes to ``log`` (a path): a pipe nobody reads would fill and block it."""
    import subprocess
    import sys
    from pathlib import Path

    import requests

    port = free_port()
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "lineage"), "serve", "--port", str(port), *args],
        env=env if env is not None else os.environ.copy(),
        stdout=Path(log).open("w") if log else subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            if requests.get(f"{url}/api/v1/health", timeout=1).ok:
                return process, url
        except requests.ConnectionError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            output = Path(log).read_text() if log else process.communicate()[0]
            raise AssertionError(f"lineage serve did not start: {output[-2000:]}")
        time.sleep(0.2)


def tap_node(page_or_frame, node_id: str) -> None:
    """Select a node of the lineage page's graph as a tap does. The script returns nothing on purpose: Cytoscape's
    ``emit`` returns the element, and playwright serialises an evaluated script's result, which for an element is
    the whole graph through its references (a renderer ran out of memory in ``innerSerialize``: "Target crashed")."""
    page_or_frame.evaluate("id => { window.lineageGraph.getElementById(id).emit('tap'); }", node_id)


# Debian's headless Chromium, for the tests that drive the lineage page and the Airflow UI (None: those go through
# require_system_tool: they fail under CI, are skipped elsewhere)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# What the skip of a test whose system package is missing says; tests/conftest.py lists those skips at the session's end.
MISSING_SYSTEM_PACKAGE = "skipped for a missing system package: "
INSTALLED_BY = "make test installs it: include/setup/system_packages.sh, as root on Debian"


def in_ci() -> bool:
    """Whether this session runs in CI (``$CI`` true, as CI services and `.ci/run`'s callers set it)."""
    return settings.truthy(os.environ.get("CI"))


def require_system_tool(name: str, reason: str) -> NoReturn:
    """The end of a test that needs ``name`` (a system package: chromium, postgresql) where it is not installed: under
    CI the test fails with ``reason``, for a CI run must run every test; elsewhere it is skipped, and the session's
    terminal summary lists it (tests/conftest.py). Never a test that returns early and reports "passed"."""
    import pytest

    message = f"{name} is not installed: {reason}"
    if in_ci():
        pytest.fail(f"CI={os.environ.get('CI')}: {message} (under CI a missing system package fails)", pytrace=False)
    pytest.skip(MISSING_SYSTEM_PACKAGE + message)


def chromium(needed_for: str = "this test drives a page in a real browser") -> str:
    """The path of Debian's headless Chromium; where it is not installed, ``require_system_tool`` ends the test."""
    if CHROMIUM is None:
        require_system_tool("chromium", f"{needed_for} ({INSTALLED_BY})")
    return CHROMIUM


def postgresql(needed_for: str = "this test starts a PostgreSQL cluster of its own") -> None:
    """Return when Debian's PostgreSQL server (initdb, pg_ctl) is installed; else ``require_system_tool`` ends the
    test."""
    from include.services import postgres

    if not postgres.available():
        require_system_tool("postgresql", f"{needed_for} ({INSTALLED_BY})")


@contextlib.contextmanager
def throwaway_postgres(
    folder: Path, role: str, databases: tuple[str, ...], needed_for: str
) -> Iterator[tuple[dict[str, str], object, str]]:
    """A PostgreSQL cluster of the test's own on loopback (fsync off), a login role with a fresh password owning
    ``databases``: (each database's SQLAlchemy URL, the ``postgres.Cluster``, the password); stopped at the end.
    ``folder`` under the session's var/: as root the server runs as Debian's postgres user, who must reach it."""
    import secrets

    from include.services import postgres

    postgresql(needed_for)
    password = secrets.token_hex(16)
    cluster = postgres.Cluster(folder, free_port()).init().start(durable=False)
    try:
        cluster.ensure_role(role, password)
        for name in databases:
            cluster.ensure_database(name, role)
        urls = {name: f"postgresql+psycopg2://{role}:{password}@127.0.0.1:{cluster.port}/{name}" for name in databases}
        yield urls, cluster, password
    finally:
        cluster.stop()


def read_topic(bootstrap: str, topic: str, timeout: float = 60) -> list:
    """Every message of a Kafka topic, from its start to its end as of now, through a consumer group of its own: read
    until every partition the group was assigned has reported its end."""
    from confluent_kafka import Consumer, KafkaError

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-reader-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    messages, at_end, partitions, deadline = [], set(), None, time.monotonic() + timeout
    while time.monotonic() < deadline and (partitions is None or at_end < partitions):
        message = consumer.poll(1.0)
        if partitions is None and consumer.assignment():
            partitions = {tp.partition for tp in consumer.assignment()}
        if message is None:
            continue
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
            continue
        messages.append(message)
    consumer.close()
    assert partitions and at_end >= partitions, f"could not read {topic} to its end"
    return messages


@contextlib.contextmanager
def app_served(app) -> Iterator[str]:
    """An ASGI app served by uvicorn on a free loopback port, in a thread of this process; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def live_processes_with_env(name: str, value: str) -> list[int]:
    """Pids of the processes (zombies left out) whose environment holds ``name=value``: what a test's processes and
    everything they started, forked or not, still run."""
    wanted = f"{name}={value}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = open(f"/proc/{entry.name}/environ", "rb").read().split(b"\0")
            state = next(line for line in open(f"/proc/{entry.name}/status") if line.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if wanted in environ and "Z" not in state.split()[1]:
            found.append(int(entry.name))
    return found
