"""The lineage store over HTTP, speaking what OpenLineage clients and Marquez tools speak.

    POST /api/v1/lineage                      one OpenLineage event (what the ``http`` transport sends); 201
    GET  /api/v1/lineage?nodeId=&depth=       Marquez's lineage graph around a node (both directions)
    GET  /api/v1/column-lineage?nodeId=&depth=  column-level upstream of ``datasetField:<ns>:<name>:<field>`` or
                                              ``DATASET.COLUMN``
    GET  /api/v1/health                       liveness and event count

``create_app(store_url)`` is independent of Airflow, so the same app can be mounted inside Airflow's api-server.
"""

from __future__ import annotations

import gzip
import json

from fastapi import FastAPI, HTTPException, Query, Request
from starlette.concurrency import run_in_threadpool

from include.lineage.api.errors import install_error_handlers
from include.lineage.errors import InvalidEventError
from include.lineage.events import check_event
from include.lineage.queries import DEFAULT_DEPTH, LineageQueries
from include.lineage.store import LineageStore
from include.lineage.store.schema import events_table


def create_app(store_url: str | None = None, store: LineageStore | None = None) -> FastAPI:
    store = store or LineageStore(store_url)
    queries = LineageQueries(store)
    app = FastAPI(title="Lineage store", description=__doc__)
    app.state.store = store

    @app.post("/api/v1/lineage", status_code=201)
    async def post_lineage(request: Request):
        body = await request.body()
        if request.headers.get("content-encoding", "").lower() == "gzip":
            body = gzip.decompress(body)
        try:
            lineage_event = json.loads(body)
        except ValueError as error:
            raise HTTPException(status_code=400, detail=f"the body is not JSON: {error}") from None
        batch = lineage_event if isinstance(lineage_event, list) else [lineage_event]
        try:
            for item in batch:
                check_event(item)
        except InvalidEventError as error:
            raise HTTPException(status_code=400, detail=f"not an OpenLineage event: {error}") from None
        result = await run_in_threadpool(store.ingest, batch)  # the store serialises writers
        return {"received": result.read, "new": result.new}

    @app.get("/api/v1/lineage")
    def get_lineage(node_id: str = Query(..., alias="nodeId"), depth: int = Query(DEFAULT_DEPTH, ge=0, le=1000)):
        return queries.marquez_graph(queries.neighbourhood(node_id, depth))

    @app.get("/api/v1/column-lineage")
    def get_column_lineage(node_id: str = Query(..., alias="nodeId"), depth: int = Query(DEFAULT_DEPTH, ge=0, le=1000)):
        ref = node_id
        if ref.startswith("datasetField:"):
            namespace_name, _, column = ref.removeprefix("datasetField:").rpartition(":")
            ref = f"{namespace_name}.{column}"
        return queries.column_graph(queries.columns(ref, depth))

    @app.get("/api/v1/health")
    def health():
        return {"status": "ok", "events": store.count(events_table)}

    install_error_handlers(app)
    return app


def serve(store_url: str | None, host: str, port: int) -> None:
    import uvicorn

    app = create_app(store_url)
    print(f"lineage serve: http://{host}:{port}/api/v1/lineage (store {app.state.store.url})", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
