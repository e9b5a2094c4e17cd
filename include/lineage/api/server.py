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
    GET  /api/v1/health                       liveness and event count

Unknown nodes and runs answer 404, bad parameters 400 (``include/lineage/api/errors.py``); bodies are read within
the limits of ``include/lineage/api/body.py`` (413 when too large, 400 when not gzip or JSON or nested too deep).

``create_app(store_url)`` is independent of Airflow, so the same app can be mounted inside Airflow's api-server.
"""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from include.core import settings
from include.lineage.api.body import json_body
from include.lineage.api.errors import install_error_handlers
from include.lineage.errors import InvalidEventError
from include.lineage.events import check_event
from include.lineage.queries import DEFAULT_DEPTH, LineageQueries
from include.lineage.render import run_lineage_json
from include.lineage.store import LineageStore
from include.lineage.store.schema import events_table


def create_app(store_url: str | None = None, store: LineageStore | None = None) -> FastAPI:
    store = store or LineageStore(store_url)
    queries = LineageQueries(store)
    app = FastAPI(title="Lineage store", description=__doc__)
    app.state.store = store

    @app.post("/api/v1/lineage", status_code=201)
    async def post_lineage(request: Request):
        lineage_event = await json_body(request)
        batch = lineage_event if isinstance(lineage_event, list) else [lineage_event]
        try:
            for item in batch:
                check_event(item)
        except InvalidEventError as error:
            raise HTTPException(status_code=400, detail=f"not an OpenLineage event: {error}") from None
        result = await run_in_threadpool(store.ingest, batch)  # the store serialises writers
        return {"received": result.read, "new": result.new}

    @app.post("/api/v1/lineage/batch", status_code=201)
    async def post_lineage_batch(request: Request):
        """A JSON array of events (OpenLineage's batch endpoint): all of them are checked first; one bad event and
        none is stored, and the answer lists every bad one by its index."""
        events = await json_body(request)
        if not isinstance(events, list):
            raise HTTPException(status_code=400, detail="a batch is a JSON array of OpenLineage events")
        limit = settings.LINEAGE_MAX_BATCH_EVENTS.integer()
        if len(events) > limit:
            raise HTTPException(
                status_code=413, detail=f"the batch holds {len(events):,} events; the limit is {limit:,}"
            )
        errors = []
        for index, item in enumerate(events):
            try:
                check_event(item)
            except InvalidEventError as error:
                errors.append({"index": index, "message": str(error)})
        if errors:
            return JSONResponse(
                status_code=400,
                content={
                    "detail": f"{len(errors)} of {len(events)} events are not OpenLineage events; none stored",
                    "errors": errors,
                },
            )
        result = await run_in_threadpool(store.ingest, events)
        return {"received": result.read, "new": result.new}

    @app.get("/api/v1/lineage")
    def get_lineage(
        node_id: str = Query(..., alias="nodeId"),
        depth: int = Query(DEFAULT_DEPTH, ge=0, le=1000),
        as_of: str | None = Query(None, alias="asOf", description="ISO-8601 time with its UTC offset"),
        history: str | None = Query(None, description="all: every edge ever seen, with when"),
    ):
        return queries.marquez_lineage(node_id, depth, as_of=as_of, history=history)

    @app.get("/api/v1/runlineage/upstream")
    def get_run_lineage_upstream(
        run_id: str = Query(..., alias="runId"), depth: int = Query(DEFAULT_DEPTH, ge=0, le=1000)
    ):
        return run_lineage_json(queries.run_lineage(run_id, depth))

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
