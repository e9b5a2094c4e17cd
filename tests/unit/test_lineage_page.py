"""The lineage page's server side without Airflow: the store follows appended event files, every route obeys the
access dependency it is given, and the page's data answers from a real SQLite store."""

from __future__ import annotations

import json
import uuid

import pytest
import requests
from fastapi import HTTPException
from fastapi.testclient import TestClient

from include.core import settings
from include.lineage.api import data
from include.lineage.api.app import create_ui_app
from include.lineage.api.page import render_served, render_standalone
from include.lineage.queries import LineageQueries
from include.lineage.store import LineageStore
from include.lineage.store.follower import StoreFollower
from tests.support import tap_node

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


def test_a_bad_line_in_an_event_file_leaves_the_served_page_and_graph_answering(lineage_paths):
    """Over HTTP on loopback, as the browser asks: before, the follower raised on the bad line at every request that
    catches the store up, and the health check, the graph and the lineage API all answered 500 from then on."""
    from tests.support import app_served

    good = json.dumps(_event("dag.merge_raw", ["staging"], ["raw"]))
    later = json.dumps(_event("dag.actuals", ["raw"], ["actuals"]))
    lineage_paths.lineage_events.write_bytes(f"{good}\n".encode() + b'{"eventType": "COMP\n' + f"{later}\n".encode())
    store = LineageStore(f"sqlite:///{lineage_paths.lineage / 'store.db'}")
    with app_served(create_ui_app(store, lineage_paths)) as url:
        health = requests.get(f"{url}/api/v1/health", timeout=30)
        assert health.status_code == 200, health.text
        assert health.json() == {"status": "ok", "events": 2, "rejectedLines": 1, "deadLetters": 0}
        graph = requests.get(
            f"{url}/api/v1/lineage", params={"nodeId": "job:nyc_taxi_pipeline:dag.actuals"}, timeout=30
        )
        assert graph.status_code == 200, graph.text
        assert "dataset:file:/warehouse/nyc_taxi/staging" in {node["id"] for node in graph.json()["graph"]}
        assert requests.get(f"{url}/ui/graph", timeout=30).status_code == 200
    store.close()


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


def _one_run_store(lineage_paths) -> tuple[LineageStore, str]:
    """A store holding one run of dag.merge_raw (staging -> raw): its START and COMPLETE."""
    store = LineageStore(f"sqlite:///{lineage_paths.lineage / 'store.db'}")
    run = str(uuid.uuid4())
    store.ingest(
        [
            _event("dag.merge_raw", ["staging"], ["raw"], "START", run),
            _event("dag.merge_raw", ["staging"], ["raw"], run_id=run),
        ]
    )
    return store, run


def test_page_data_and_errors_without_a_guard(lineage_paths):
    store, run = _one_run_store(lineage_paths)
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


# ------------------------------------------------------------------ as of a time or a run, and run provenance
H = "2025-03-01T{:02d}:{:02d}:00+00:00".format
DAG_FACETS = {"jobType": {"jobType": "DAG", "integration": "AIRFLOW", "processingType": "BATCH"}}


def _versioned(name: str, version: str | None) -> dict:
    facets = {"symlinks": {"identifiers": [{"namespace": "file", "name": f"nyc_taxi.{name}", "type": "TABLE"}]}}
    if version:
        facets["version"] = {"datasetVersion": version}
    return {"namespace": "file", "name": f"/warehouse/nyc_taxi/{name}", "facets": facets}


def _run_events(job, hour, inputs=(), outputs=(), parent=None, job_facets=None, minutes=30) -> tuple[str, list]:
    run_id = str(uuid.uuid4())
    run_facets = (
        {"parent": {"run": {"runId": parent[0]}, "job": {"namespace": NS, "name": parent[1]}}} if parent else {}
    )
    return run_id, [
        {
            "eventType": event_type,
            "eventTime": at,
            "producer": "test",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id, "facets": run_facets},
            "job": {"namespace": NS, "name": job, "facets": job_facets or {}},
            "inputs": [_versioned(*i) for i in inputs] if event_type == "COMPLETE" else [],
            "outputs": [_versioned(*o) for o in outputs] if event_type == "COMPLETE" else [],
        }
        for event_type, at in (("START", H(hour, 0)), ("COMPLETE", H(hour, minutes)))
    ]


