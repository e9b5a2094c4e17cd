"""The graph as it was at an instant (``asOf=`` on ``GET /api/v1/lineage``, ``--as-of`` on ``lineage upstream``,
``downstream`` and ``impact``) and every edge ever seen (``history=all``, ``--all-history``), on a real SQLite store:
a job whose input changes between two runs, a dataset that appears with the change."""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient

from include.lineage import cli
from include.lineage.api.server import create_app
from include.lineage.queries import LineageQueries, closure_upstream, parse_instant
from include.lineage.render import render_tree
from include.lineage.store import LineageStore

NS = "as-of-tests"
PRODUCER = "https://example.com/tests/as-of"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
T = "2025-03-01T{:02d}:00:00+00:00".format
BEFORE_CHANGE, AFTER_CHANGE = T(2), T(5)


def ds(name: str) -> dict:
    return {"namespace": "warehouse", "name": name, "facets": {}}


def run(job: str, hour: int, inputs=(), outputs=()) -> list[dict]:
    run_id = str(uuid.uuid4())
    return [
        {
            "eventType": event_type,
            "eventTime": time,
            "producer": PRODUCER,
            "schemaURL": SCHEMA_URL,
            "run": {"runId": run_id, "facets": {}},
            "job": {"namespace": NS, "name": job, "facets": {}},
            "inputs": list(inputs),
            "outputs": list(outputs),
        }
        for event_type, time in (("START", T(hour)), ("COMPLETE", T(hour).replace(":00:00", ":30:00")))
    ]


@pytest.fixture
def store(tmp_path):
    """``forecast`` reads ``actuals`` at 01:00 and 03:00, then at 04:00 (with new code) ``actuals_v2``, first seen
    then; ``publish`` reads the forecast at 01:00 and 04:00."""
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as lineage_store:
        lineage_store.ingest(
            run("forecast", 1, [ds("actuals")], [ds("forecast")])
            + run("publish", 1, [ds("forecast")], [ds("site")])
            + run("forecast", 3, [ds("actuals")], [ds("forecast")])
            + run("forecast", 4, [ds("actuals_v2")], [ds("forecast")])
            + run("publish", 4, [ds("forecast")], [ds("site")])
        )
        yield lineage_store


def graph_ids(response) -> set[str]:
    assert response.status_code == 200, response.text
    return {node["id"] for node in response.json()["graph"]}


def test_as_of_shows_each_job_as_the_version_of_its_latest_run_started_by_then(store):
    client = TestClient(create_app(store=store))
    before = graph_ids(client.get("/api/v1/lineage", params={"nodeId": "warehouse:forecast", "asOf": BEFORE_CHANGE}))
    after = graph_ids(client.get("/api/v1/lineage", params={"nodeId": "warehouse:forecast", "asOf": AFTER_CHANGE}))
    assert "dataset:warehouse:actuals" in before and "dataset:warehouse:actuals_v2" not in before
    assert "dataset:warehouse:actuals_v2" in after and "dataset:warehouse:actuals" not in after
    # the job's data lists the inputs of that version
    graph = client.get("/api/v1/lineage", params={"nodeId": f"job:{NS}:forecast", "asOf": BEFORE_CHANGE}).json()
    forecast = next(node for node in graph["graph"] if node["id"] == f"job:{NS}:forecast")
    assert forecast["data"]["inputs"] == [{"namespace": "warehouse", "name": "actuals"}]
    # an offset other than UTC names the same instant: 03:00+02:00 is 01:00Z, when only the first runs had started
    earlier = graph_ids(
        client.get("/api/v1/lineage", params={"nodeId": "warehouse:forecast", "asOf": "2025-03-01T03:45:00+02:00"})
    )
    assert earlier == before


def test_a_dataset_first_seen_later_is_absent_before(store):
    client = TestClient(create_app(store=store))
    missing = client.get("/api/v1/lineage", params={"nodeId": "warehouse:actuals_v2", "asOf": BEFORE_CHANGE})
    assert missing.status_code == 404 and "first seen at 2025-03-01T04:00:00" in missing.json()["message"]
    assert "dataset:warehouse:actuals_v2" in graph_ids(
        client.get("/api/v1/lineage", params={"nodeId": "warehouse:actuals_v2", "asOf": AFTER_CHANGE})
    )


