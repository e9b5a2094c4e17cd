"""``lineage serve``'s group commit (``include/lineage/api/posts.py``): the large posts that come while the worker
process stores others go to it together, stored in one transaction, and each is answered as it would be alone.

The queue's grouping is driven here with its worker call run in a thread the test holds (a process cannot be paused
from a test); what the worker does with a group runs for real on a real store, and the last test sends concurrent
large posts to a real ``lineage serve``."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest
import requests
from fastapi import HTTPException
from sqlalchemy import func, select

from include.lineage.api import posts
from include.lineage.store import LineageStore
from include.lineage.store.schema import dead_letters_table, events_table
from tests.support import start_lineage_serve
from tests.unit.test_lineage_serve_limits import PRODUCER, _large, event


def body(data, batch_endpoint: bool = True, gzipped: bool = False) -> posts.Body:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    endpoint = "/api/v1/lineage/batch" if batch_endpoint else "/api/v1/lineage"
    return posts.Body(gzip.compress(raw) if gzipped else raw, gzipped, batch_endpoint, endpoint, "client-a")


# ------------------------------------------------------------------------------------------- the queue's groups
class HeldWorker:
    """Stands in for the worker process: records each group, and holds each call until the test releases it."""

    def __init__(self):
        self.groups: list[list[posts.Body]] = []
        self.release = threading.Semaphore(0)
        self.broken_next = False

    def call(self, store_url: str, bodies: list[posts.Body]):
        self.groups.append(bodies)
        self.release.acquire(timeout=30)
        if self.broken_next:
            self.broken_next = False
            raise BrokenProcessPool("the worker died")
        return [(201, {"endpoint": item.endpoint, "size": len(item.body)}) for item in bodies]


@pytest.fixture
def held(monkeypatch):
    worker = HeldWorker()
    executor = ThreadPoolExecutor(max_workers=1)
    monkeypatch.setattr(posts, "ingest_in_worker", worker.call)
    monkeypatch.setattr(posts.WorkerQueue, "_executor", lambda self: executor)
    yield worker
    for _ in range(100):
        worker.release.release()
    executor.shutdown(wait=True)


async def _until(condition, seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


def test_posts_that_come_while_the_worker_stores_go_to_it_together_each_answered_its_own(held):
    async def scenario():
        queue = posts.WorkerQueue("sqlite:///unused.db")
        first = asyncio.ensure_future(queue.store(body(b"x" * 10)))
        await _until(lambda: len(held.groups) == 1)  # sent at once to the idle worker: nothing waits for company
        later = [asyncio.ensure_future(queue.store(body(b"y" * size))) for size in (11, 12, 13)]
        await asyncio.sleep(0.05)
        assert len(held.groups) == 1, "the worker is busy: the later posts wait"
        held.release.release()
        assert (await first)[1]["size"] == 10
        await _until(lambda: len(held.groups) == 2)
        held.release.release()
        answers = await asyncio.gather(*later)
        assert [len(group) for group in held.groups] == [1, 3]
        assert [answer[1]["size"] for answer in answers] == [11, 12, 13], "each post its own answer, in order"

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("sizes", "groups"),
    [
        ([1] * (2 * posts.GROUP_POSTS + 4), [1, posts.GROUP_POSTS, posts.GROUP_POSTS, 3]),  # at most GROUP_POSTS
        ([1, posts.GROUP_BYTES // 2, posts.GROUP_BYTES // 2, 1], [1, 2, 1]),  # at most GROUP_BYTES of bodies ...
        ([1, posts.GROUP_BYTES * 2, 1], [1, 1, 1]),  # ... but a body larger than that still goes, alone
    ],
)
def test_a_group_holds_at_most_its_posts_and_bytes(held, sizes, groups):
    async def scenario():
        queue = posts.WorkerQueue("sqlite:///unused.db")
        waiting = [asyncio.ensure_future(queue.store(body(b"z" * size))) for size in sizes]
        for _ in groups:
            held.release.release()
        answers = await asyncio.gather(*waiting)
        assert [len(group) for group in held.groups] == groups
        assert [answer[1]["size"] for answer in answers] == sizes

    asyncio.run(scenario())


def test_a_post_whose_client_went_away_is_not_sent_and_a_dead_worker_answers_503_to_its_group_only(held):
    async def scenario():
        queue = posts.WorkerQueue("sqlite:///unused.db")
        first = asyncio.ensure_future(queue.store(body(b"a")))
        await _until(lambda: len(held.groups) == 1)
        gone = asyncio.ensure_future(queue.store(body(b"bb")))
        kept = [asyncio.ensure_future(queue.store(body(b"c" * size))) for size in (3, 4)]
        await asyncio.sleep(0.01)
        gone.cancel()
        held.broken_next = True  # the first call's worker dies
        held.release.release()
        with pytest.raises(HTTPException) as died:
            await first
        assert died.value.status_code == 503
        held.release.release()
        answers = await asyncio.gather(*kept)
        assert [[len(item.body) for item in group] for group in held.groups] == [[1], [3, 4]]
        assert [answer[1]["size"] for answer in answers] == [3, 4], "the next group went to a new worker"

    asyncio.run(scenario())


# ----------------------------------------------------------------------------------- what the worker does
def _counts(url: str) -> tuple[int, int]:
    with LineageStore(url) as store, store.engine.connect() as conn:
        return (
            conn.execute(select(func.count()).select_from(events_table)).scalar_one(),
            conn.execute(select(func.count()).select_from(dead_letters_table)).scalar_one(),
        )


def _group(stored_before: list[dict]) -> list[posts.Body]:
    """Every kind of large post at once: good batches (one repeating an event stored before and one of its own), a
    single event, a body not JSON, a truncated gzip, a batch with a refused event, a post that is not an array."""
    bad = event("refused")
    bad["outputs"][0]["facets"]["schema"] = {"_producer": PRODUCER, "_schemaURL": "x", "fields": [{"type": ["A"]}]}
    twice = event("twice")
    return [
        body([event(f"a{index}") for index in range(5)] + [stored_before[0]]),
        body(b"{not json"),
        body([twice, twice, event("b")], gzipped=True),
        body(event("single"), batch_endpoint=False),
        body(gzip.compress(json.dumps([event("cut")]).encode())[:-8], gzipped=False),
        body([event("c"), bad, event("d")]),
        body(event("not an array")),
        body(gzip.compress(json.dumps([event("cut2")]).encode())[:-8], gzipped=True),
    ]


def test_a_group_is_stored_in_one_transaction_and_answered_as_each_post_alone(tmp_path, monkeypatch):
    before = [event("before")]
    urls = {}
    for name in ("together", "alone"):
        urls[name] = f"sqlite:///{tmp_path / name}.db"
        with LineageStore(urls[name]) as store:
            store.ingest(before)
    group = _group(before)
    transactions: list[int] = []
    real = LineageStore._ingest_transaction

    def counted(self, batch, bulk, is_new=None):
        transactions.append(len(batch))
        return real(self, batch, bulk, is_new)

    monkeypatch.setattr(LineageStore, "_ingest_transaction", counted)
    together = posts.ingest_in_worker(urls["together"], group)
    assert transactions == [6 + 3 + 1], "the three admitted posts' events in one transaction"
    alone = [posts.ingest_in_worker(urls["alone"], [item])[0] for item in group]
    assert together == alone
    statuses = [status for status, _ in together]
    assert statuses == [201, 400, 201, 201, 400, 400, 400, 400]
    assert together[0][1] == {"received": 6, "new": 5} and together[2][1] == {"received": 3, "new": 2}
    assert _counts(urls["together"]) == _counts(urls["alone"]) == (1 + 5 + 2 + 1, 5)


def test_a_batch_of_more_events_than_a_store_transaction_is_still_all_or_none(tmp_path, monkeypatch):
    """``LineageStore.ingest`` splits what it is given into transactions of 500 events; a post is stored by
    ``ingest_posts``, one transaction however many events: an event the store refuses past the 500th leaves none of
    the post stored, as its 400 says. (The refusal stands in for one only PostgreSQL makes, a NUL in a name: the
    integration suite's test.)"""
    from include.lineage.errors import InvalidEventError
    from include.lineage.store.ingest import EventIngest

    url = f"sqlite:///{tmp_path / 'store.db'}"
    real = EventIngest.run_stored

    def refusing(self, event_id):
        if self.event["job"]["name"] == "j550":
            raise InvalidEventError("the store cannot keep this event")
        return real(self, event_id)

    monkeypatch.setattr(EventIngest, "run_stored", refusing)
    answers = posts.ingest_in_worker(url, [body([event(f"j{index}") for index in range(600)])])
    assert answers[0][0] == 400 and "not stored" in answers[0][1]["message"]
    assert "POST /api/v1/lineage/batch, event 550: the store cannot keep" in answers[0][1]["message"], "its index named"
    assert _counts(url) == (0, 1), "none of the post stored; the post kept as a dead letter"


def test_concurrent_large_posts_to_a_real_server_are_each_stored_once_and_answered(tmp_path):
    env = {**os.environ, "PIPELINE_VAR_DIR": str(tmp_path / "var")}
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    batches = [
        [_large(f"c{client}_{n}")] + [event(f"c{client}_{n}_{i}") for i in range(9)]
        for client in range(8)
        for n in range(3)
    ]
    assert all(len(json.dumps(batch)) > posts.OFFLOAD_BYTES for batch in batches)
    process, url = start_lineage_serve(["--store", store_url, "--no-auth"], env)
    try:
        with ThreadPoolExecutor(max_workers=8) as clients:
            answers = list(
                clients.map(
                    lambda batch: requests.post(f"{url}/api/v1/lineage/batch", json=batch, timeout=300), batches
                )
            )
        assert [(answer.status_code, answer.json()) for answer in answers] == [
            (201, {"received": 10, "new": 10})
        ] * len(batches)
        again = requests.post(f"{url}/api/v1/lineage/batch", json=batches[0], timeout=300)
        assert (again.status_code, again.json()) == (201, {"received": 10, "new": 0})
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert _counts(store_url) == (10 * len(batches), 0)


def test_a_groups_events_are_stored_in_time_order_and_each_post_counted_as_it_came(tmp_path):
    """Posts that come at once from several clients interleave their runs' events: a run's COMPLETE in one post, its
    START in the next. Stored in the order they came, the START is earlier than its run's first event, and the
    transaction writes its runs and looks the job's latest run up again; stored in time order, it does not. Each
    post's count is its own events' (a duplicate of an event stored before counted in the post holding it)."""
    from sqlalchemy import event as listen

    from include.lineage.store.store import SourcedEvent

    url = f"sqlite:///{tmp_path / 'store.db'}"
    start, complete = event("ordered"), event("ordered")
    complete["run"] = start["run"]
    start["eventType"], complete["eventTime"] = "START", "2025-02-01T00:05:00Z"
    stored_before = event("before")
    with LineageStore(url) as store:
        store.ingest([stored_before])
        sent: list[str] = []
        listen.listen(store.engine, "before_cursor_execute", lambda *args: sent.append(" ".join(args[2].split())))
        results = store.ingest_posts(
            [[SourcedEvent(complete, "a"), SourcedEvent(stored_before, "a")], [SourcedEvent(start, "b")]]
        )
    assert [(result.read, result.new) for result in results] == [(2, 1), (1, 1)]
    latest_reads = [s for s in sent if s.startswith("SELECT lineage_runs.id, lineage_runs.first_event_time")]
    assert latest_reads == [], "the START was stored first"
    with LineageStore(url) as store, store.engine.connect() as conn:
        from include.lineage.store.schema import runs_table

        row = conn.execute(select(runs_table.c.state, runs_table.c.started_at)).all()
    assert ("COMPLETED", "2025-02-01T00:00:00.000000Z") in [tuple(r) for r in row]
