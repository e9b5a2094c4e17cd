"""The Spark event forwarder's checkpoint (include/lineage/emit/spark_forwarder.py): each event of a Spark
application's outbox file delivered in order, at least once, never again once an acknowledged checkpoint passed it;
a torn last line waits; a crash between the send and the checkpoint resends only that event."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from include.core import settings
from include.lineage.emit import spark_forwarder
from include.lineage.emit.spark_forwarder import Checkpoint, Outbox
from include.lineage.emit.spool import SpoolingTransport


class Crash(BaseException):
    """The forwarder's process dies (after the backend acknowledged, before the checkpoint)."""


def _event(index: int, size: int = 0) -> str:
    return json.dumps(
        {
            "eventType": "START",
            "eventTime": f"2026-11-24T00:00:{index % 60:02d}Z",
            "run": {"runId": f"run-{index}"},
            "job": {"namespace": "ns", "name": "app"},
            "pad": "x" * size,
        },
        sort_keys=True,
    )


def _paths(tmp_path) -> settings.Paths:
    return settings.Paths(tmp_path / "var")


def _append(outbox: Outbox, data: str) -> None:
    with outbox.path.open("a") as stream:
        stream.write(data)


class Recorder:
    def __init__(self):
        self.received: list[str] = []
        self.fail = False
        self.crash_after_ack = False

    def __call__(self, text: str) -> bool:
        if self.fail:
            return False
        self.received.append(text)
        if self.crash_after_ack:
            raise Crash
        return True


def _ids(texts) -> list[str]:
    return [json.loads(text)["run"]["runId"] for text in texts]


def test_a_torn_last_line_waits_until_it_is_complete(tmp_path):
    paths = _paths(tmp_path)
    outbox = Outbox.for_launch(paths, "dag.task")
    whole, torn = _event(1), _event(2)
    _append(outbox, whole + "\n" + torn[:25])
    backend = Recorder()
    report = spark_forwarder.run(paths, [outbox], deliver=backend)
    assert _ids(backend.received) == ["run-1"]
    assert (report.collected, report.forwarded) == (1, 1)
    assert Checkpoint.read(outbox.state_path).forwarded == len(whole) + 1
    _append(outbox, torn[25:] + "\n")
    spark_forwarder.run(paths, [outbox], deliver=backend)
    assert _ids(backend.received) == ["run-1", "run-2"]
    assert _ids(paths.spark_lineage_events.read_text().splitlines()) == ["run-1", "run-2"]
    assert outbox.path.exists(), "its application still runs: the file stays"
    outbox.release()
    spark_forwarder.run(paths, [outbox], deliver=backend)
    assert not outbox.path.exists() and not outbox.state_path.exists(), "final and forwarded: deleted"
    assert _ids(backend.received) == ["run-1", "run-2"]


def test_a_crash_between_the_acknowledgement_and_the_checkpoint_resends_that_event_only(tmp_path):
    paths = _paths(tmp_path)
    outbox = Outbox.for_launch(paths)
    _append(outbox, "".join(_event(i) + "\n" for i in range(4)))
    backend = Recorder()

    def crash_on_third(text: str) -> bool:
        backend(text)
        if len(backend.received) == 3:
            raise Crash
        return True

    with pytest.raises(Crash):
        spark_forwarder.run(paths, [outbox], deliver=crash_on_third)
    spark_forwarder.run(paths, [outbox], deliver=backend)
    assert _ids(backend.received) == ["run-0", "run-1", "run-2", "run-2", "run-3"]


def test_a_backend_that_fails_keeps_the_events_and_the_next_run_sends_them_in_order(tmp_path):
    paths = _paths(tmp_path)
    outbox = Outbox.for_launch(paths)
    _append(outbox, "".join(_event(i) + "\n" for i in range(3)))
    backend = Recorder()
    backend.fail = True
    report = spark_forwarder.run(paths, [outbox], deliver=backend)
    assert (report.collected, report.forwarded, report.waiting) == (3, 0, 1)
    assert len(paths.spark_lineage_events.read_text().splitlines()) == 3, "the local store has them at once"
    outbox.release()
    backend.fail = False
    report = spark_forwarder.run(paths, deliver=backend)
    assert _ids(backend.received) == ["run-0", "run-1", "run-2"]
    assert (report.collected, report.forwarded, report.waiting, report.settled) == (0, 3, 0, 1)
    assert len(paths.spark_lineage_events.read_text().splitlines()) == 3, "collected once"


