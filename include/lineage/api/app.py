"""The lineage page and the store's HTTP API as one FastAPI app, independent of Airflow.

    GET  /                          the page (graph, detail pane, impact, column view, run comparison)
    GET  /assets/<file>             its script, stylesheet and the vendored graph libraries
    GET  /ui/graph[?asOf=] | /ui/node?id= | /ui/impact?id= | /ui/columns?id=DATASET.COLUMN | /ui/diff?a=&b=
    GET  /ui/provenance?run=        a run's provenance (run -> dataset version read -> run that wrote it -> ...)
    GET  /api/v1/lineage?nodeId=, /api/v1/column-lineage, /api/v1/health, POST /api/v1/lineage   (the store's API)

Before answering, the store takes in what was appended to the event files under ``var/lineage/`` (Airflow's file
transport, the Spark listener). Access control is the caller's: ``plugins/lineage_ui_plugin.py`` mounts this app in
Airflow's api-server behind Airflow's own login.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.routing import APIRoute
from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool

from include.core import settings
from include.lineage.api import data, page, server
from include.lineage.api.answers import JSONAnswer
from include.lineage.api.errors import install_error_handlers, store_unavailable_response
from include.lineage.queries import LineageQueries
from include.lineage.store import LineageStore, default_store_url
from include.lineage.store.follower import StoreFollower

PageGuard = Callable[[Request], Awaitable[Response | None]]


class _Follower(StoreFollower):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()

    def refresh(self) -> int:
        with self._lock:
            return super().refresh()


def create_ui_app(
    store: LineageStore | None = None,
    paths: settings.Paths | None = None,
    read_dependency: Callable | None = None,
    write_dependency: Callable | None = None,
    page_guard: PageGuard | None = None,
) -> FastAPI:
    """``read_dependency``/``write_dependency`` guard every route (FastAPI dependencies); ``page_guard`` may answer
    the page request itself (e.g. a redirect to a login page) instead of the page."""
    paths = paths or settings.Paths.current()
    store = store or LineageStore(default_store_url(paths))
    follower = _Follower(store, paths)
    queries = LineageQueries(store)
    read = [Depends(read_dependency)] if read_dependency else []
    write = [Depends(write_dependency)] if write_dependency else []
    app = FastAPI(title="Lineage", description=__doc__, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.store = store

    for route in server.create_app(store=store).routes:
        if isinstance(route, APIRoute):
            app.router.add_api_route(
                route.path,
                route.endpoint,
                methods=sorted(route.methods),
                status_code=route.status_code,
                dependencies=write if "POST" in route.methods else read,
            )

    install_error_handlers(app)

    @app.middleware("http")
    async def follow_event_files(request: Request, call_next):
        if (
            request.url.path.rstrip("/").endswith(
                ("/ui/graph", "/ui/provenance", "/api/v1/lineage", "/api/v1/runlineage/upstream", "/api/v1/health")
            )
            and request.method == "GET"
        ):
            try:
                await run_in_threadpool(follower.refresh)
            except OperationalError:
                # Raised here, in a middleware, it would pass the app's exception handlers and be a 500
                return store_unavailable_response()
        return await call_next(request)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def lineage_page(request: Request):
        if page_guard is not None and (answer := await page_guard(request)) is not None:
            return answer
        root = request.scope.get("root_path", "").rstrip("/")
        return HTMLResponse(page.render_served(f"{root}/ui/", f"{root}/assets/"), headers={"Cache-Control": "no-store"})

    @app.get("/assets/{name}", dependencies=read, include_in_schema=False)
    def asset(name: str):
        path = page.asset_path(name)
        if path is None:
            raise HTTPException(status_code=404, detail=f"no asset {name!r}")
        return FileResponse(path, headers={"Cache-Control": "no-cache"})

    @app.get("/ui/graph", dependencies=read)
    def ui_graph(as_of: str | None = Query(None, alias="asOf")):
        return JSONAnswer(data.graph(queries, as_of))

    @app.get("/ui/provenance", dependencies=read)
    def ui_provenance(run_id: str = Query(..., alias="run")):
        return JSONAnswer(data.provenance(queries, run_id))

    @app.get("/ui/node", dependencies=read)
    def ui_node(node_id: str = Query(..., alias="id")):
        return JSONAnswer(data.node_detail(queries, node_id))

    @app.get("/ui/impact", dependencies=read)
    def ui_impact(node_id: str = Query(..., alias="id")):
        return JSONAnswer(data.impact(queries, node_id))

    @app.get("/ui/columns", dependencies=read)
    def ui_columns(column: str = Query(..., alias="id")):
        return JSONAnswer(data.columns(queries, column))

    @app.get("/ui/diff", dependencies=read)
    def ui_diff(run_a: str = Query(..., alias="a"), run_b: str = Query(..., alias="b")):
        return JSONAnswer(data.diff(queries, run_a, run_b))

    return app
