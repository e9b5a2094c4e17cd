"""The lineage store over HTTP, speaking what OpenLineage clients and Marquez tools speak.

    POST /api/v1/lineage                      one OpenLineage event (what the ``http`` transport sends); 201
    POST /api/v1/lineage/batch                a JSON array of events, all or none stored; 400 lists the bad ones
    GET  /api/v1/lineage?nodeId=&depth=       Marquez 0.51's lineage graph around a node: its start job and every job
                                              sharing a dataset with the current versions reached, ``depth`` jobs away
         &asOf=2025-02-01T10:00:00+00:00      beyond Marquez: the graph as it was then (an offset is required: 400)
         &history=all                         beyond Marquez: every edge ever seen, with ``firstSeen``/``lastSeen``
    GET  /api/v1/runlineage/upstream?runId=&depth=  Marquez's run provenance: the dataset versions a run read, the
                                              runs that wrote them (``producedByRunId``), and so on
    GET  /api/v1/column-lineage?nodeId=&depth=  column-level upstream of ``datasetField:<ns>:<name>:<field>`` or
                                              ``DATASET.COLUMN``
    GET  /api/v1/health                       liveness, event count, rejected event-file lines and dead letters
                                              waiting (the one route without a token)

What ``lineage serve`` puts in front of these (``serve``; ``create_app(tokens=..., hosts=...)``):

- a bearer token (``Authorization: Bearer …``, what openlineage-python's ``api_key`` auth sends) on every route but
  health: a ``write`` token to post events, a ``read`` token to query (``include/lineage/emit/tokens.py``); 401
  without a valid one, 403 with one of the wrong scope. It refuses to start on a non-loopback address without tokens;
- the ``Host`` header must name this server (its loopback names, the address it listens on, the machine's names
  when it listens on every interface, and ``--allow-host``): a DNS-rebinding page cannot reach it (400);
- posts must be ``Content-Type: application/json`` (415): a cross-site ``text/plain`` form post cannot forge events;
- a fair queue (``admission.py``): ``LINEAGE_MAX_CLIENT_REQUESTS`` requests per client (per token, else per address)
  worked on at once, the others wait their turn (at most ``LINEAGE_INTAKE_WAIT_SECONDS``, then 503); 429 with
  ``Retry-After`` only past ``LINEAGE_INTAKE_CAPACITY`` requests held;
- ``/docs`` and ``/openapi.json`` only with ``--docs``;
- bodies read within the limits of ``include/lineage/api/body.py`` (413 when too large, 400 when not gzip or JSON or
  nested too deep); each event admitted as Marquez 0.51 admits it and read as strictly as the spec reads it
  (``intake.py``: refused where Marquez refuses it, 4xx, else stored whole with what the spec refuses in it named
  and left out of what the store reads), within ``LINEAGE_MAX_EVENT_DATASETS`` and ``LINEAGE_MAX_FACET_BYTES``, in a
  worker thread, or for a large body in the worker process, which stores the posts queued while it worked in one
  transaction (``posts.py``); each post all or none;
- what is refused, a body or an event, is kept as a dead letter with why (``store/dead_letters.py``; ``lineage
  rejected`` lists them, ``--replay`` stores what is taken now); a body refused for its size only by its reason.

Unknown nodes and runs answer 404, bad parameters 400 (``include/lineage/api/errors.py``).

``create_app(store_url)`` is independent of Airflow, so the same routes can be mounted inside Airflow's api-server
(``app.py``), where Airflow's own login guards them instead of these tokens.
"""

from __future__ import annotations

import hashlib
import ipaddress
import socket
import time
from collections.abc import Iterable
from pathlib import Path

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from include.core import settings
from include.core.errors import ConfigurationError
from include.lineage import validation
from include.lineage.api import posts
from include.lineage.api.admission import FairAdmission
from include.lineage.api.answers import JSONAnswer
from include.lineage.api.body import decode_json, read_limited, require_json
from include.lineage.api.errors import error_body, install_error_handlers
from include.lineage.emit import tokens as token_file
from include.lineage.errors import InvalidEventError
from include.lineage.events import MAX_NODE_ID_LENGTH, check_event
from include.lineage.queries import DEFAULT_DEPTH, LineageQueries
from include.lineage.render import run_lineage_json
from include.lineage.store import LineageStore, dead_letters
from include.lineage.store.schema import events_table, rejected_lines_table