def test_a_time_without_an_offset_is_refused_with_400_and_exit_2(store, capsys):
    client = TestClient(create_app(store=store))
    for value in ("2025-03-01T02:00:00", "2025-03-01", "yesterday"):
        response = client.get("/api/v1/lineage", params={"nodeId": "warehouse:forecast", "asOf": value})
        assert response.status_code == 400 and "UTC offset" in response.json()["message"], value
    assert cli.main(["upstream", "warehouse:forecast", "--as-of", "2025-03-01T02:00:00", "--store", store.url]) == 2
    error = capsys.readouterr().err
    assert "--as-of '2025-03-01T02:00:00'" in error and "UTC offset" in error
    # a "+" in a query string arrives as a space: still the same instant
    assert parse_instant("2025-03-01T04:00:00 02:00") == parse_instant("2025-03-01T02:00:00Z")


def test_cli_as_of_before_the_change_shows_the_old_input_after_it_the_new(store, capsys):
    assert cli.main(["upstream", "warehouse:forecast", "--as-of", BEFORE_CHANGE, "--store", store.url]) == 0
    before = capsys.readouterr().out
    assert "warehouse:actuals  [dataset]" in before and "actuals_v2" not in before and f"as of {T(2)[:19]}" in before
    assert cli.main(["upstream", "warehouse:forecast", "--as-of", AFTER_CHANGE, "--store", store.url]) == 0
    after = capsys.readouterr().out
    assert "warehouse:actuals_v2" in after and "warehouse:actuals  [dataset]" not in after
    assert cli.main(["downstream", "warehouse:actuals", "--as-of", AFTER_CHANGE, "--store", store.url, "--json"]) == 0
    assert {node["id"] for node in json.loads(capsys.readouterr().out)["graph"]} == {"dataset:warehouse:actuals"}
    assert cli.main(["impact", "warehouse:actuals", "--as-of", BEFORE_CHANGE, "--store", store.url]) == 0
    impact = capsys.readouterr().out  # the runs of 01:00 (forecast's, publish's), not those started later
    assert "warehouse:site" in impact and "2 runs downstream" in impact and T(3)[:13] not in impact


def test_without_as_of_the_answers_are_the_current_graph(store, capsys):
    queries = LineageQueries(store)
    current = queries.upstream("warehouse:forecast")
    with store.engine.connect() as conn:
        assert set(current.depths) == {node for node, _ in closure_upstream(conn, current.focus.id)}
    assert current.as_of is None and current.edge_times is None
    assert cli.main(["upstream", "warehouse:forecast", "--store", store.url]) == 0
    out = capsys.readouterr().out
    assert out == render_tree(current) + "\n" and "as of" not in out


def test_all_history_has_every_edge_ever_seen_with_when(store, capsys):
    client = TestClient(create_app(store=store))
    response = client.get("/api/v1/lineage", params={"nodeId": f"job:{NS}:forecast", "history": "all"})
    graph = response.json()["graph"]
    forecast = next(node for node in graph if node["id"] == f"job:{NS}:forecast")
    seen = {edge["origin"]: (edge["firstSeen"], edge["lastSeen"]) for edge in forecast["inEdges"]}
    assert seen == {
        "dataset:warehouse:actuals": ("2025-03-01T01:00:00.000000Z", "2025-03-01T03:30:00.000000Z"),
        "dataset:warehouse:actuals_v2": ("2025-03-01T04:00:00.000000Z", "2025-03-01T04:30:00.000000Z"),
    }
    assert cli.main(["upstream", "warehouse:forecast", "--all-history", "--store", store.url]) == 0
    out = capsys.readouterr().out
    assert "warehouse:actuals  [dataset]" in out and "warehouse:actuals_v2" in out and "every edge ever seen" in out
    assert "[seen 2025-03-01T01:00:00.000000Z … 2025-03-01T03:30:00.000000Z]" in out
    assert cli.main(["impact", "warehouse:actuals", "--all-history", "--store", store.url]) == 0
    assert "warehouse:site" in capsys.readouterr().out  # through forecast's edge from actuals, no longer current


