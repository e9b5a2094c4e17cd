"""The lineage page's server side without Airflow: the store follows appended event files, every route obeys the
access dependency it is given, and the page's data answers from a real SQLite store."""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient

from include.core import settings
from include.lineage.api import data
from include.lineage.api.app import create_ui_app
from include.lineage.api.page import render_served, render_standalone
from include.lineage.queries import LineageQueries
from include.lineage.store import LineageStore
from include.lineage.store.follower import StoreFollower

NS = "nyc_taxi_pipeline"


def _event(
    job: str, inputs: list[str], outputs: list[str], event_type: str = "COMPLETE", run_id: str | None = None
) -> dict:
    def dataset(name):
        return {
            "namespace": "file",
            "name": f"/warehouse/nyc_taxi/{name}",
            "facets": {
                "symlinks": {"identifiers": [{"namespace": "file", "name": f"nyc_taxi.{name}", "type": "TABLE"}]},
                "version": {"datasetVersion": "101"},
            },
        }

    return {
        "eventType": event_type,
        "eventTime": "2025-02-01T00:00:00Z",
        "producer": "test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id or str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": NS, "name": job, "facets": {}},
        "inputs": [dataset(n) for n in inputs],
        "outputs": [dataset(n) for n in outputs],
    }


@pytest.fixture()
def lineage_paths(tmp_path) -> settings.Paths:
    paths = settings.Paths(tmp_path / "var")
    paths.lineage.mkdir(parents=True)
    return paths


def test_the_store_follows_appended_events_and_waits_for_a_line_being_written(lineage_paths):
    store = LineageStore(f"sqlite:///{lineage_paths.lineage / 'store.db'}")
    follower = StoreFollower(store, lineage_paths)
    first = json.dumps(_event("dag.merge_raw", ["staging"], ["raw"]))
    second = json.dumps(_event("dag.actuals", ["raw"], ["actuals"]))
    lineage_paths.lineage_events.write_text(first + "\n" + second[:40])  # the second line is still being written
    assert follower.refresh() == 1
    with lineage_paths.lineage_events.open("a") as stream:
        stream.write(second[40:] + "\n")
    assert follower.refresh() == 1
    assert follower.refresh() == 0
    impacted = {
        item["id"].rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        for item in data.impact(LineageQueries(store), "nyc_taxi.staging")["downstream"]
    }
    assert impacted == {"raw", "actuals", "dag.merge_raw", "dag.actuals"}


def _deny():
    raise HTTPException(status_code=401, detail="Not authenticated")


def test_every_route_obeys_the_access_dependencies(lineage_paths):
    store = LineageStore(f"sqlite:///{lineage_paths.lineage / 'store.db'}")
    store.ingest([_event("dag.merge_raw", ["staging"], ["raw"])])
    app = create_ui_app(store=store, paths=lineage_paths, read_dependency=_deny, write_dependency=_deny)
    client = TestClient(app)
    for path in (
        "/ui/graph",
        "/ui/node?id=nyc_taxi.raw",
        "/ui/impact?id=nyc_taxi.raw",
        "/ui/diff?a=x&b=y",
        "/ui/columns?id=nyc_taxi.raw.c",
        "/api/v1/lineage?nodeId=nyc_taxi.raw",
        "/api/v1/health",
        "/assets/lineage.js",
    ):
        assert client.get(path).status_code == 401, path
    assert client.post("/api/v1/lineage", json=_event("x", [], [])).status_code == 401
    routes = {route.path for route in app.routes}
    assert {"/api/v1/lineage", "/api/v1/column-lineage", "/api/v1/health", "/ui/graph", "/"} <= routes


def test_page_data_and_errors_without_a_guard(lineage_paths):
    store = LineageStore(f"sqlite:///{lineage_paths.lineage / 'store.db'}")
    run = str(uuid.uuid4())
    store.ingest(
        [
            _event("dag.merge_raw", ["staging"], ["raw"], "START", run),
            _event("dag.merge_raw", ["staging"], ["raw"], run_id=run),
        ]
    )
    client = TestClient(create_ui_app(store=store, paths=lineage_paths))
    graph = client.get("/ui/graph").json()
    assert {n["label"] for n in graph["nodes"]} == {"nyc_taxi.staging", "nyc_taxi.raw", "dag.merge_raw"}
    detail = client.get("/ui/node", params={"id": "nyc_taxi.raw"}).json()
    assert detail["currentVersion"] == "101" and [r["state"] for r in detail["runs"]] == ["COMPLETED"]
    unknown = client.get("/ui/node", params={"id": "nyc_taxi.nope"})
    assert unknown.status_code == 404 and "nyc_taxi.nope" in unknown.json()["detail"]
    assert client.get("/assets/../app.py").status_code == 404
    page = client.get("/").text
    assert 'src="/assets/cytoscape.min.js"' in page and 'window.LINEAGE_API = "/ui/"' in page


def test_the_standalone_page_inlines_everything_and_cannot_be_closed_by_its_data():
    html = render_standalone({"graph": {"nodes": [{"label": "</script><script>alert(1)</script>"}], "edges": []}})
    assert "<script src=" not in html and "cytoscape" in html
    assert "</script><script>alert(1)" not in html
    assert render_served("/lineage/ui/", "/lineage/assets/").count("<script src=") == 3