def test_two_applications_files_each_forwarded_whole_oldest_first(tmp_path):
    paths = _paths(tmp_path)
    first, second = Outbox.for_launch(paths, "a"), Outbox.for_launch(paths, "b")
    big = 20_000  # larger than openlineage-java's 8 KiB write chunks
    for index in range(3):
        _append(second, _event(10 + index, big) + "\n")
        _append(first, _event(index, big) + "\n")
    first.release()
    second.release()
    backend = Recorder()
    spark_forwarder.run(paths, deliver=backend)
    assert _ids(backend.received) == ["run-0", "run-1", "run-2", "run-10", "run-11", "run-12"]
    assert spark_forwarder.pending_outboxes(paths) == []


def test_a_dead_launchers_file_is_final_a_live_ones_is_not(tmp_path):
    """The running mark is a lock the kernel drops when the launcher dies."""
    paths = _paths(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, pathlib; from include.core import settings; from include.lineage.emit.spark_forwarder import"
            " Outbox; o = Outbox.for_launch(settings.Paths(pathlib.Path(sys.argv[1]))); print(o.path, flush=True); time.sleep(60)",
            str(paths.var),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=settings.PROJECT_ROOT,
    )
    try:
        outbox = Outbox(type(paths.var)(holder.stdout.readline().strip()))
        _append(outbox, _event(1) + "\n")
        assert outbox.is_live()
        spark_forwarder.run(paths, deliver=Recorder())
        assert outbox.path.exists()
    finally:
        holder.kill()
        holder.wait()
    old = time.time() - spark_forwarder.STALE_SECONDS - 1
    os.utime(outbox.running_path, (old, old))
    assert not outbox.is_live()
    spark_forwarder.run(paths, deliver=Recorder())
    assert not outbox.path.exists()


def test_a_spooling_target_spools_the_rest_at_once_once_the_backend_failed(tmp_path, monkeypatch):
    """The backend is down: one event costs the spool's timeout, the others go straight to the spool, in order."""
    paths = _paths(tmp_path)
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(paths.var))
    spool_dir = tmp_path / "spool"
    transport = SpoolingTransport(
        SpoolingTransport.config_class.from_dict(
            {
                "timeout": 0.3,
                "spool_dir": str(spool_dir),
                "inner": {"type": "http", "url": "http://127.0.0.1:9", "endpoint": "api/v1/lineage", "timeout": 5},
            }
        )
    )
    outbox = Outbox.for_launch(paths)
    _append(outbox, "".join(_event(i) + "\n" for i in range(20)))
    outbox.release()
    started = time.monotonic()
    target = spark_forwarder.Target(transport, paths, deadline=time.monotonic() + 5)
    report = spark_forwarder.run(paths, [outbox], deliver=target)
    assert time.monotonic() - started < 2.5
    assert report.forwarded == 20 and not outbox.path.exists()
    spooled = sorted(spool_dir.glob("*.json"))
    assert _ids(path.read_text() for path in spooled) == [f"run-{i}" for i in range(20)]


def test_the_local_store_file_as_target_sends_nothing_and_settles(tmp_path):
    paths = _paths(tmp_path)
    outbox = Outbox.for_launch(paths)
    _append(outbox, _event(1) + "\n")
    outbox.release()
    report = spark_forwarder.run(paths, [outbox], deliver=None)
    assert (report.collected, report.forwarded, report.settled) == (1, 0, 1)
    assert _ids(paths.spark_lineage_events.read_text().splitlines()) == ["run-1"]


@pytest.mark.parametrize(
    "line",
    # a lone carriage return: the outbox was split with bytes.splitlines, which ends a line there, and the reader
    # stopped at that "line without a newline" for good, as at a line being written
    ["not json", "[1, 2]", '"a string"', "{broken", "\x00\x01", "{torn\rline"],
    ids=["text", "array", "string", "truncated", "binary", "a lone carriage return"],
)
def test_a_line_that_is_not_an_event_is_skipped_not_collected_not_sent(tmp_path, line):
    paths = _paths(tmp_path)
    outbox = Outbox.for_launch(paths)
    _append(outbox, _event(1) + "\n" + line + "\n" + _event(2) + "\n")
    backend = Recorder()
    spark_forwarder.run(paths, [outbox], deliver=backend)
    assert _ids(backend.received) == ["run-1", "run-2"]
    assert _ids(paths.spark_lineage_events.read_text().splitlines()) == ["run-1", "run-2"]


