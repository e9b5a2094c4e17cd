"""bench/marquez_compare.py: the comparison of two ``GET /api/v1/lineage`` answers and the summaries, on small
handmade graphs (no server)."""

from __future__ import annotations

import copy

import pytest

from bench.marquez_compare import (
    MISSING,
    compare_graphs,
    diff_data,
    general_path,
    ingest_summary,
    latency_summary,
    merge_comparisons,
)

READ = "job:platform:sales.read"
HUB = "dataset:file:/lake/warehouse/shared/dim_date"
OUT = "dataset:file:/lake/warehouse/sales/out"


def _node(node_id: str, data: dict, ins: list[str], outs: list[str]) -> dict:
    return {
        "id": node_id,
        "type": node_id.split(":", 1)[0].upper(),
        "data": data,
        "inEdges": [{"origin": origin, "destination": node_id} for origin in ins],
        "outEdges": [{"origin": node_id, "destination": destination} for destination in outs],
    }


def _graph() -> dict:
    return {
        "graph": [
            _node(
                HUB,
                {
                    "name": "/lake/warehouse/shared/dim_date",
                    "updatedAt": "2025-01-02T01:00:00Z",
                    "fields": [{"name": "day", "type": "date"}, {"name": "year", "type": "int"}],
                    "tags": ["b", "a"],
                },
                [],
                [READ],
            ),
            _node(
                READ,
                {
                    "name": "sales.read",
                    "parentJobUuid": "11111111-1111-1111-1111-111111111111",
                    "latestRun": {"state": "COMPLETED", "jobVersion": {"name": "sales.read", "version": "v-1"}},
                },
                [HUB],
                [OUT],
            ),
            _node(OUT, {"name": "/lake/warehouse/sales/out"}, [READ], []),
        ]
    }


def _find(graph: dict, node_id: str) -> dict:
    return next(node for node in graph["graph"] if node["id"] == node_id)


def test_equal_graphs_are_the_same():
    result = compare_graphs(_graph(), _graph())
    assert result["same"] is True
    assert result["nodes"] == {"ours": 3, "theirs": 3}
    assert result["edges"] == {"ours": 2, "theirs": 2}
    assert result["only_ours"] == {"nodes": [], "edges": []}
    assert result["only_theirs"] == {"nodes": [], "edges": []}
    assert result["data"] == {}


def test_a_node_missing_on_their_side_is_listed_with_its_edges():
    theirs = _graph()
    theirs["graph"] = [node for node in theirs["graph"] if node["id"] != OUT]
    _find(theirs, READ)["outEdges"] = []
    result = compare_graphs(_graph(), theirs)
    assert result["same"] is False
    assert result["only_ours"]["nodes"] == [OUT]
    assert result["only_ours"]["edges"] == [(READ, OUT)]
    assert result["only_theirs"] == {"nodes": [], "edges": []}


def test_an_extra_edge_on_their_side_is_listed():
    theirs = _graph()
    _find(theirs, OUT)["outEdges"].append({"origin": OUT, "destination": READ})
    result = compare_graphs(_graph(), theirs)
    assert result["same"] is False
    assert result["only_theirs"]["edges"] == [(OUT, READ)]
    assert result["only_ours"]["edges"] == []
    assert result["only_theirs"]["nodes"] == [] and result["data"] == {}


def test_a_data_field_that_differs_is_counted_per_path_with_an_example():
    theirs = _graph()
    _find(theirs, READ)["data"]["latestRun"]["state"] = "FAILED"
    _find(theirs, HUB)["data"]["fields"][1]["type"] = "bigint"
    result = compare_graphs(_graph(), theirs)
    assert result["same"] is False
    assert set(result["data"]) == {"latestRun.state", "fields[].type"}
    assert result["data"]["latestRun.state"] == {
        "nodes": 1,
        "example": {"node": READ, "path": "latestRun.state", "ours": "COMPLETED", "theirs": "FAILED"},
    }
    assert result["data"]["fields[].type"]["example"]["path"] == "fields[year].type"


