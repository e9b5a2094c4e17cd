"""The cycle collector's pause (``include/core/collector.py``): off while any pause is open, in any thread and in any
order of leaving; back as the first pause found it; back after a failure; and held around an ingest, where a day's
backlog spent 27 % of its CPU in collections."""

from __future__ import annotations

import gc
import json
import threading
from contextlib import AbstractContextManager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from include.core.collector import cyclic_gc_paused
from include.lineage.errors import UnreadableEventFileError
from include.lineage.store import LineageStore
from include.lineage.store.ingest import EventIngest
from tests.unit.test_payload_packing import event


@given(order=st.permutations(range(5)), opened=st.integers(min_value=1, max_value=5))
def test_the_collector_is_off_while_any_pause_is_open_whatever_order_they_close_in(order, opened):
    assert gc.isenabled()
    pauses: list[AbstractContextManager | None] = [cyclic_gc_paused() for _ in range(opened)]
    for pause in pauses:
        pause.__enter__()
    for index in [i for i in order if i < opened]:
        assert not gc.isenabled()
        pauses[index].__exit__(None, None, None)
        pauses[index] = None
    assert gc.isenabled()


def test_a_pause_left_by_another_thread_keeps_the_collector_off_until_the_last_leaves():
    inside, leave = threading.Event(), threading.Event()

    def long_pause():
        with cyclic_gc_paused():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=long_pause)
    thread.start()
    assert inside.wait(10)
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled(), "the other thread is still inside its pause"
    leave.set()
    thread.join(10)
    assert gc.isenabled()


def test_the_collector_comes_back_after_a_failure_and_a_callers_own_pause_is_not_ended():
    with pytest.raises(ValueError), cyclic_gc_paused():
        raise ValueError("work that fails")
    assert gc.isenabled()
    gc.disable()
    try:
        with cyclic_gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_ingest_holds_the_pause_while_it_reads_and_stores_and_leaves_it_after(tmp_path, monkeypatch):
    seen: list[bool] = []
    stored = EventIngest.run_stored

    def watched(self, event_id):
        seen.append(gc.isenabled())
        return stored(self, event_id)

    monkeypatch.setattr(EventIngest, "run_stored", watched)
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text("\n".join(json.dumps(event(i)) for i in range(3)) + "\n")
    bad.write_text("{not json\n")
    with LineageStore(f"sqlite:///{tmp_path / 's.db'}") as store:
        assert store.ingest([event(10), event(11)]).new == 2
        assert gc.isenabled()
        with pytest.raises(UnreadableEventFileError):
            store.ingest_files([good, bad])
        assert gc.isenabled(), "back on after a file that could not be read"
    assert seen == [False] * 5
