"""``lineage serve``'s limits against a real server (the ``lineage`` command on loopback): a client holding its
requests in flight waits its turn past ``LINEAGE_MAX_CLIENT_REQUESTS`` while others and health go on; a maximum-size event
(the decompressed limit, the most datasets, facets checked against their schemas) is stored while health keeps
answering (its p99 is printed: the figure of docs/lineage.md)."""

from __future__ import annotations

import gzip
import json
import os
import socket
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from include.core import settings
from tests.support import start_lineage_serve

LINEAGE = str(Path(sys.executable).with_name("lineage"))
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
SCHEMA_FACET = "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"


def event(job: str, outputs: list | None = None) -> dict:
    return {
        "eventType": "COMPLETE",
        "eventTime": "2025-02-01T00:00:00Z",
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "ns", "name": job, "facets": {}},
        "inputs": [],
        "outputs": outputs if outputs is not None else [{"namespace": "file", "name": f"/o/{job}", "facets": {}}],
    }


def maximum_event(decompressed: int, datasets: int) -> dict:
    """An event at the limits: ``datasets`` outputs, each with a schema facet of distinct columns, about
    ``decompressed`` bytes of JSON in all (every facet checked, none from the validator's cache)."""
    per_field = len(json.dumps({"name": "c0000_00000", "type": "VARCHAR", "description": "x"})) + 2
    fields = max(1, int(decompressed * 0.97) // datasets // per_field)
    outputs = [
        {
            "namespace": "file",
            "name": f"/big/{index}",
            "facets": {
                "schema": {
                    "_producer": PRODUCER,
                    "_schemaURL": SCHEMA_FACET,
                    "fields": [
                        {"name": f"c{index:04d}_{column:05d}", "type": "VARCHAR", "description": "x"}
                        for column in range(fields)
                    ],
                }
            },
        }
        for index in range(datasets)
    ]
    return event("maximum", outputs)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("limits")
    env = {
        **os.environ,
        "PIPELINE_VAR_DIR": str(folder / "var"),
        "LINEAGE_MAX_CLIENT_REQUESTS": "2",
        "LINEAGE_INTAKE_WAIT_SECONDS": "2",
    }
    process, url = start_lineage_serve(["--store", f"sqlite:///{folder / 'store.db'}", "--no-auth"], env)
    port = int(url.rsplit(":", 1)[1])
    yield {"url": url, "port": port}
    process.terminate()
    process.wait(timeout=30)


def _held_post(port: int, authorization: str | None = None) -> socket.socket:
    """A POST whose body never finishes arriving: a request held in flight."""
    held = socket.create_connection(("127.0.0.1", port))
    extra = f"Authorization: {authorization}\r\n" if authorization else ""
    held.sendall(
        (
            f"POST /api/v1/lineage HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"{extra}Content-Length: 100000\r\n\r\n{{"
        ).encode()
    )
    return held


def test_a_client_past_its_requests_in_flight_waits_its_turn_and_others_go_on(server):
    """Past LINEAGE_MAX_CLIENT_REQUESTS (2 here) a client's request waits its turn instead of being refused: answered
    503 with Retry-After only once LINEAGE_INTAKE_WAIT_SECONDS (2 here) ran out, and stored as soon as a place is
    free; another client and health are not held back meanwhile."""
    url, port = server["url"], server["port"]
    held = [_held_post(port), _held_post(port)]
    try:
        time.sleep(0.5)  # both reached the app
        started = time.monotonic()
        waited = requests.post(f"{url}/api/v1/lineage", json=event("third"), timeout=10)
        assert waited.status_code == 503 and "LINEAGE_INTAKE_WAIT_SECONDS" in waited.json()["message"]
        assert int(waited.headers["retry-after"]) >= 1 and time.monotonic() - started >= 1.5
        assert requests.get(f"{url}/api/v1/health", timeout=5).status_code == 200, "health is never held back"
        other = requests.post(
            f"{url}/api/v1/lineage", json=event("other_client"), headers={"Authorization": "Bearer other"}, timeout=10
        )
        assert other.status_code == 201, "another client (another token) is not held back"
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(requests.post, f"{url}/api/v1/lineage", json=event("fourth"), timeout=10)
            time.sleep(0.5)
            held.pop().close()  # a place of this client frees: the waiting request takes it
            assert waiting.result().status_code == 201
    finally:
        for connection in held:
            connection.close()
    assert requests.post(f"{url}/api/v1/lineage", json=event("after"), timeout=10).status_code == 201


def test_a_maximum_size_event_is_stored_while_health_keeps_answering(server):
    url = server["url"]
    decompressed = settings.LINEAGE_MAX_DECOMPRESSED_BYTES.integer() - 64 * 1024
    datasets = settings.LINEAGE_MAX_EVENT_DATASETS.integer()
    raw = json.dumps(maximum_event(decompressed, datasets)).encode()
    body = gzip.compress(raw, compresslevel=6)
    assert len(body) <= settings.LINEAGE_MAX_BODY_BYTES.integer() and len(raw) <= decompressed + 64 * 1024
    latencies: list[float] = []
    statuses: list[int] = []
    done = threading.Event()

    def poll_health() -> None:
        with requests.Session() as session:
            while not done.is_set():
                started = time.perf_counter()
                statuses.append(session.get(f"{url}/api/v1/health", timeout=30).status_code)
                latencies.append(time.perf_counter() - started)
                time.sleep(0.02)

    poller = threading.Thread(target=poll_health)
    poller.start()
    started = time.perf_counter()
    try:
        answer = requests.post(
            f"{url}/api/v1/lineage",
            data=body,
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
            timeout=300,
        )
    finally:
        took = time.perf_counter() - started
        done.set()
        poller.join()
    assert answer.status_code == 201, answer.text[:500]
    assert statuses and set(statuses) == {200}, "health answered throughout"
    p99 = statistics.quantiles(latencies, n=100)[98] if len(latencies) >= 2 else latencies[0]
    print(
        f"\nmaximum event: {len(raw) / 1e6:.1f} MB ({len(body) / 1e6:.2f} MB gzip), {datasets} datasets, "
        f"stored in {took:.1f} s; health p50 {statistics.median(latencies) * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms over {len(latencies)} requests"
    )


def _large(job: str, columns: int = 8000) -> dict:
    fields = [{"name": f"{job}_{index:05d}", "type": "VARCHAR"} for index in range(columns)]
    facet = {"_producer": PRODUCER, "_schemaURL": SCHEMA_FACET, "fields": fields}
    return event(job, [{"namespace": "file", "name": f"/large/{job}", "facets": {"schema": facet}}])


def test_large_bodies_decoded_in_the_worker_process_get_the_same_answers(server):
    """A body past 256 KiB is decoded, checked and stored in the worker process: the answers are those of the
    server's own process."""
    url = server["url"]
    good = _large("large_good")
    assert len(json.dumps(good)) > 256 * 1024
    stored = requests.post(f"{url}/api/v1/lineage", json=good, timeout=120)
    assert stored.status_code == 201 and stored.json() == {"received": 1, "new": 1}
    assert requests.post(f"{url}/api/v1/lineage", json=good, timeout=120).json()["new"] == 0, "a duplicate"
    bad = _large("large_bad")
    bad["outputs"][0]["facets"]["schema"]["fields"][7999]["type"] = ["VARCHAR"]
    refused = requests.post(f"{url}/api/v1/lineage", json=bad, timeout=120)
    assert refused.status_code == 400  # Marquez: 500, a list where it reads a string
    assert "outputs[0].facets.schema.fields[7999].type" in refused.json()["message"]
    batch = requests.post(f"{url}/api/v1/lineage/batch", json=[_large("b0"), bad, _large("b2")], timeout=120)
    assert batch.status_code == 400 and [error["index"] for error in batch.json()["errors"]] == [1]
    not_array = requests.post(f"{url}/api/v1/lineage/batch", json=good, timeout=120)
    assert not_array.status_code == 400 and "JSON array" in not_array.json()["message"]
    truncated = gzip.compress(json.dumps([_large(f"t{i}") for i in range(20)]).encode())
    assert len(truncated) > 256 * 1024
    cut = requests.post(
        f"{url}/api/v1/lineage/batch",
        data=truncated[:-100],
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        timeout=120,
    )
    assert cut.status_code == 400 and "truncated" in cut.json()["message"]
    deep = b"[" * 200_000 + b"]" * 200_000
    nested = requests.post(
        f"{url}/api/v1/lineage", data=deep, headers={"Content-Type": "application/json"}, timeout=120
    )
    assert nested.status_code == 400 and "nests" in nested.json()["message"]
    assert requests.get(f"{url}/api/v1/health", timeout=5).status_code == 200


@pytest.mark.parametrize("stop", ["terminate", "kill"])
def test_the_worker_of_large_bodies_goes_when_the_server_goes(tmp_path, stop):
    """Stopped (SIGTERM) or killed (SIGKILL), the server leaves no process behind: its worker held both ends of its
    own call queue and outlived the server, an orphan holding the store open, with the resource tracker beside it."""
    import psutil

    env = {**os.environ, "PIPELINE_VAR_DIR": str(tmp_path / "var")}
    process, url = start_lineage_serve(["--store", f"sqlite:///{tmp_path / 'store.db'}", "--no-auth"], env)
    try:
        stored = requests.post(f"{url}/api/v1/lineage", json=_large("offloaded"), timeout=120)
        assert stored.status_code == 201
        left = psutil.Process(process.pid).children(recursive=True)
        assert any("spawn_main" in " ".join(child.cmdline()) for child in left), "the large body reached a worker"
    finally:
        getattr(process, stop)()
        process.wait(timeout=30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_running(child) for child in left):
        time.sleep(0.2)
    assert [child.pid for child in left if _running(child)] == []


def _running(process) -> bool:
    import psutil

    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
