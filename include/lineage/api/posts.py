"""What a post of events to ``lineage serve`` becomes (the two POST routes of ``server.py``): admitted as Marquez 0.51
admits it (``intake.py``), then stored, each post all or none; what is refused, a body or an event, kept as a dead
letter with why.

Bodies larger than ``OFFLOAD_BYTES`` are decoded, admitted and stored in one worker process, so that the server's
own process never holds the interpreter for long. That process is the server's writer under load, and a store's
transaction costs much the same for one post as for several (the writers' lock, the reads of a batch, a statement
per table): so the posts that arrive while it works wait, and go to it together when it is done, stored in one
transaction (group commit, ``WorkerQueue``), each still answered on its own. A post that comes to an idle worker is
sent at once: nothing waits for company."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException

from include.core import settings
from include.lineage.api.body import gunzip_limited, parse_json
from include.lineage.api.errors import error_body
from include.lineage.api.intake import Admitted, Refused, admit
from include.lineage.errors import InvalidEventError
from include.lineage.events import SourcedEvent
from include.lineage.store import LineageStore, dead_letters
from include.lineage.store.ingest_result import IngestResult

OFFLOAD_BYTES = 256 * 1024  # a body larger than this, as sent, is decoded, checked and stored in the worker process
# What one group may hold. Its transaction holds the writers' lock as long as its posts one after the other would
# have (a small post stored by the server's own process, which could have slipped between them, now waits for the
# group): eight posts, the clients a fleet's burst typically brings at once, and 8 MB of bodies as sent.
GROUP_POSTS = 8
GROUP_BYTES = 8 * 1024 * 1024

Answer = tuple[int, dict]  # a post's HTTP status and JSON answer


def _as_bytes(item) -> bytes:
    return json.dumps(item, ensure_ascii=False).encode()


@dataclass
class AdmittedPost:
    """A post whose every event was admitted, not yet stored."""

    data: Any  # the post's JSON, kept as a dead letter if the store refuses it
    admitted: list[Admitted]
    endpoint: str
    client: str | None

    def sourced(self) -> list[SourcedEvent]:
        """The post's events as the store takes them, each named by where it came from: the endpoint, and in a post
        of several its index in the posted array (as the admission names a refused one), so that an event the store
        refuses is named, not only its post."""
        if len(self.admitted) == 1:
            return [self.admitted[0].sourced(f"POST {self.endpoint}")]
        return [item.sourced(f"POST {self.endpoint}, event {index}") for index, item in enumerate(self.admitted)]

    def answer(self, result: IngestResult) -> Answer:
        content: dict = {"received": result.read, "new": result.new}
        problems = {str(index): item.problems for index, item in enumerate(self.admitted) if item.problems}
        if problems:
            # stored, with what the spec refuses in it named and left out of what the store reads
            content["problems"] = problems["0"] if not isinstance(self.data, list) else problems
        return 201, content


def admit_post(
    store: LineageStore, data, batch_endpoint: bool, endpoint: str, client: str | None
) -> AdmittedPost | Answer:
    """A post's parsed JSON admitted, or the answer refusing it. ``batch_endpoint``: it must be an array, and a 400
    lists every refused event; otherwise one event (or an array), the first refused one named. What is refused is kept
    as a dead letter (the refused events of an array one by one)."""
    if batch_endpoint and not isinstance(data, list):
        text = "a batch is a JSON array of OpenLineage events"
        dead_letters.keep(store, _as_bytes(data), text, 400, endpoint, client)
        return 400, error_body(400, text)
    events = data if isinstance(data, list) else [data]
    limit = settings.LINEAGE_MAX_BATCH_EVENTS.integer()
    if len(events) > limit:
        where = "the batch" if batch_endpoint else "the post (use /api/v1/lineage/batch)"
        text = f"{where} holds {len(events):,} events; the limit is {limit:,}"
        dead_letters.keep(store, _as_bytes(data), text, 413, endpoint, client)
        return 413, error_body(413, text)
    verdicts = [admit(item) for item in events]
    refused = [(index, verdict) for index, verdict in enumerate(verdicts) if isinstance(verdict, Refused)]
    for index, verdict in refused:
        where = f"event {index} of the post: " if len(events) > 1 else ""
        dead_letters.keep(store, _as_bytes(events[index]), where + verdict.message(), verdict.status, endpoint, client)
    if refused and batch_endpoint:
        text = f"{len(refused)} of {len(events)} events refused; none stored (each kept as a dead letter)"
        errors = [{"index": index, "status": v.status, "message": v.message()} for index, v in refused]
        return 400, {**error_body(400, text), "errors": errors}
    if refused:
        index, verdict = refused[0]
        status = verdict.status if len(events) == 1 else 400
        where = f"event {index}: " if len(events) > 1 else ""
        return status, error_body(status, f"not stored, kept as a dead letter: {where}{verdict.message()}")
    return AdmittedPost(data, verdicts, endpoint, client)  # type: ignore[arg-type]


def store_posts(store: LineageStore, posts: list[AdmittedPost]) -> list[Answer]:
    """Admitted posts stored in one transaction, each one's answer. When the store refuses an event, the posts are
    stored again each alone, so that only the post holding it is refused (400, kept as a dead letter)."""
    if not posts:
        return []
    try:
        results = store.ingest_posts([post.sourced() for post in posts])
    except InvalidEventError as error:
        if len(posts) > 1:
            return [answer for post in posts for answer in store_posts(store, [post])]
        post = posts[0]
        dead_letters.keep(
            store, _as_bytes(post.data), f"the store refused it: {error}", 400, post.endpoint, post.client
        )
        return [(400, error_body(400, f"not stored, kept as a dead letter: {error}"))]
    return [post.answer(result) for post, result in zip(posts, results, strict=True)]


def answer_events(
    store: LineageStore, data, batch_endpoint: bool, endpoint: str = "/api/v1/lineage", client: str | None = None
) -> Answer:
    """Admit and store one post's parsed JSON: (status, answer)."""
    checked = admit_post(store, data, batch_endpoint, endpoint, client)
    return checked if isinstance(checked, tuple) else store_posts(store, [checked])[0]


