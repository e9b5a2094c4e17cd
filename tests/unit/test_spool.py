"""The spooling transport against real HTTP servers on loopback: down, failing half the time, stalling."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import statistics
import time
from pathlib import Path

import pytest
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
from openlineage.client.serde import Serde
from openlineage.client.transport import get_default_factory
from openlineage.client.uuid import generate_new_uuid

from include.lineage.emit.spool import Spool, SpoolingTransport
from tests.support import RecordingBackend as Backend
from tests.support import free_port


def transport_for(port: int, spool_dir: Path, timeout: float = 1.0, inner_timeout: float = 5) -> SpoolingTransport:
    return get_default_factory().create(
        {
            "type": "include.lineage.emit.spool.SpoolingTransport",
            "timeout": timeout,
            "spool_dir": str(spool_dir),
            "inner": {
                "type": "http",
                "url": f"http://127.0.0.1:{port}",
                "endpoint": "api/v1/lineage",
                "timeout": inner_timeout,
                "retry": {"total": 0},
            },
        }
    )


def event(i: int) -> RunEvent:
    return RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=f"2025-02-01T00:00:{i:02d}.000000+00:00",
        run=Run(runId=str(generate_new_uuid())),
        job=Job(namespace="test", name=f"job_{i}"),
        producer="https://example.com/test",
    )


@pytest.mark.parametrize("behaviour", ["down", "fail_half", "stall"])
def test_events_are_spooled_within_the_bound_and_all_delivered_after_replay(tmp_path, behaviour):
    port = free_port()
    backend = None if behaviour == "down" else Backend(port, behaviour)
    transport = transport_for(port, tmp_path / "spool", timeout=1.0)
    emitted = [event(i) for i in range(8)]
    durations = []
    for e in emitted:
        started = time.monotonic()
        transport.emit(e)
        durations.append(time.monotonic() - started)
    # Bounded by the timeout (1 s), not by the stalled answer (3 s): the median holds the bound with room for a
    # loaded machine's hiccup, and even the slowest emit returns before the answer would have come.
    assert statistics.median(durations) < 1.5, f"emits blocked for {durations}"
    assert max(durations) < 2.9, f"an emit blocked for {max(durations):.2f}s"
    assert len(transport.spool) > 0

    if backend is None:
        backend = Backend(port)
    backend.behaviour = "ok"
    sent, remaining = transport.replay()
    while remaining and sent:
        sent, remaining = transport.replay()
    time.sleep(3.5 if behaviour == "stall" else 0)
    assert remaining == 0
    expected = {(str(e.run.runId), "COMPLETE", e.eventTime) for e in emitted}
    assert backend.unique() == expected, "every emitted event is received, each once after de-duplication"
    assert len(transport.spool) == 0
    backend.stop()


def test_replayed_event_is_the_original_unchanged(tmp_path):
    port = free_port()
    transport = transport_for(port, tmp_path / "spool", timeout=0.5)
    original = event(1)
    transport.emit(original)
    [spooled] = transport.spool.pending()
    original_json = spooled.read_text()
    backend = Backend(port)
    assert transport.replay() == (1, 0)
    assert backend.received == [json.loads(original_json)]
    backend.stop()


def test_spool_preserves_order_across_next_successful_emit(tmp_path):
    port = free_port()
    transport = transport_for(port, tmp_path / "spool", timeout=0.5)
    for i in range(3):
        transport.emit(event(i))
    backend = Backend(port)
    transport.emit(event(3))
    assert [e["job"]["name"] for e in backend.received] == ["job_0", "job_1", "job_2", "job_3"]
    backend.stop()


def _spool_forever(folder: str) -> None:
    spool = Spool(Path(folder))
    payload = json.dumps({"padding": "x" * 2_000_000})
    while True:
        spool.append(payload)


def test_a_process_killed_mid_write_loses_at_most_that_event_and_leaves_the_spool_readable(tmp_path):
    folder = tmp_path / "spool"
    writer = multiprocessing.get_context("fork").Process(target=_spool_forever, args=(str(folder),))
    writer.start()
    time.sleep(1.0)
    os.kill(writer.pid, signal.SIGKILL)
    writer.join()
    spool = Spool(folder)
    complete = spool.pending()
    assert complete, "the writer spooled nothing before it was killed"
    for path in complete:
        assert len(json.loads(path.read_text())["padding"]) == 2_000_000
    leftovers = [p for p in folder.iterdir() if p not in complete]
    assert len(leftovers) <= 1 and all(p.name.startswith(".") for p in leftovers), "at most the interrupted event"


def test_several_processes_spool_at_once_without_losing_or_mixing_events(tmp_path):
    folder = tmp_path / "spool"

    def writer(worker: int) -> None:
        spool = Spool(folder)
        for i in range(50):
            spool.append(json.dumps({"worker": worker, "i": i}))

    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=writer, args=(w,)) for w in range(4)]
    for p in processes:
        p.start()
    for p in processes:
        p.join()
    records = [json.loads(p.read_text()) for p in Spool(folder).pending()]
    assert sorted((r["worker"], r["i"]) for r in records) == [(w, i) for w in range(4) for i in range(50)]


def test_a_send_that_lands_after_the_bound_is_not_delivered_twice(tmp_path):
    """The backend stalls (3 s) past the bound (0.5 s): the event is spooled, then the late send lands and removes the
    spooled copy, so neither the next emit nor a replay delivers it again."""
    port = free_port()
    backend = Backend(port, "stall")
    transport = transport_for(port, tmp_path / "spool", timeout=0.5)
    late = event(1)
    transport.emit(late)
    assert len(transport.spool) == 1, "an event past the bound must be in the spool at once"
    deadline = time.monotonic() + 10
    while len(transport.spool) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(transport.spool) == 0, "the late success must remove the spooled copy"
    backend.behaviour = "ok"
    transport.emit(event(2))
    assert transport.replay() == (0, 0)
    run_ids = [posted["run"]["runId"] for _, posted in backend.posts]
    assert run_ids.count(str(late.run.runId)) == 1


def test_readme_style_config_needs_no_path_and_gives_http_no_hidden_retries(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    transport = get_default_factory().create(
        {
            "type": "include.lineage.emit.spool.SpoolingTransport",
            "timeout": 0.5,
            "inner": {"type": "http", "url": f"http://127.0.0.1:{free_port()}", "endpoint": "api/v1/lineage"},
        }
    )
    assert transport.spool.folder == (tmp_path / "var" / "lineage" / "spool").resolve()
    started = time.monotonic()
    transport.emit(event(3))  # backend down
    assert time.monotonic() - started < 1.0
    time.sleep(1.0)
    assert len(transport.spool) == 1, "the spooled event must stay until it is delivered once"


# ----------------------------------------------------------------------------- replay in batches
def _spooled(transport: SpoolingTransport, count: int) -> list[RunEvent]:
    emitted = [event(i % 60) for i in range(count)]
    for e in emitted:
        transport.emit(e)  # the backend is down: every event waits in the spool
    assert len(transport.spool) == count
    return emitted


def test_replay_sends_batches_to_a_backend_with_the_batch_endpoint(tmp_path):
    port = free_port()
    transport = transport_for(port, tmp_path / "spool", timeout=0.5)
    emitted = _spooled(transport, 250)
    backend = Backend(port, batch=True)
    try:
        assert transport.replay() == (250, 0)
        assert backend.batches == [100, 100, 50], "100 events per request, oldest first"
        assert {path for path, _ in backend.posts} == {"/api/v1/lineage/batch"}
        assert [e["run"]["runId"] for e in backend.received] == [str(e.run.runId) for e in emitted], "in order"
    finally:
        backend.stop()


def test_replay_falls_back_to_one_event_at_a_time_without_the_batch_endpoint(tmp_path):
    port = free_port()
    transport = transport_for(port, tmp_path / "spool", timeout=0.5)
    emitted = _spooled(transport, 30)
    backend = Backend(port)  # answers 404 at /batch, as Marquez does
    try:
        assert transport.replay() == (30, 0)
        assert backend.batches == [] and {path for path, _ in backend.posts} == {"/api/v1/lineage"}
        assert backend.unique() == {(str(e.run.runId), "COMPLETE", e.eventTime) for e in emitted}
        assert transport._batch_unsupported, "remembered: the next replay does not ask again"
    finally:
        backend.stop()


def _docs_transport_to_lineage_serve() -> dict:
    from include.core import settings

    text = (settings.PROJECT_ROOT / "docs" / "lineage.md").read_text()
    section = text[text.index("### Tokens, names") :]
    line = next(line for line in section.splitlines() if line.startswith("transport = "))
    return json.loads(line.removeprefix("transport = "))


def test_the_docs_transport_to_lineage_serve_sends_the_token_and_replays_in_batches(tmp_path, monkeypatch):
    """The documented line, as airflow.cfg would hold it, against a real ``lineage serve`` that is down and then up:
    nothing lost, every event stored once, the token from the environment (never in the line)."""
    import subprocess
    import sys

    import requests

    from include.lineage.emit import tokens

    config = _docs_transport_to_lineage_serve()
    port = free_port()
    config["inner"]["url"] = f"http://127.0.0.1:{port}"
    config["spool_dir"] = str(tmp_path / "spool")
    var = tmp_path / "var"
    file = tokens.ensure_tokens(var / "secrets" / tokens.TOKENS_FILE_NAME)
    writer = next(t.value for t in tokens.load_tokens(file) if "write" in t.scopes)
    assert set(config["inner"]["auth"]) == {"type", "conn_id"}, "the line names where the token is, never the token"
    monkeypatch.setenv("LINEAGE_SERVE_TOKEN", writer)
    transport = get_default_factory().create(config)
    emitted = _spooled(transport, 150)
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("lineage")),
            "serve",
            "--port",
            str(port),
            "--store",
            f"sqlite:///{var / 's.db'}",
        ],
        env={**os.environ, "PIPELINE_VAR_DIR": str(var)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).ok:
                    break
            except requests.ConnectionError:
                assert time.monotonic() < deadline and server.poll() is None, "lineage serve did not start"
                time.sleep(0.2)
        monkeypatch.setenv("LINEAGE_SERVE_TOKEN", "not-the-token-of-this-server")
        transport.emit(event(59))  # refused (401): it waits in the spool too
        assert len(transport.spool) == 151
        bad = json.loads(Serde.to_json(event(58)))
        bad["run"]["facets"] = []  # refused by lineage serve (400): the batch holding it is sent one by one
        transport.spool.append(json.dumps(bad))
        for i in range(5):
            transport.spool.append(Serde.to_json(event(i)))
        monkeypatch.setenv("LINEAGE_SERVE_TOKEN", writer)
        assert transport.replay() == (156, 0), "every event but the bad one, in batches then one by one"
        assert not transport._batch_unsupported, "lineage serve took the batches"
        health = requests.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=5).json()
        assert health["events"] == len({(str(e.run.runId), e.eventTime) for e in emitted}) + 6
        # refused for good (Marquez too answers it 500: 400 here): set aside with why, not retried before the others,
        # and kept by lineage serve as a dead letter
        (aside,) = (tmp_path / "spool" / "undeliverable").glob("*.json")
        assert (
            json.loads(aside.read_text())["run"]["facets"] == [] and "400" in aside.with_suffix(".reason").read_text()
        )
        assert health["deadLetters"] == 1
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_lineage_replay_waits_for_a_batch_the_backend_stores_slower_than_the_emit_bound(tmp_path):
    """`lineage replay` (no deadline) gives a batch `replay_timeout`, not the inner transport's emit bound: a loaded
    `lineage serve` once needed more than its 5 s for 48 Spark events, and the replay gave up on a batch it stored."""
    port = free_port()
    transport = transport_for(port, tmp_path / "spool", timeout=0.5, inner_timeout=1)
    emitted = [event(i) for i in range(5)]
    for e in emitted:
        transport.emit(e)  # nothing listens: each is spooled
    assert len(transport.spool) == 5
    backend = Backend(port, "stall", batch=True)  # answers after 3 s, past the inner transport's 1 s
    try:
        assert transport.replay() == (5, 0)
        assert backend.batches == [5], "one batch, sent once"
        assert backend.unique() == {(str(e.run.runId), "COMPLETE", e.eventTime) for e in emitted}
    finally:
        backend.stop()