# ----------------------------------------------------------------------------- the walk from the node, as a property
from hypothesis import HealthCheck, given  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from include.lineage.queries.walks import as_of_edges, as_of_walk, directed_depths  # noqa: E402
from tests.unit.test_store_closure import _histories, _ingest_in_pieces  # noqa: E402


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory):
    """An empty store at head, copied for each example (creating one runs the migrations)."""
    path = tmp_path_factory.mktemp("template") / "store.db"
    LineageStore(f"sqlite:///{path}").close()
    return path


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    events=_histories(dag=False),
    seed=st.integers(0, 2**16),
    seconds=st.lists(st.integers(0, 13), min_size=1, max_size=3),
    depth=st.sampled_from([0, 1, 2, 3, 20]),
)
def test_upstream_and_downstream_walks_equal_a_walk_of_the_whole_graph_now_and_as_of(
    empty_store, events, seed, seconds, depth
):
    """`lineage upstream|downstream` answer from the closure table (nodes and the edges among them, joined to it), and
    with `--as-of` walk from the node (``as_of_walk``, level by level with indexed queries: the jobs that ever touched
    a dataset from lineage_edge_history, each job's latest run by a seek): the same nodes, distances and edges as
    walking the whole graph of that instant (``as_of_edges``, pinned by the tests above, read off every run), on
    random histories (version changes, ties, out-of-order arrival, duplicates, cycles) and instants."""
    import shutil

    from sqlalchemy import select

    from include.lineage.store.schema import edges_table, nodes_table

    store, folder = _ingest_in_pieces(empty_store, events, seed)
    try:
        queries = LineageQueries(store)
        with store.engine.connect() as conn:
            nodes = [
                queries.resolve(key, conn)
                for key in conn.execute(select(nodes_table.c.key).order_by(nodes_table.c.id)).scalars()
            ]
            current = set(conn.execute(select(edges_table.c.source, edges_table.c.target)).all())
            for node in nodes:  # the current graph: from the closure table, edges joined to it (closure_subgraph)
                for direction in ("upstream", "downstream"):
                    expected = directed_depths(current, node.id, direction == "downstream", depth)
                    among = sorted(e for e in current if e[0] in expected and e[1] in expected)
                    sub = getattr(queries, direction)(node.key, depth)
                    assert (sub.depths, sub.edges, set(sub.nodes)) == (expected, among, set(expected)), node.key
            for second in seconds:
                as_of = parse_instant(f"2025-01-01T00:00:{second:02d}Z")
                whole = as_of_edges(conn, as_of)[0]
                for node in nodes:
                    for direction in ("upstream", "downstream"):
                        expected = directed_depths(whole, node.id, direction == "downstream", depth)
                        among = sorted(e for e in whole if e[0] in expected and e[1] in expected)
                        assert as_of_walk(conn, node, direction, depth, as_of) == (expected, among), (
                            node.key,
                            direction,
                            as_of,
                        )
    finally:
        store.close()
        shutil.rmtree(folder)


def test_a_time_outside_the_calendar_in_utc_is_refused_with_400_and_exit_2_not_a_server_error(store, capsys):
    """``0001-01-01T00:00:00+14:00`` is a valid ISO-8601 time whose UTC instant falls before the year 1: converting it
    raised OverflowError, which the API answered with 500 (and the CLI with a traceback)."""
    client = TestClient(create_app(store=store), raise_server_exceptions=False)
    for value in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
        response = client.get("/api/v1/lineage", params={"nodeId": "warehouse:forecast", "asOf": value})
        assert response.status_code == 400, (value, response.text)
        assert "outside the years 1 to 9999" in response.json()["message"]
    assert (
        cli.main(["upstream", "warehouse:forecast", "--as-of", "0001-01-01T00:00:00+14:00", "--store", store.url]) == 2
    )
    assert "outside the years 1 to 9999" in capsys.readouterr().err
    # years before 1000 keep the fixed width that makes string order time order
    assert parse_instant("0999-12-31T23:00:00Z") < parse_instant("1000-01-01T00:00:00Z")
    assert parse_instant("0001-01-01T10:00:00+02:00") == "0001-01-01T08:00:00.000000Z"