def test_ignored_fields_and_equivalent_forms_are_not_differences():
    theirs = _graph()
    read = _find(theirs, READ)["data"]
    read["parentJobUuid"] = "22222222-2222-2222-2222-222222222222"  # an id Marquez makes itself
    read["latestRun"]["jobVersion"]["version"] = "v-2"  # likewise
    hub = _find(theirs, HUB)["data"]
    hub["updatedAt"] = "2025-01-02T01:00:00.000+00:00"  # the same instant
    hub["tags"] = ["a", "b"]  # a set in another order
    assert compare_graphs(_graph(), theirs)["same"] is True


def test_a_key_on_one_side_only_is_one_difference_not_one_per_leaf():
    theirs = _graph()
    _find(theirs, READ)["data"]["latestRun"]["facets"] = {"nominalTime": {"nominalStartTime": "2025-01-01T00:00:00Z"}}
    result = compare_graphs(_graph(), theirs)
    assert list(result["data"]) == ["latestRun.facets"]
    assert result["data"]["latestRun.facets"]["example"]["ours"] == MISSING


def test_named_lists_compare_their_names_and_order_then_their_common_items():
    ours = {"fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}]}
    reordered = {"fields": [{"name": "b", "type": "int"}, {"name": "a", "type": "string"}]}
    assert diff_data(ours, reordered) == {
        "fields<order>": (["a", "b"], ["b", "a"]),
        "fields[a].type": ("int", "string"),
    }
    assert diff_data(ours, {"fields": [{"name": "a", "type": "int"}]}) == {"fields": (["a", "b"], ["a"])}
    assert diff_data(ours, {"fields": []}) == {"fields": (["a", "b"], [])}
    assert diff_data({"x": None}, {"x": ""}) == {"x": (None, "")}


def test_general_path_folds_list_items():
    assert general_path("latestRun.inputDatasetVersions[file:/a].datasetVersionId.version") == (
        "latestRun.inputDatasetVersions[].datasetVersionId.version"
    )


def test_merge_counts_answers_and_keeps_the_first_example():
    theirs = copy.deepcopy(_graph())
    _find(theirs, READ)["data"]["latestRun"]["state"] = "FAILED"
    differing = compare_graphs(_graph(), theirs)
    merged = merge_comparisons({HUB: compare_graphs(_graph(), _graph()), READ: differing, OUT: differing})
    assert merged["answers"] == 3 and merged["same"] == 1
    assert merged["data"]["latestRun.state"]["answers"] == 2
    assert merged["data"]["latestRun.state"]["nodes"] == 2
    assert merged["data"]["latestRun.state"]["example"]["asked"] == READ


def test_ingest_summary_counts_refusals_and_keeps_the_first_bodies():
    summary = ingest_summary(4, 2.0, [201, 400, 201, 500], ["400 bad", "500 oops"], clients=1)
    assert summary["events_per_second"] == 2.0
    assert summary["refused"] == 2
    assert summary["first_refusals"] == ["400 bad", "500 oops"]


def test_latency_summary_keeps_the_first_answer_apart():
    summary = latency_summary(900.0, [10.0, 30.0, 20.0, 40.0, 50.0], nodes=7, status=200)
    assert summary["first_ms"] == 900.0
    assert summary["p50_ms"] == pytest.approx(30.0)
    assert summary["p95_ms"] == pytest.approx(50.0)
    assert summary["count"] == 5 and summary["nodes"] == 7


# ------------------------------------------------------------------------------------- posting, on loopback
def test_post_events_sends_each_body_once_from_every_client_and_counts_the_refused(monkeypatch):
    """A real HTTP receiver on loopback: every body arrives once, with the token; a 400 is counted and its first
    text kept, not raised."""
    import http.server
    import json
    import threading

    from bench.marquez_compare import post_events
    from tests.support import loopback_server

    received: list[tuple[int, str]] = []
    lock = threading.Lock()

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                received.append((body["n"], self.headers.get("Authorization")))
            status = 400 if body["n"] % 10 == 0 else 201
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b"refused: n is a multiple of ten" if status == 400 else b"{}")

        def log_message(self, *_args):
            pass

    with loopback_server(Receiver) as base:
        summary = post_events(base, [{"n": n} for n in range(1, 41)], "secret", clients=3)
    assert sorted(n for n, _ in received) == list(range(1, 41))
    assert {auth for _, auth in received} == {"Bearer secret"}
    assert summary["events"] == 40 and summary["clients"] == 3 and summary["refused"] == 4
    assert summary["first_refusals"][0] == "400 refused: n is a multiple of ten"