HEALTH_PATH = "/api/v1/health"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def check_incoming(lineage_event) -> None:
    """An event as ``lineage serve`` takes it: the OpenLineage schemas and the limits (the one check ``lineage
    consume`` runs too), then the store's shape check. InvalidEventError says what is wrong and where."""
    validation.check_incoming(lineage_event)
    check_event(lineage_event)


def _bounded(name: str, value: str) -> str:
    """400 for an id longer than any the store keeps (its message does not repeat it)."""
    if len(value) > MAX_NODE_ID_LENGTH:
        raise HTTPException(
            status_code=400, detail=f"{name} is {len(value):,} characters long; at most {MAX_NODE_ID_LENGTH:,}"
        )
    return value


def check_all(events: list) -> list[dict]:
    """Every event of a post ``check_incoming`` refuses, by its index and why (the strict check: ``lineage
    consume``'s; ``lineage serve`` admits events with :func:`include.lineage.api.intake.admit`)."""
    errors = []
    for index, item in enumerate(events):
        try:
            check_incoming(item)
        except InvalidEventError as error:
            errors.append({"index": index, "message": str(error)})
    return errors


def _json_error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content=error_body(status, message), headers=headers)


def _bearer(request: Request) -> str | None:
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return credentials.strip() or None if scheme.lower() == "bearer" else None


def _requires(scope: str, tokens: list[token_file.Token] | None, where: str):
    """A FastAPI dependency: a valid bearer token holding ``scope`` (nothing when ``tokens`` is None)."""

    def check(request: Request) -> None:
        if tokens is None:
            return
        presented = _bearer(request)
        token = token_file.match(tokens, presented) if presented else None
        if token is None:
            raise HTTPException(
                status_code=401,
                detail=f"a valid bearer token is required (Authorization: Bearer <token>; the tokens are in {where})",
                headers={"WWW-Authenticate": 'Bearer realm="lineage"'},
            )
        if scope not in token.scopes:
            raise HTTPException(status_code=403, detail=f"token {token.name!r} has no {scope} scope")
        request.state.token_name = token.name

    return check


def _client_name(request: Request) -> str:
    """Who posted, as a dead letter names it: the token's name, else the address."""
    name = getattr(request.state, "token_name", None)
    return f"token {name}" if name else f"address {(request.client.host if request.client else '?')}"


