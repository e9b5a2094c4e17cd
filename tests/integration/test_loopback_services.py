"""The long-running services a user starts beside the DAGs listen on loopback only (issue 24, item 9): the Kafka broker
(`pipeline kafka start`: its client and its controller port) and `lineage serve` with its default host, read from the
kernel's socket tables (tests/integration/listening.py), not from their own configuration. `make demo` and `make
airflow` are sampled the same way in test_demo.py and test_airflow_ui.py."""

from __future__ import annotations

import pytest

from tests.integration import listening
from tests.support import start_lineage_serve

pytestmark = pytest.mark.integration


def test_the_kafka_broker_and_lineage_serve_listen_on_loopback_only(paths, broker, tmp_path):
    process, url = start_lineage_serve(["--no-auth", "--store", f"sqlite:///{tmp_path / 'store.db'}"])
    try:
        listeners = listening.listeners_of(paths.var, roots=[process.pid])
    finally:
        process.terminate()
        process.wait(timeout=30)
    serve_port = int(url.rsplit(":", 1)[1])
    ports = {listener.port for listener in listeners}
    assert {broker.port, broker.controller_port, serve_port} <= ports, (broker, serve_port, listeners)
    exposed = sorted(
        f"{item.process} on {item.readable_address}:{item.port}" for item in listeners if not item.loopback
    )
    assert exposed == []
