"""``GET /api/v1/lineage`` answers what Marquez 0.51 answers for the same events: each test builds a real SQLite
store from OpenLineage events and pins one rule of Marquez's source (cited; MarquezProject/marquez at 0.51,
``api/src/main/java/marquez/...``), through ``create_app(store=...)`` and FastAPI's TestClient."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete

from include.lineage.api.server import create_app
from include.lineage.queries import LineageQueries, parse_node_id
from include.lineage.store import LineageStore
from include.lineage.store.schema import closure_table, edges_table

NS = "marquez-tests"
PRODUCER = "https://example.com/tests/marquez-graph"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
T = "2025-03-01T{:02d}:00:00+00:00".format


def ds(name: str, namespace: str = "warehouse", symlink: tuple[str, str] | None = None) -> dict:
    facets = {}
    if symlink:
        facets["symlinks"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
            "identifiers": [{"namespace": symlink[0], "name": symlink[1], "type": "TABLE"}],
        }
    return {"namespace": namespace, "name": name, "facets": facets}


def event(event_type: str, job: str, run_id: str, time: str, inputs=(), outputs=()) -> dict:
    return {
        "eventType": event_type,
        "eventTime": time,
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
        "run": {"runId": run_id, "facets": {}},
        "job": {"namespace": NS, "name": job, "facets": {}},
        "inputs": list(inputs),
        "outputs": list(outputs),
    }


def run(job: str, hour: int, inputs=(), outputs=(), end: str = "COMPLETE") -> list[dict]:
    """A run of ``job``: START at ``hour``, its end event half an hour later, both listing its datasets."""
    run_id = str(uuid.uuid4())
    return [
        event("START", job, run_id, T(hour), inputs, outputs),
        event(end, job, run_id, T(hour).replace(":00:00", ":30:00"), inputs, outputs),
    ]


@pytest.fixture
def store(tmp_path):
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as lineage_store:
        yield lineage_store


def lineage(store: LineageStore, node: str, depth: int = 20, **params) -> list[dict]:
    response = TestClient(create_app(store=store)).get(
        "/api/v1/lineage", params={"nodeId": node, "depth": depth, **params}
    )
    assert response.status_code == 200, response.text
    return response.json()["graph"]


def ids(graph: list[dict]) -> set[str]:
    return {node["id"] for node in graph}


def edges(graph: list[dict]) -> set[tuple[str, str]]:
    found = set()
    for node in graph:
        for edge in node["inEdges"] + node["outEdges"]:
            found.add((edge["origin"], edge["destination"]))
    return found


def job(name: str) -> str:
    return f"job:{NS}:{name}"


def dataset(name: str, namespace: str = "warehouse") -> str:
    return f"dataset:{namespace}:{name}"


def test_siblings_the_other_inputs_of_the_job_reading_a_dataset_are_in_its_graph(store):
    # LineageService.lineage: a dataset's graph is that of its start job (LineageDao.getJobFromInputOrOutput), and
    # LineageService.toLineage adds every input and output of each job reached: the start job's other inputs too.
    store.ingest(
        run("join", 1, [ds("orders"), ds("customers")], [ds("joined")])
        + run("report", 2, [ds("joined")], [ds("report")])
    )
    graph = lineage(store, dataset("orders"), depth=0)
    assert ids(graph) == {job("join"), dataset("orders"), dataset("customers"), dataset("joined")}
    assert edges(graph) == {
        (dataset("orders"), job("join")),
        (dataset("customers"), job("join")),
        (job("join"), dataset("joined")),
    }
    assert ids(lineage(store, dataset("orders"))) == ids(graph) | {job("report"), dataset("report")}


def test_a_new_version_that_drops_an_input_no_longer_connects_it(store):
    # JobVersionDao.upsertInputDatasetFor: a new version's inputs become the job's current ones and the others'
    # is_current_job_version turns FALSE; LineageDao.getLineage reads only current rows. The dropped input still finds
    # the job (getJobFromInputOrOutput reads every version), whose graph no longer has it: LineageService.lineage then
    # answers the dataset alone ("no longer share lineage with dataset").
    store.ingest(run("daily", 1, [ds("a"), ds("b")], [ds("out")]) + run("daily", 2, [ds("a")], [ds("out")]))
    graph = lineage(store, job("daily"))
    assert ids(graph) == {job("daily"), dataset("a"), dataset("out")}
    daily = next(node for node in graph if node["id"] == job("daily"))
    assert daily["data"]["inputs"] == [{"namespace": "warehouse", "name": "a"}]
    assert [(n["id"], n["inEdges"], n["outEdges"]) for n in lineage(store, dataset("b"))] == [(dataset("b"), [], [])]


def test_depth_counts_jobs_that_share_a_dataset_with_the_level_before(store):
    # LineageDao.getLineage: the recursive CTE starts at depth 0 with the start job and adds, while depth < :depth,
    # every job whose current inputs/outputs overlap (&&) those of a job of the level before; the datasets are those
    # of the jobs reached, so depth 0 is the start job with its own datasets.
    store.ingest(
        run("j1", 1, [ds("a")], [ds("b")])
        + run("j2", 2, [ds("b")], [ds("c")])
        + run("j3", 3, [ds("c")], [ds("d")])
        + run("j4", 4, [ds("d")], [ds("e")])
    )
    assert ids(lineage(store, job("j1"), 0)) == {job("j1"), dataset("a"), dataset("b")}
    assert ids(lineage(store, job("j1"), 1)) == {job("j1"), job("j2"), dataset("a"), dataset("b"), dataset("c")}
    deeper = ids(lineage(store, job("j1"), 2))
    assert job("j3") in deeper and dataset("d") in deeper and job("j4") not in deeper
    assert {job(f"j{i}") for i in range(1, 5)} <= ids(lineage(store, job("j1"), 20))
    # from the middle the walk goes both ways: j2 shares b with j1 and c with j3
    assert ids(lineage(store, job("j2"), 1)) >= {job("j1"), job("j3")}


def test_a_dataset_nobody_writes_starts_at_its_newest_reader_and_a_written_one_at_its_newest_writer(store):
    # LineageDao.getJobFromInputOrOutput: ORDER BY io_type DESC (OUTPUT before INPUT), jv.created_at DESC LIMIT 1.
    store.ingest(
        run("old_reader", 1, [ds("source")], [ds("x")])
        + run("new_reader", 2, [ds("source")], [ds("y")])
        + run("writer", 3, [], [ds("table")])
        + run("later_reader", 4, [ds("table")], [ds("z")])
    )
    assert ids(lineage(store, dataset("source"), 0)) == {job("new_reader"), dataset("source"), dataset("y")}
    assert ids(lineage(store, dataset("table"), 0)) == {job("writer"), dataset("table")}


def test_a_dataset_no_finished_run_reads_or_writes_is_a_graph_of_itself(store):
    # OpenLineageDao.updateMarquezModel: a job version (and its io mapping) is made only when a run is done
    # (updateMarquezOnComplete: COMPLETE, FAIL, ABORT), so a dataset only a running run reads has no start job and
    # LineageService.toLineageWithOrphanDataset answers it alone; the running job's own graph is the job alone
    # (getLineage's lineage_outside_job_io), with no inputs.
    running = str(uuid.uuid4())
    store.ingest([event("START", "still_running", running, T(1), [ds("feed")], [ds("sink")])])
    store.ingest(
        [
            {
                "eventTime": T(2),
                "producer": PRODUCER,
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
                "dataset": ds("lonely"),
            }
        ]
    )
    for name in ("feed", "lonely"):
        assert [(n["id"], n["type"], n["inEdges"], n["outEdges"]) for n in lineage(store, dataset(name))] == [
            (dataset(name), "DATASET", [], [])
        ]
    alone = lineage(store, job("still_running"))
    assert ids(alone) == {job("still_running")} and alone[0]["data"]["inputs"] == []


def test_a_job_with_no_datasets_returns_itself(store):
    # LineageDao.getLineage: "a job with no input or output datasets" is returned alone (lineage_outside_job_io).
    store.ingest(run("dag", 1) + run("task", 2, [ds("a")], [ds("b")]))
    graph = lineage(store, job("dag"))
    assert [(n["id"], n["type"], n["inEdges"], n["outEdges"]) for n in graph] == [(job("dag"), "JOB", [], [])]
    assert graph[0]["data"]["inputs"] == [] and graph[0]["data"]["outputs"] == []


def test_two_jobs_sharing_only_an_output_are_one_graph(store):
    # LineageDao.getLineage: array_cat(io.inputs, io.outputs) && array_cat(l.inputs, l.outputs): a shared dataset in
    # any role connects two jobs, so two writers of one table reach each other (and each other's inputs).
    store.ingest(run("load_a", 1, [ds("a")], [ds("shared")]) + run("load_b", 2, [ds("b")], [ds("shared")]))
    assert ids(lineage(store, job("load_a"), 0)) == {job("load_a"), dataset("a"), dataset("shared")}
    graph = lineage(store, job("load_a"), 1)
    assert ids(graph) == {job("load_a"), job("load_b"), dataset("a"), dataset("b"), dataset("shared")}
    shared = next(node for node in graph if node["id"] == dataset("shared"))
    assert [e["origin"] for e in shared["inEdges"]] == [job("load_a"), job("load_b")] and shared["outEdges"] == []


def test_a_symlinked_dataset_is_one_node_whichever_name_an_event_uses(store):
    # OpenLineageDao.upsertLineageDataset with DatasetSymlinkDao (ON CONFLICT (name, namespace_uuid) DO NOTHING): a
    # dataset's own name is registered first as the primary symlink, the names of its symlinks facet then point to it;
    # an event naming a registered symlink lands on that dataset (OpenLineageDaoTest
    # .testUpdateMarquezModelDatasetWithSymlinks), and datasets_view finds it by any name (LineageDao.getDatasetData).
    # A name registered as a dataset of its own before the symlink appears stays a dataset of its own.
    store.ingest(
        run("write_path", 1, [], [ds("/wh/raw", "file", symlink=("warehouse", "nyc.raw"))])
        + run("read_table", 2, [ds("nyc.raw")], [ds("report")])
        + run("first_table", 3, [], [ds("nyc.zones")])
        + run("write_zones_path", 4, [], [ds("/wh/zones", "file", symlink=("warehouse", "nyc.zones"))])
    )
    primary = dataset("/wh/raw", "file")
    for name in (dataset("nyc.raw"), primary):
        graph = lineage(store, name)
        assert ids(graph) == {job("write_path"), job("read_table"), primary, dataset("report")}
        assert (job("write_path"), primary) in edges(graph) and (primary, job("read_table")) in edges(graph)
    assert job("write_zones_path") not in ids(lineage(store, dataset("nyc.zones")))


def test_an_event_without_outputs_clears_the_current_outputs_until_the_run_is_done(store):
    # OpenLineageDao.updateBaseMarquezModel: an event with no outputs (no inputs) marks the job's current OUTPUT
    # (INPUT) rows of job_versions_io_mapping previous (markInputOrOutputDatasetAsPreviousFor), whatever its type: a
    # second run's START that lists only inputs leaves the job without outputs until a done event makes a version.
    second = str(uuid.uuid4())
    store.ingest(run("job", 1, [ds("in")], [ds("out")]) + [event("START", "job", second, T(2), [ds("in")], [])])
    assert ids(lineage(store, job("job"))) == {job("job"), dataset("in")}
    assert ids(lineage(store, dataset("out"))) == {dataset("out")}
    store.ingest([event("COMPLETE", "job", second, T(3), [], [ds("out")])])
    assert ids(lineage(store, job("job"))) == {job("job"), dataset("in"), dataset("out")}


def test_response_shape_order_and_data_fields_are_marquezs(store):
    # service/models/Lineage.java: nodes sorted by id (withSortedNodes); Node.java: {"id", "type", "data", "inEdges",
    # "outEdges"}, edges an ImmutableSortedSet by (origin, destination) (Edge.compareTo); JobData.java and
    # DatasetData.java: the fields of "data".
    store.ingest(run("join", 1, [ds("orders"), ds("customers")], [ds("joined")]))
    graph = lineage(store, job("join"))
    assert [n["id"] for n in graph] == sorted(n["id"] for n in graph)
    for node in graph:
        assert list(node) == ["id", "type", "data", "inEdges", "outEdges"]
        for side in ("inEdges", "outEdges"):
            pairs = [(e["origin"], e["destination"]) for e in node[side]]
            assert pairs == sorted(pairs) and all(set(e) == {"origin", "destination"} for e in node[side])
    job_data = next(n for n in graph if n["type"] == "JOB")["data"]
    assert {
        "id", "type", "name", "simpleName", "parentJobName", "parentJobUuid", "currentRunUuid", "createdAt",
        "updatedAt", "namespace", "inputs", "outputs", "location", "description", "latestRun",
    } <= set(job_data)  # fmt: skip
    assert job_data["latestRun"]["state"] == "COMPLETED" and job_data["currentRunUuid"] == job_data["latestRun"]["id"]
    dataset_data = next(n for n in graph if n["type"] == "DATASET")["data"]
    assert {
        "id", "type", "name", "physicalName", "createdAt", "updatedAt", "namespace", "sourceName", "fields", "tags",
        "lastModifiedAt", "description", "lastLifecycleState",
    } <= set(dataset_data)  # fmt: skip


def test_each_jobs_latest_run_is_read_without_its_facets(store):
    # a year's runs carry KB of merged facets each (7.2 GB of a 15.6 GB store), which the response never gives: a
    # whole-row read of 1,000 jobs' latest runs read and decompressed them for nothing
    from sqlalchemy import event as sql_event

    events = run("load", 1, [ds("raw")], [ds("clean")])
    events[-1]["run"]["facets"] = {"big": {"_producer": PRODUCER, "_schemaURL": SCHEMA_URL, "text": "x" * 50_000}}
    store.ingest(events)
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    sql_event.listen(store.engine, "before_cursor_execute", record)
    try:
        graph = lineage(store, job("load"))
    finally:
        sql_event.remove(store.engine, "before_cursor_execute", record)
    latest = next(n for n in graph if n["type"] == "JOB")["data"]["latestRun"]
    assert latest["id"] == events[0]["run"]["runId"] and latest["state"] == "COMPLETED"
    assert latest["startedAt"] and latest["endedAt"]
    run_reads = [sql for sql in statements if "FROM lineage_runs" in sql]
    assert run_reads and not [sql for sql in run_reads if "lineage_runs.facets" in sql], run_reads


def test_the_graph_comes_from_job_versions_whatever_the_closure_table_holds(store):
    store.ingest(run("j1", 1, [ds("a")], [ds("b")]) + run("j2", 2, [ds("b")], [ds("c")]))
    before = lineage(store, dataset("b"))
    with store.engine.begin() as conn:
        conn.execute(delete(edges_table))
        conn.execute(delete(closure_table))
    assert lineage(store, dataset("b")) == before


def test_node_ids_with_ports_unknown_nodes_and_bad_parameters(store):
    # service/models/NodeId.java parts(): a colon followed by // or digits belongs to the namespace's URI;
    # BaseResource.throwIfNotExists: an unknown node is a 404.
    store.ingest(run("etl", 1, [ds("shop.orders", "postgres://db:5432")], [ds("orders_daily")]))
    assert parse_node_id("dataset:postgres://db:5432:shop.orders") == ("dataset", "postgres://db:5432", "shop.orders")
    assert job("etl") in ids(lineage(store, "dataset:postgres://db:5432:shop.orders"))
    client = TestClient(create_app(store=store))
    unknown = client.get("/api/v1/lineage", params={"nodeId": "dataset:warehouse:orders_dayly"})
    assert unknown.status_code == 404 and "orders_daily" in unknown.json()["message"]
    bad = client.get("/api/v1/lineage", params={"nodeId": job("etl"), "history": "some"})
    assert bad.status_code == 400 and "history=all" in bad.json()["message"]


def test_the_model_is_rebuilt_when_events_arrive(store):
    queries = LineageQueries(store)
    store.ingest(run("j1", 1, [ds("a")], [ds("b")]))
    assert job("j2") not in ids(queries.marquez_lineage(job("j1"))["graph"])
    store.ingest(run("j2", 2, [ds("b")], [ds("c")]))
    assert job("j2") in ids(queries.marquez_lineage(job("j1"))["graph"])