def _history() -> tuple[list[dict], dict[str, str]]:
    """Two DAG runs of `pipeline`: the first (01:00-03:40) ingests raw r1, merges it (m1) and forecasts (f1); the second
    (05:00-07:40) ingests r2, loads a new `zones` table that merge now reads too (a new job version) and forecasts."""
    ids, events = {}, []
    for tag, start, raw, merged, forecast, zones in (
        ("1", 1, "r1", "m1", "f1", False),
        ("2", 5, "r2", "m2", "f2", True),
    ):
        dag_id, dag_events = _run_events("pipeline", start, job_facets=DAG_FACETS, minutes=0)
        dag_events[1]["eventTime"] = H(start + 2, 40)
        ids[f"dag{tag}"] = dag_id
        events += dag_events
        parent = (dag_id, "pipeline")
        steps = [("ingest", start, [], [("raw", raw)])]
        if zones:
            steps.append(("zones_loader", start, [], [("zones", None)]))
        steps.append(("merge", start + 1, [("raw", raw)] + ([("zones", None)] if zones else []), [("merged", merged)]))
        steps.append(("forecast", start + 2, [("merged", merged)], [("forecast", forecast)]))
        for job, hour, inputs, outputs in steps:
            run_id, run_events = _run_events(f"pipeline.{job}", hour, inputs, outputs, parent)
            ids[f"{job}{tag}"] = run_id
            events += run_events
    return events, ids


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The page's app with a store of the two DAG runs, served by uvicorn on loopback."""

    from tests.support import app_served

    paths = settings.Paths(tmp_path_factory.mktemp("served") / "var")
    paths.lineage.mkdir(parents=True)
    store = LineageStore(f"sqlite:///{paths.lineage / 'store.db'}")
    events, ids = _history()
    store.ingest(events)
    with app_served(create_ui_app(store=store, paths=paths)) as url:
        yield {"url": url, "queries": LineageQueries(store), "ids": ids, "paths": paths}
    store.close()


def _drawn(page) -> tuple[set[str], set[tuple[str, str]], dict[str, str | None]]:
    nodes = set(page.evaluate("window.lineageGraph.nodes().map(n => n.id())"))
    edges = {
        tuple(e) for e in page.evaluate("window.lineageGraph.edges().map(e => [e.source().id(), e.target().id()])")
    }
    states = dict(
        page.evaluate(
            "window.lineageGraph.nodes().map(n => [n.id(), (n.hasClass('job') ? n.data('state') : n.data('version'))"
            " || null])"
        )
    )
    return nodes, edges, states


def _expected(queries: LineageQueries, as_of: str | None):
    graph = data.graph(queries, as_of)
    return (
        {n["id"] for n in graph["nodes"]},
        {(e["source"], e["target"]) for e in graph["edges"]},
        {n["id"]: n.get("state") if n["kind"] == "job" else n.get("version") for n in graph["nodes"]},
    )


def _set_as_of(page, local: str, instant: str) -> None:
    page.fill("#as-of", local)
    page.wait_for_function("want => document.body.dataset.asOf === want", arg=instant, timeout=20_000)
    page.wait_for_function("document.body.dataset.ready === 'true'")


def _job(name: str) -> str:
    return f"job:{NS}:pipeline.{name}"


def _dataset(name: str) -> str:
    return f"dataset:file:/warehouse/nyc_taxi/{name}"


# (as-of picked in the page, the store's instant, what must hold of that graph)
AS_OF_CASES = [
    ("2025-03-01T04:00:00", "2025-03-01T04:00:00.000000Z", "first"),  # after the first DAG run: no zones yet
    ("2025-03-01T06:10:00", "2025-03-01T06:10:00.000000Z", "merging"),  # the second merge running, reading zones
    ("2025-03-01T00:30:00", "2025-03-01T00:30:00.000000Z", "empty"),  # before anything was seen
]