def host_of(header: str) -> str:
    """The name of a ``Host`` header, lower case, without its port (``[::1]:5000`` is ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    name, _, port = header.rpartition(":")
    return name if name and port.isdigit() else header


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def served_names(host: str, extra: Iterable[str] = ()) -> set[str]:
    """The names a ``Host`` header may carry: loopback's, the address listened on, the machine's names when
    listening on every interface, and ``extra``."""
    names = {*LOOPBACK_NAMES, host.strip("[]").lower(), *(name.lower() for name in extra)}
    if host in ("0.0.0.0", "::", ""):
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return names


class _HostAndAdmission:
    """ASGI middleware: the ``Host`` header checked against the served names (when given), and every request but
    health through the fair queue (``admission.FairAdmission``): a client (its token, else its address) has
    ``LINEAGE_MAX_CLIENT_REQUESTS`` worked on at once and the others wait their turn; 503 after
    ``LINEAGE_INTAKE_WAIT_SECONDS`` of waiting, 429 past ``LINEAGE_INTAKE_CAPACITY`` held, each with ``Retry-After``."""

    def __init__(self, app: ASGIApp, hosts: set[str] | None, limit: int):
        self.app, self.hosts = app, hosts
        self.admission = FairAdmission(
            limit, settings.LINEAGE_INTAKE_CAPACITY.integer(), settings.LINEAGE_INTAKE_WAIT_SECONDS.number()
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        if self.hosts is not None:
            name = host_of(headers.get("host", ""))
            if name not in self.hosts:
                shown = headers.get("host", "")[:100]
                answer = _json_error(
                    400,
                    f"Host {shown!r} is not a name this server answers to ({', '.join(sorted(self.hosts))}); "
                    "`lineage serve --allow-host NAME` adds one",
                )
                await answer(scope, receive, send)
                return
        if scope["path"] == HEALTH_PATH:
            scope.setdefault("state", {})["admission"] = self.admission
            await self.app(scope, receive, send)
            return
        authorization = headers.get("authorization", "")
        client = (
            "token:" + hashlib.sha256(authorization.encode()).hexdigest()
            if authorization
            else "address:" + str((scope.get("client") or ("?",))[0])
        )
        refused = await self.admission.enter(client)
        if refused is not None:
            await self._refuse(refused)(scope, receive, send)
            return
        started = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            self.admission.leave(client, time.monotonic() - started)

    def _refuse(self, why: str) -> JSONResponse:
        retry = {"Retry-After": str(self.admission.retry_after())}
        if why == "waited":
            text = f"waited {self.admission.wait_seconds:g} s for a turn (LINEAGE_INTAKE_WAIT_SECONDS); retry"
            return _json_error(503, text, headers=retry)
        if why == "share":
            text = f"this client holds {self.admission.client_share} requests, half of LINEAGE_INTAKE_CAPACITY; retry"
        else:
            text = f"{self.admission.capacity} requests held (LINEAGE_INTAKE_CAPACITY); retry"
        return _json_error(429, text, headers=retry)


def create_app(
    store_url: str | None = None,
    store: LineageStore | None = None,
    *,
    tokens: list[token_file.Token] | None = None,
    tokens_where: str = "var/secrets/lineage-tokens.json",
    hosts: set[str] | None = None,
    docs: bool = False,
    offload: bool = False,
) -> FastAPI:
    """The app. ``tokens``: require them (None: no token checked, as when the routes are mounted behind Airflow's
    login); ``hosts``: the names the ``Host`` header may carry (None: any); ``docs``: serve ``/docs`` and
    ``/openapi.json``; ``offload``: bodies larger than ``OFFLOAD_BYTES`` are decoded, checked and stored in a worker
    process."""
    store = store or LineageStore(store_url)
    queries = LineageQueries(store)
    app = FastAPI(
        title="Lineage store",
        description=__doc__,
        docs_url="/docs" if docs else None,
        redoc_url=None,
        openapi_url="/openapi.json" if docs else None,
    )
    app.state.store = store
    read = [Depends(_requires("read", tokens, tokens_where))]
    write = [Depends(_requires("write", tokens, tokens_where))]

    worker = posts.WorkerQueue(store.url)  # large bodies' worker process, and the posts waiting for it

    async def post(request: Request, batch_endpoint: bool) -> JSONResponse:
        require_json(request)  # a cross-site text/plain post is not kept, not even as a dead letter
        endpoint, client = request.url.path, _client_name(request)
        try:
            body = await read_limited(request)
        except HTTPException as error:
            declared = request.headers.get("content-length", "")
            length = int(declared) if declared.isdigit() else settings.LINEAGE_MAX_BODY_BYTES.integer() + 1
            await run_in_threadpool(
                dead_letters.keep, store, b"", str(error.detail), error.status_code, endpoint, client, length, False
            )
            raise
        gzipped = request.headers.get("content-encoding", "").strip().lower() == "gzip"
        if offload and len(body) > posts.OFFLOAD_BYTES:
            status, content = await worker.store(posts.Body(body, gzipped, batch_endpoint, endpoint, client))
            return JSONResponse(status_code=status, content=content)
        try:
            data = await decode_json(request, body) if body.strip() else None
        except HTTPException as error:
            await run_in_threadpool(posts.keep_refused_body, store, body, error, endpoint, client)
            raise
        status, content = await run_in_threadpool(posts.answer_events, store, data, batch_endpoint, endpoint, client)
        return JSONResponse(status_code=status, content=content)

    @app.post("/api/v1/lineage", status_code=201, dependencies=write)
    async def post_lineage(request: Request):
        """One event (or a JSON array of them, as before the batch endpoint existed)."""
        return await post(request, batch_endpoint=False)

    @app.post("/api/v1/lineage/batch", status_code=201, dependencies=write)
    async def post_lineage_batch(request: Request):
        """A JSON array of events (OpenLineage's batch endpoint): all of them are checked first; one bad event and
        none is stored, and the answer lists every bad one by its index."""
        return await post(request, batch_endpoint=True)

    @app.on_event("shutdown")
    def stop_worker() -> None:
        worker.close()

    @app.get("/api/v1/lineage", dependencies=read)
    def get_lineage(
        node_id: str = Query(..., alias="nodeId"),
        depth: int = Query(DEFAULT_DEPTH, ge=0, le=1000),
        as_of: str | None = Query(None, alias="asOf", description="ISO-8601 time with its UTC offset"),
        history: str | None = Query(None, description="all: every edge ever seen, with when"),
    ):
        return JSONAnswer(queries.marquez_lineage(_bounded("nodeId", node_id), depth, as_of=as_of, history=history))

    @app.get("/api/v1/runlineage/upstream", dependencies=read)
    def get_run_lineage_upstream(
        run_id: str = Query(..., alias="runId"), depth: int = Query(DEFAULT_DEPTH, ge=0, le=1000)
    ):
        return JSONAnswer(run_lineage_json(queries.run_lineage(_bounded("runId", run_id), depth)))

    @app.get("/api/v1/column-lineage", dependencies=read)
    def get_column_lineage(node_id: str = Query(..., alias="nodeId"), depth: int = Query(DEFAULT_DEPTH, ge=0, le=1000)):
        ref = _bounded("nodeId", node_id)
        if ref.startswith("datasetField:"):
            namespace_name, _, column = ref.removeprefix("datasetField:").rpartition(":")
            ref = f"{namespace_name}.{column}"
        return JSONAnswer(queries.column_graph(queries.columns(ref, depth)))

    @app.get(HEALTH_PATH)
    async def health(request: Request):
        # On the event loop, not in the worker threads: a long ingest or many posts waiting for the writer do not
        # hold it back (one indexed count; SQLite in WAL mode never makes a reader wait for the writer).
        # rejectedLines: event-file lines the store could not keep (include/lineage/store/follower.py), for a monitor
        # deadLetters: posts refused and kept, not replayed yet (include/lineage/store/dead_letters.py)
        answer = {
            "status": "ok",
            "events": store.count(events_table),
            "rejectedLines": store.count(rejected_lines_table),
            "deadLetters": dead_letters.waiting(store),
        }
        admission = request.scope.get("state", {}).get("admission")
        if admission is not None:  # the queue in front of the routes, when lineage serve runs one
            answer["intake"] = {
                "working": admission.total_working,
                "waiting": admission.total_held - admission.total_working,
                "refused": dict(admission.refused),
            }
        return answer

    install_error_handlers(app)
    if tokens is not None or hosts is not None:
        app.add_middleware(_HostAndAdmission, hosts=hosts, limit=settings.LINEAGE_MAX_CLIENT_REQUESTS.integer())
    return app


def server_app(
    store_url: str | None,
    host: str,
    tokens_path: Path | None = None,
    allow_hosts: Iterable[str] = (),
    docs: bool = False,
    no_auth: bool = False,
) -> FastAPI:
    """The app ``lineage serve`` runs, or ConfigurationError when it must not start: a non-loopback address without
    tokens (``--no-auth``, or an unusable tokens file). On loopback, a missing default tokens file is made (as
    set-up does)."""
    loopback = is_loopback(host)
    if no_auth:
        if not loopback:
            raise ConfigurationError(
                f"lineage serve: refusing to listen on {host} without tokens (--no-auth is for loopback only)"
            )
        tokens = None
    else:
        path = tokens_path or token_file.tokens_file()
        if tokens_path is None and not path.exists() and loopback:
            token_file.ensure_tokens(path)
        tokens = token_file.load_tokens(path)
    return create_app(
        store_url,
        tokens=tokens,
        tokens_where=str(tokens_path or token_file.tokens_file()),
        hosts=served_names(host, allow_hosts),
        docs=docs,
        offload=True,
    )


def serve(
    store_url: str | None,
    host: str,
    port: int,
    tokens_path: Path | None = None,
    allow_hosts: Iterable[str] = (),
    docs: bool = False,
    no_auth: bool = False,
) -> None:
    import uvicorn

    app = server_app(store_url, host, tokens_path, allow_hosts, docs, no_auth)
    shown = f"[{host}]" if ":" in host else host
    auth = "no token required (--no-auth)" if no_auth else f"bearer tokens of {tokens_path or token_file.tokens_file()}"
    print(f"lineage serve: http://{shown}:{port}/api/v1/lineage (store {app.state.store.url}; {auth})", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