@pytest.mark.parametrize("content", ["", "{", '{"collected": "x"}', "[]"], ids=["empty", "torn", "type", "array"])
def test_an_unreadable_checkpoint_starts_the_file_over(tmp_path, content):
    path = tmp_path / "x.state"
    path.write_text(content)
    assert Checkpoint.read(path) == Checkpoint(0, 0)


# One step of the property: append (a whole event or part of one), forward, crash (after an acknowledgement,
# before the checkpoint), or a failing backend.
STEP = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 3)),
    st.tuples(st.just("forward"), st.just(0)),
    st.tuples(st.just("crash"), st.integers(0, 3)),
    st.tuples(st.just("fail"), st.just(0)),
)


@hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, max_size=25))
def test_any_interleaving_delivers_each_event_at_least_once_and_never_again_past_a_checkpoint(tmp_path_factory, steps):
    paths = _paths(tmp_path_factory.mktemp("prop"))
    outbox = Outbox.for_launch(paths)
    written, pending_tail = [], ""
    received: list[str] = []
    checkpointed: set[str] = set()  # events an acknowledged checkpoint has passed
    next_id = 0

    def acknowledged_ids() -> set[str]:
        data = outbox.path.read_bytes() if outbox.path.exists() else b""
        done = data[: Checkpoint.read(outbox.state_path).forwarded].decode()
        return set(_ids(line for line in done.splitlines() if line))

    def forward(crash_at: int | None = None, fail: bool = False) -> None:
        calls = [0]

        def deliver(text: str) -> bool:
            if fail:
                return False
            event_id = _ids([text])[0]
            assert event_id not in checkpointed, f"{event_id} sent again after an acknowledged checkpoint"
            received.append(event_id)
            calls[0] += 1
            if crash_at is not None and calls[0] > crash_at:
                raise Crash
            return True

        try:
            spark_forwarder.run(paths, [outbox], deliver=deliver)
        except Crash:
            pass
        checkpointed.update(acknowledged_ids())

    for action, value in steps:
        if action == "append":
            # value 0: half an event; else that many whole events (completing a torn one first)
            if pending_tail:
                _append(outbox, pending_tail)
                pending_tail = ""
            for _ in range(value):
                written.append(f"run-{next_id}")
                _append(outbox, _event(next_id) + "\n")
                next_id += 1
            if value == 0:
                text = _event(next_id) + "\n"
                written.append(f"run-{next_id}")
                next_id += 1
                _append(outbox, text[:10])
                pending_tail = text[10:]
        elif action == "forward":
            forward()
        elif action == "crash":
            forward(crash_at=value)
        else:
            forward(fail=True)
    _append(outbox, pending_tail)
    forward()
    assert set(written) <= set(received), "every event delivered at least once"
    first_seen = list(dict.fromkeys(received))
    assert first_seen == [w for w in written if w in first_seen], "first deliveries in the order written"
    assert _ids(paths.spark_lineage_events.read_text().splitlines()) == written if written else True


def test_lineage_replay_gives_a_slow_backend_more_than_the_emit_bound(tmp_path, monkeypatch):
    """A backend that takes 3 s per request (lineage serve storing a batch of large Spark events) with the README's
    0.5 s bound: emits are spooled within the bound, and a replay (no deadline) still delivers every event once."""
    from tests.support import RecordingBackend

    monkeypatch.setenv("PIPELINE_VAR_DIR", str(_paths(tmp_path).var))
    backend = RecordingBackend(0, "ok", batch=True)
    spool_dir = tmp_path / "spool"
    transport = SpoolingTransport(
        SpoolingTransport.config_class.from_dict(
            {
                "timeout": 0.5,
                "spool_dir": str(spool_dir),
                "inner": {"type": "http", "url": backend.url, "endpoint": "api/v1/lineage", "timeout": 5},
            }
        )
    )
    try:
        for index in range(3):
            transport.keep(_event(index))
        backend.behaviour = "stall"
        assert transport.replay() == (3, 0)
        assert _ids(json.dumps(event) for event in backend.received) == ["run-0", "run-1", "run-2"]
        assert backend.batches == [3]
    finally:
        backend.stop()