def _check_case(kind: str, nodes: set, edges: set, states: dict) -> None:
    zones_edge = (_dataset("zones"), _job("merge"))
    if kind == "first":
        assert _dataset("zones") not in nodes and _job("zones_loader") not in nodes and zones_edge not in edges
        assert (_dataset("raw"), _job("merge")) in edges and states[_job("forecast")] == "COMPLETED"
    elif kind == "merging":
        assert zones_edge in edges and states[_job("merge")] == "RUNNING" and states[_job("forecast")] == "COMPLETED"
        assert (states[_dataset("raw")], states[_dataset("merged")]) == ("r2", "m1")  # the versions of then
    else:
        assert not nodes and not edges


def test_the_served_page_redraws_the_graph_as_of_a_time_or_a_run_and_shows_a_runs_provenance(served, browser):
    queries, ids = served["queries"], served["ids"]
    page = browser.new_page(viewport={"width": 1500, "height": 900})
    page.goto(served["url"] + "/")
    page.wait_for_function("document.body.dataset.ready", timeout=30_000)
    assert page.evaluate("document.body.dataset.ready") == "true", page.inner_text("#error")
    now = _drawn(page)
    assert now == _expected(queries, None) and (_dataset("zones"), _job("merge")) in now[1]
    for local, instant, kind in AS_OF_CASES:
        _set_as_of(page, local, instant)
        drawn = _drawn(page)
        assert drawn == _expected(queries, instant), (local, kind)
        _check_case(kind, *drawn)
    # the page's graph is the asOf graph of GET /api/v1/lineage: merge's inputs then, as Marquez's shape says
    marquez = requests.get(
        served["url"] + "/api/v1/lineage", params={"nodeId": _job("merge"), "asOf": "2025-03-01T04:00:00Z"}, timeout=10
    ).json()
    merge_inputs = {e["origin"] for n in marquez["graph"] if n["id"] == _job("merge") for e in n["inEdges"]}
    _set_as_of(page, "2025-03-01T04:00:00", "2025-03-01T04:00:00.000000Z")
    assert merge_inputs == {s for s, t in _drawn(page)[1] if t == _job("merge")} == {_dataset("raw")}

    # as of a run: the graph as the first DAG run left it; then its provenance, through its task runs
    page.select_option("#as-of-run", ids["dag1"])
    page.wait_for_function("document.body.dataset.asOf === '2025-03-01T03:40:00.000000Z'", timeout=20_000)
    page.wait_for_function("document.body.dataset.ready === 'true'")
    assert _drawn(page) == _expected(queries, "2025-03-01T03:40:00.000000Z")
    assert "pipeline run" in page.inner_text("#as-of-label")
    page.click("#run-provenance")
    page.wait_for_function("want => document.body.dataset.provenance === want", arg=ids["dag1"])
    assert "It read no datasets itself" in page.inner_text("#provenance-body")
    page.click(f"button.child-provenance[data-run='{ids['forecast1']}']")
    page.wait_for_function("want => document.body.dataset.provenance === want", arg=ids["forecast1"])
    _check_provenance(page, served, ids["forecast1"])

    # back to now; a job's run opens its provenance from the detail pane
    page.click("#close-provenance")
    page.click("#as-of-now")
    page.wait_for_function("document.body.dataset.asOf === ''")
    assert _drawn(page) == now
    tap_node(page, _job("forecast"))
    page.wait_for_selector(f"button.provenance-button[data-run='{ids['forecast2']}']")
    page.click(f"button.provenance-button[data-run='{ids['forecast2']}']")
    page.wait_for_function("want => document.body.dataset.provenance === want", arg=ids["forecast2"])
    reads = _check_provenance(page, served, ids["forecast2"])
    assert ("/warehouse/nyc_taxi/zones", "", ids["zones_loader2"]) in reads  # unversioned: the latest write before
    text = page.inner_text("#provenance-body")
    assert "snapshot m2" in text and "snapshot r2" in text and "latest write before the run" in text
    page.close()