def decoded(body: bytes, gzipped: bool):
    """A body's JSON (None for an empty one: Marquez reads no event, 422), within the limits of ``body.py``."""
    text = gunzip_limited(body) if gzipped else body
    return None if not text.strip() else parse_json(text)


def keep_refused_body(store: LineageStore, body: bytes, error: HTTPException, endpoint: str, client) -> None:
    """A body refused before any event was read, kept as a dead letter: whole when it was refused for what it holds
    (not gzip, not JSON, nested too deep), only its start when refused for its size (413: a gzip bomb, too large)."""
    whole = error.status_code != 413
    kept = body if whole else b""  # a gzip bomb's start is no help: its reason and size are
    dead_letters.keep(store, kept, str(error.detail), error.status_code, endpoint, client, len(body), whole)


# ------------------------------------------------------------------------------------------------ the worker
@dataclass
class Body:
    """A large post as it came, for the worker process."""

    body: bytes
    gzipped: bool
    batch_endpoint: bool
    endpoint: str
    client: str | None


_worker_stores: dict[str, LineageStore] = {}


def _exit_with_the_server(server_pid: int, poll_seconds: float = 1.0) -> None:
    """The worker's initializer. A spawned worker holds both ends of its call queue, so it never reads an end of file
    when the server goes, gracefully or killed: it would wait forever, an orphan holding the store open (and the
    resource tracker with it). A thread ends it once its parent is no longer the server."""

    def watch() -> None:
        while os.getppid() == server_pid:
            time.sleep(poll_seconds)
        os._exit(0)  # a group half stored is rolled back by the store's transaction

    threading.Thread(target=watch, daemon=True, name="exit-with-the-server").start()


def ingest_in_worker(store_url: str, bodies: list[Body]) -> list[Answer]:
    """In the worker process: a group of large bodies decoded and admitted each on its own, then the admitted ones
    stored in one transaction; each body's answer, in order. The worker keeps its store open; SQLite in WAL mode and
    PostgreSQL take writers of several processes."""
    store = _worker_stores.get(store_url)
    if store is None:
        store = _worker_stores[store_url] = LineageStore(store_url)
    answers: list[Answer | None] = [None] * len(bodies)
    posts: list[tuple[int, AdmittedPost]] = []
    for index, item in enumerate(bodies):
        try:
            data = decoded(item.body, item.gzipped)
        except HTTPException as error:
            keep_refused_body(store, item.body, error, item.endpoint, item.client)
            answers[index] = error.status_code, error_body(error.status_code, str(error.detail))
            continue
        try:
            checked = admit_post(store, data, item.batch_endpoint, item.endpoint, item.client)
        except InvalidEventError as error:
            checked = 400, error_body(400, str(error))
        if isinstance(checked, tuple):
            answers[index] = checked
        else:
            posts.append((index, checked))
    for (index, _), answer in zip(posts, store_posts(store, [post for _, post in posts]), strict=True):
        answers[index] = answer
    return answers  # type: ignore[return-value]


class WorkerQueue:
    """The worker process of large bodies (started on the first one), and the bodies waiting for it: sent at once to
    an idle worker; those that come while it works go together when it is done, at most ``GROUP_POSTS`` posts and
    ``GROUP_BYTES`` of bodies a group. Lives on the server's event loop."""

    def __init__(self, store_url: str):
        self.store_url = store_url
        self._pool: ProcessPoolExecutor | None = None
        self._waiting: list[tuple[Body, asyncio.Future]] = []
        self._busy = False

    async def store(self, body: Body) -> Answer:
        """The body stored by the worker: its answer. 503 when the worker process died (it is started again for the
        next post)."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((body, future))
        if not self._busy:
            self._send()
        return await future

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_exit_with_the_server,
                initargs=(os.getpid(),),
            )
        return self._pool

    def _send(self) -> None:
        group, size = [], 0
        while self._waiting and len(group) < GROUP_POSTS:
            body, future = self._waiting[0]
            if group and size + len(body.body) > GROUP_BYTES:
                break
            self._waiting.pop(0)
            if not future.done():  # else its client went away while it waited
                group.append((body, future))
                size += len(body.body)
        if not group:
            return
        self._busy = True
        try:
            call = self._executor().submit(ingest_in_worker, self.store_url, [body for body, _ in group])
        except BrokenProcessPool as error:  # the worker died after its last call was answered
            call = Future()
            call.set_exception(error)
        asyncio.wrap_future(call).add_done_callback(lambda done: self._answer(group, done))

    def _answer(self, group: list[tuple[Body, asyncio.Future]], done: asyncio.Future) -> None:
        self._busy = False
        error = done.exception() if not done.cancelled() else asyncio.CancelledError()
        if isinstance(error, BrokenProcessPool):
            self._pool = None  # a new worker for the next post
            error = HTTPException(status_code=503, detail="the worker process died; retry")
        answers = None if error else done.result()
        for index, (_, future) in enumerate(group):
            if future.done():
                continue  # its client went away
            if error:
                future.set_exception(error)
            else:
                future.set_result(answers[index])
        if self._waiting:
            self._send()