def test_an_application_that_wrote_nothing_leaves_nothing_behind(tmp_path):
    """Its launcher died before the listener's first event: only the running mark was left; the next run clears it."""
    paths = _paths(tmp_path)
    outbox = Outbox.for_launch(paths)
    os.close(outbox._running)  # the launcher is gone without releasing
    outbox._running = None
    old = time.time() - spark_forwarder.STALE_SECONDS - 1
    os.utime(outbox.running_path, (old, old))
    assert [o.path for o in spark_forwarder.pending_outboxes(paths)] == [outbox.path]
    report = spark_forwarder.run(paths, deliver=Recorder())
    assert report.settled == 1
    assert list(spark_forwarder.outbox_dir(paths).iterdir()) == []


def test_a_dead_applications_torn_last_line_is_kept_aside_once_stale(tmp_path):
    """The JVM died while writing its last event: the rest is never coming. Once stale, the complete events are
    delivered, the torn bytes kept as <name>.ndjson.torn, and the outbox no longer waits."""
    paths = _paths(tmp_path)
    outbox = Outbox.for_launch(paths)
    _append(outbox, _event(1) + "\n" + _event(2)[:30])
    outbox.release()
    backend = Recorder()
    first = spark_forwarder.run(paths, deliver=backend)
    assert (first.forwarded, first.waiting) == (1, 1), "fresh: the rest of the line may still come"
    old = time.time() - spark_forwarder.STALE_SECONDS - 1
    os.utime(outbox.path, (old, old))
    second = spark_forwarder.run(paths, deliver=backend)
    assert (second.forwarded, second.waiting, second.settled) == (0, 0, 1)
    assert _ids(backend.received) == ["run-1"]
    torn = outbox.path.with_name(outbox.path.name + ".torn")
    assert torn.read_text() == _event(1) + "\n" + _event(2)[:30]
    assert spark_forwarder.pending_outboxes(paths) == []


@pytest.mark.parametrize(
    ("where", "forwarded"),
    [("lineage/events.jsonl", False), ("elsewhere/events.jsonl", True)],
    ids=["the-store-file", "another-file"],
)
def test_airflow_cfg_transport_is_the_target_unless_it_is_the_stores_own_file(tmp_path, monkeypatch, where, forwarded):
    """The default airflow.cfg writes var/lineage/events.jsonl, which the store reads: Spark events are not copied
    into it (the store has them from var/lineage/spark/events.jsonl); any other destination gets them."""
    from include.lineage.emit import transports

    paths = _paths(tmp_path)
    monkeypatch.delenv(settings.SPARK_LINEAGE_KAFKA.name, raising=False)
    file_transport = {"type": "file", "log_file_path": str(paths.var / where), "append": True}
    (paths.var / where).parent.mkdir(parents=True)  # openlineage-python's file transport makes no folder
    monkeypatch.setattr(transports, "configured_transport", lambda: file_transport)
    assert spark_forwarder.target_configuration(paths) == (file_transport if forwarded else None)
    composite = {
        "type": "composite",
        "transports": [file_transport, {**file_transport, "log_file_path": str(tmp_path / "copy.jsonl")}],
    }
    monkeypatch.setattr(transports, "configured_transport", lambda: composite)
    outbox = Outbox.for_launch(paths)
    _append(outbox, _event(1) + "\n")
    outbox.release()
    spark_forwarder.run(paths, [outbox])
    assert _ids((tmp_path / "copy.jsonl").read_text().splitlines()) == ["run-1"]
    assert (paths.var / where).exists() == forwarded, "the store's own file gets no copy"


def test_forwarders_running_at_once_send_each_event_once(tmp_path):
    """A task's own forwarding and `lineage replay` at the same moment: the outbox's lock lets one at a time."""
    import threading

    paths = _paths(tmp_path)
    outbox = Outbox.for_launch(paths)
    _append(outbox, "".join(_event(i) + "\n" for i in range(40)))
    outbox.release()
    received: list[str] = []

    def slow(text: str) -> bool:
        time.sleep(0.002)
        received.append(text)
        return True

    workers = [threading.Thread(target=spark_forwarder.run, args=(paths,), kwargs={"deliver": slow}) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert _ids(received) == [f"run-{i}" for i in range(40)]
    assert len(paths.spark_lineage_events.read_text().splitlines()) == 40