def _check_provenance(page, served, run_id: str) -> set[tuple[str, str, str]]:
    """What the view shows read (dataset, version, writer) is Marquez's GET /api/v1/runlineage/upstream answer."""
    shown = {
        tuple(item)
        for item in page.evaluate(
            "[...document.querySelectorAll('#provenance-body li.prov-read')]"
            ".map(li => [li.dataset.dataset, li.dataset.version, li.dataset.writer])"
        )
    }
    answer = requests.get(served["url"] + "/api/v1/runlineage/upstream", params={"runId": run_id}, timeout=10).json()
    expected = {
        (item["name"], item["version"] or "", item["producedByRunId"] or "")
        for entry in answer["runs"]
        for item in entry["inputs"]
    }
    assert shown == expected and shown, (shown, expected)
    return shown


def test_the_exported_page_answers_as_of_and_provenance_offline_as_the_served_one(served, browser, tmp_path):
    from include.lineage.api.report import render_report

    queries, ids = served["queries"], served["ids"]
    path = tmp_path / "lineage.html"
    path.write_text(render_report(queries))
    context = browser.new_context(offline=True, viewport={"width": 1500, "height": 900})
    page = context.new_page()
    page.goto(path.as_uri())
    page.wait_for_function("document.body.dataset.ready", timeout=30_000)
    assert page.evaluate("document.body.dataset.ready") == "true", page.inner_text("#error")
    # between and on the instants where the graph changed, as the served page (the store) answers
    cases = AS_OF_CASES + [
        ("2025-03-01T05:30:00", "2025-03-01T05:30:00.000000Z", None),  # ingest and zones_loader done, merge not begun
        ("2025-03-01T06:00:00", "2025-03-01T06:00:00.000000Z", None),  # exactly merge2's START
        ("2025-03-01T09:00:00", "2025-03-01T09:00:00.000000Z", None),  # after everything
    ]
    for local, instant, kind in cases:
        _set_as_of(page, local, instant)
        drawn = _drawn(page)
        assert drawn == _expected(queries, instant), local
        if kind:
            _check_case(kind, *drawn)
    page.select_option("#as-of-run", ids["dag2"])
    page.wait_for_function("document.body.dataset.asOf === '2025-03-01T07:40:00.000000Z'")
    page.click("#run-provenance")
    page.click(f"button.child-provenance[data-run='{ids['merge2']}']")
    page.wait_for_function("want => document.body.dataset.provenance === want", arg=ids["merge2"])
    _check_provenance(page, served, ids["merge2"])
    context.close()


def test_read_routes_answer_without_fastapis_encoder_and_with_the_same_json(lineage_paths, monkeypatch):
    """The read routes return ``JSONAnswer`` (api/answers.py): FastAPI's ``jsonable_encoder``, which took 159 of the
    301 ms of a 1,264-node ``/api/v1/lineage`` answer, is never called for them, and the JSON is the one it would
    have made from the same answer."""
    store, run = _one_run_store(lineage_paths)
    client = TestClient(create_ui_app(store=store, paths=lineage_paths))
    routes = {
        "/ui/graph": lambda q: data.graph(q),
        "/ui/node?id=nyc_taxi.raw": lambda q: data.node_detail(q, "nyc_taxi.raw"),
        "/ui/impact?id=nyc_taxi.staging": lambda q: data.impact(q, "nyc_taxi.staging"),
        f"/ui/provenance?run={run}": lambda q: data.provenance(q, run),
        "/api/v1/lineage?nodeId=dataset:file:/warehouse/nyc_taxi/raw&depth=5": lambda q: q.marquez_lineage(
            "dataset:file:/warehouse/nyc_taxi/raw", 5
        ),
    }

    def refuse(*_args, **_kwargs):
        raise AssertionError("jsonable_encoder called for a read route")

    queries = LineageQueries(store)
    expected = {path: json.loads(json.dumps(answer(queries))) for path, answer in routes.items()}
    monkeypatch.setattr("fastapi.routing.jsonable_encoder", refuse)
    for path in routes:
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.text)
        assert answer.headers["content-type"] == "application/json", path
        assert answer.json() == expected[path], path
