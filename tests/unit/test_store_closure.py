"""The graph holds each job's current version only, and the closure table stays exact as versions change.

Marquez's lineage reads ``job_versions_io_mapping`` ``WHERE io.is_current_job_version = TRUE``
(``api/src/main/java/marquez/db/LineageDao.java``): a job whose latest version stopped reading a dataset no longer
points at it. Ours: a job's edges are the inputs and outputs of its latest run (the greatest (earliest event time, run
id)), whatever order its events arrive in; every edge ever seen stays in ``lineage_edge_history``. The property tests
build the expected graph from the raw events, independently of the store, and compare the closure table with
networkx's transitive closure and shortest-path lengths."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from include.lineage.queries import LineageQueries, closure_upstream
from include.lineage.store import LineageStore
from include.lineage.store.schema import (
    ancestry_table,
    closure_table,
    edge_history_table,
    edges_table,
    jobs_table,
    nodes_table,
    runs_table,
)

NS = "tests"


def _event(job: str, run_id: str | None, second: int, inputs=(), outputs=(), event_type="COMPLETE") -> dict:
    event = {
        "eventType": event_type,
        "eventTime": f"2025-01-01T00:00:{second:02d}Z",
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "job": {"namespace": NS, "name": job, "facets": {}},
        "inputs": [{"namespace": "file", "name": f"/{name}", "facets": {}} for name in inputs],
        "outputs": [{"namespace": "file", "name": f"/{name}", "facets": {}} for name in outputs],
    }
    if run_id is not None:
        event["run"] = {"runId": run_id, "facets": {}}
    else:  # a job event: no run, no type
        event.pop("eventType")
        event["schemaURL"] = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent"
    return event


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """An empty store at head, copied for each example (creating one runs the migrations)."""
    path = tmp_path_factory.mktemp("template") / "store.db"
    LineageStore(f"sqlite:///{path}").close()
    return path


@pytest.fixture
def store(template, tmp_path):
    shutil.copy(template, tmp_path / "store.db")
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as lineage_store:
        yield lineage_store


# ----------------------------------------------------------------------------- what the store holds
def _node_names(conn) -> dict[int, tuple[str, str]]:
    return {
        node: (kind, name.lstrip("/"))
        for node, kind, name in conn.execute(select(nodes_table.c.id, nodes_table.c.kind, nodes_table.c.name))
    }


def _stored(store: LineageStore) -> dict:
    with store.engine.connect() as conn:
        names = _node_names(conn)
        closure = {(names[a], names[d]): depth for a, d, depth in conn.execute(select(closure_table))}
        return {
            "nodes": set(names.values()),
            "edges": {(names[s], names[t]) for s, t in conn.execute(select(edges_table))},
            "closure": {pair: depth for pair, depth in closure.items() if pair[0] != pair[1]},
            "self": {pair[0]: depth for pair, depth in closure.items() if pair[0] == pair[1]},
            # the upstream read: each node's packed row (include/lineage/store/ancestry.py), as closure_upstream reads it
            "ancestry": {
                (names[d], names[a]): depth for d in names for a, depth in closure_upstream(conn, d, depth=10**6)
            },
            "packed rows": conn.execute(select(func.count()).select_from(ancestry_table)).scalar_one(),
            "history": {
                (names[s], names[t]): (first, last) for s, t, first, last in conn.execute(select(edge_history_table))
            },
            "latest": dict(conn.execute(select(jobs_table.c.name, jobs_table.c.latest_run_id)).all()),
            "versions": conn.execute(
                select(jobs_table.c.name, jobs_table.c.current_version_id, runs_table.c.job_version_id).join(
                    runs_table, runs_table.c.id == jobs_table.c.latest_run_id
                )
            ).all(),
        }


# ----------------------------------------------------------------------------- what it should hold, from the events
def _time(event: dict) -> datetime:
    return datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00")).astimezone(UTC)


def _expected(events: list[dict]) -> dict:
    """The current graph, from the raw events alone: each distinct event once; a run's datasets the union of its
    events'; a job's latest run the one of the greatest (earliest event time, run id); a job without runs, the union
    of its job events at their latest time."""
    distinct = {json.dumps(event, sort_keys=True): event for event in events}.values()
    runs: dict[str, dict] = {}
    runless: dict[str, list[tuple[datetime, set]]] = defaultdict(list)
    history: dict[tuple, list[datetime]] = defaultdict(list)
    nodes = set()
    for event in distinct:
        job = ("job", event["job"]["name"])
        edges = {(("dataset", d["name"].lstrip("/")), job) for d in event["inputs"]}
        edges |= {(job, ("dataset", d["name"].lstrip("/"))) for d in event["outputs"]}
        nodes |= {job} | {node for edge in edges for node in edge}
        for edge in edges:
            history[edge].append(_time(event))
        if "run" in event:
            run = runs.setdefault(event["run"]["runId"], {"job": job, "times": [], "edges": set()})
            run["times"].append(_time(event))
            run["edges"] |= edges
        else:
            runless[job].append((_time(event), edges))
    latest: dict[tuple, tuple] = {}
    for run_id, run in runs.items():
        rank = (min(run["times"]), run_id)
        if run["job"] not in latest or rank > latest[run["job"]][0]:
            latest[run["job"]] = (rank, run["edges"])
    graph = nx.DiGraph()
    graph.add_nodes_from(nodes)
    for _, edges in latest.values():
        graph.add_edges_from(edges)
    for job, declared in runless.items():
        if job not in latest:
            last = max(time for time, _ in declared)
            graph.add_edges_from(edge for time, edges in declared if time == last for edge in edges)
    stamp = "%Y-%m-%dT%H:%M:%S.%fZ"
    return {
        "graph": graph,
        "latest": {job[1]: rank[1] for job, (rank, _) in latest.items()},
        "history": {edge: (min(times).strftime(stamp), max(times).strftime(stamp)) for edge, times in history.items()},
    }


def _check(store: LineageStore, events: list[dict], dag: bool) -> None:
    expected, stored = _expected(events), _stored(store)
    graph = expected["graph"]
    assert stored["nodes"] == set(graph.nodes)
    assert stored["edges"] == set(graph.edges)
    assert stored["self"] == dict.fromkeys(graph.nodes, 0)
    depths = {
        (a, d): depth
        for a, reached in nx.all_pairs_shortest_path_length(graph)
        for d, depth in reached.items()
        if a != d
    }
    assert stored["closure"] == depths
    # the packed upstream read is the closure, pair for pair (the node itself at 0), one row per node
    assert stored["ancestry"] == {(d, a): depth for (a, d), depth in depths.items()} | {(n, n): 0 for n in graph.nodes}
    assert stored["packed rows"] == graph.number_of_nodes()
    if dag:
        assert nx.is_directed_acyclic_graph(graph)
        assert set(stored["closure"]) == set(nx.transitive_closure_dag(graph).edges)
    assert stored["history"] == expected["history"]
    assert {job: run for job, run in stored["latest"].items() if run} == expected["latest"]
    assert all(current == of_latest_run for _, current, of_latest_run in stored["versions"])


# ----------------------------------------------------------------------------- examples
def test_a_job_whose_latest_run_stopped_reading_a_dataset_no_longer_points_at_it(store):
    events = [
        _event("load", "run-1", 1, ["a", "b"], ["out"], "START"),
        _event("load", "run-1", 2, ["a", "b"], ["out"]),
        _event("load", "run-2", 3, ["a"], ["out"], "START"),
        _event("load", "run-2", 4, ["a"], ["out"]),
    ]
    store.ingest(events)
    _check(store, events, dag=True)
    queries = LineageQueries(store)
    assert {n.name for n in queries.upstream("dataset:file:/out").datasets()} == {"/a"}
    assert queries.downstream("dataset:file:/b").nodes.keys() == {queries.resolve("dataset:file:/b").id}
    history = _stored(store)["history"]
    assert history[(("dataset", "b"), ("job", "load"))] == (
        "2025-01-01T00:00:01.000000Z",
        "2025-01-01T00:00:02.000000Z",
    )
    assert history[(("dataset", "a"), ("job", "load"))] == (
        "2025-01-01T00:00:01.000000Z",
        "2025-01-01T00:00:04.000000Z",
    )


def test_a_late_event_of_an_older_run_never_makes_its_version_current_again(store):
    newer = [_event("load", "run-2", 3, ["a"], ["out"], "START"), _event("load", "run-2", 4, ["a"], ["out"])]
    older = [
        _event("load", "run-1", 1, ["a", "b"], ["out"], "START"),
        _event("load", "run-1", 2, ["a", "b", "c"], ["out"]),  # a late COMPLETE that even adds an input
    ]
    store.ingest(newer)
    store.ingest(older)
    _check(store, newer + older, dag=True)
    stored = _stored(store)
    assert stored["latest"] == {"load": "run-2"}
    assert stored["edges"] == {(("dataset", "a"), ("job", "load")), (("job", "load"), ("dataset", "out"))}
    queries = LineageQueries(store)
    assert sorted(d["name"] for d in queries.run_details("run-1")["inputs"]) == ["/a", "/b", "/c"]  # the run has them


def test_the_latest_run_is_the_one_of_the_latest_earliest_event(store):
    """A run's time is its earliest event's: when a run's START arrives after its COMPLETE, with a time before another
    run's, that other run becomes the latest."""
    events = [
        _event("load", "run-a", 5, ["a"], ["out"], "START"),
        _event("load", "run-b", 10, ["b"], ["out"]),  # run-b, known only by its COMPLETE: the latest
        _event("load", "run-b", 3, ["b"], ["out"], "START"),  # run-b started before run-a after all
    ]
    store.ingest(events[:2])
    assert _stored(store)["latest"] == {"load": "run-b"}
    store.ingest(events[2:])
    _check(store, events, dag=True)
    assert _stored(store)["latest"] == {"load": "run-a"}


def test_when_a_shortcut_leaves_the_closure_keeps_the_longer_distance(store):
    events = [
        _event("first", "r1", 1, ["a"], ["b"]),
        _event("second", "r2", 1, ["b"], ["c"]),
        _event("shortcut", "r3", 1, ["a"], ["c"]),
    ]
    store.ingest(events)
    assert _stored(store)["closure"][(("dataset", "a"), ("dataset", "c"))] == 2
    events.append(_event("shortcut", "r4", 2, ["x"], ["c"]))  # the shortcut no longer reads a
    store.ingest(events[-1:])
    _check(store, events, dag=True)
    assert _stored(store)["closure"][(("dataset", "a"), ("dataset", "c"))] == 4


def test_job_events_without_a_run_give_a_job_its_edges_until_it_runs(store):
    events = [
        _event("declared", None, 1, ["a"], ["out"]),
        _event("declared", None, 3, ["b"], ["out"]),
        _event("declared", None, 3, ["c"], []),
        _event("declared", None, 2, ["d"], ["out"]),  # older than the latest declaration: not in the graph
    ]
    store.ingest(events)
    _check(store, events, dag=True)
    assert {s[1] for s, t in _stored(store)["edges"] if s[0] == "dataset"} == {"b", "c"}
    events.append(_event("declared", "run-1", 0, ["e"], ["out"]))  # a run, even an earlier one, decides
    store.ingest(events[-1:])
    _check(store, events, dag=True)
    assert {s[1] for s, t in _stored(store)["edges"] if s[0] == "dataset"} == {"e"}


# ----------------------------------------------------------------------------- properties against networkx
DATASETS = 6
JOBS = 6


@st.composite
def _histories(draw, dag: bool) -> list[dict]:
    """Events of a few runs of a few jobs over a few datasets: a job's inputs and outputs change between runs; a run's
    datasets are spread over its events; times may tie; some jobs have job events without a run."""
    events = []

    def sides() -> tuple[list[int], list[int]]:
        """A DAG: each version of a job reads datasets below a cut and writes datasets above it (the cut may move
        between versions: the graph of one version per job is still acyclic); otherwise any."""
        if not dag:
            return list(range(DATASETS)), list(range(DATASETS))
        cut = draw(st.integers(1, DATASETS - 1))
        return list(range(cut)), list(range(cut, DATASETS))

    for job in range(JOBS):
        for run in range(draw(st.integers(0 if job % 2 else 1, 3))):  # some jobs never run
            readable, writable = sides()
            inputs = draw(st.sets(st.sampled_from(readable), max_size=3))
            outputs = draw(st.sets(st.sampled_from(writable), max_size=2))
            count = draw(st.integers(1, 3))
            shares = [([], []) for _ in range(count)]
            for side, chosen in ((0, inputs), (1, outputs)):
                for dataset in sorted(chosen):  # each dataset in at least one event, maybe several
                    for index in draw(st.sets(st.integers(0, count - 1), min_size=1)):
                        shares[index][side].append(f"d{dataset}")
            for ins, outs in shares:
                kind = draw(st.sampled_from(["START", "RUNNING", "COMPLETE", "FAIL"]))
                second = draw(st.integers(0, 12))
                events.append(_event(f"j{job}", f"j{job}-run{run}", second, sorted(ins), sorted(outs), kind))
        readable, writable = sides()  # job events without a run, at the latest time, are unioned: one cut
        for _ in range(draw(st.integers(0, 2)) if draw(st.booleans()) else 0):
            inputs = draw(st.sets(st.sampled_from(readable), max_size=2))
            outputs = draw(st.sets(st.sampled_from(writable), max_size=2))
            second = draw(st.integers(0, 12))
            events.append(
                _event(f"j{job}", None, second, [f"d{i}" for i in sorted(inputs)], [f"d{o}" for o in sorted(outputs)])
            )
    order = draw(st.permutations(events))  # any arrival order
    duplicates = draw(st.lists(st.sampled_from(events), max_size=4)) if events else []
    arrived = list(order)
    for duplicate in duplicates:
        arrived.insert(draw(st.integers(0, len(arrived))), json.loads(json.dumps(duplicate)))
    return arrived


def _ingest_in_pieces(template: Path, events: list[dict], seed: int) -> tuple[LineageStore, Path]:
    folder = Path(tempfile.mkdtemp(prefix="closure-"))
    shutil.copy(template, folder / "store.db")
    store = LineageStore(f"sqlite:///{folder / 'store.db'}")
    rng, start = random.Random(seed), 0
    while start < len(events):  # several transactions, several batches
        size = rng.randint(1, 6)
        store.ingest(events[start : start + size], batch_size=rng.randint(1, 4))
        start += size
    return store, folder


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events=_histories(dag=True), seed=st.integers(0, 2**16))
def test_the_closure_equals_networkx_on_the_current_graph_of_a_dag(template, events, seed):
    store, folder = _ingest_in_pieces(template, events, seed)
    try:
        _check(store, events, dag=True)
    finally:
        store.close()
        shutil.rmtree(folder)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events=_histories(dag=False), seed=st.integers(0, 2**16))
def test_the_closure_equals_networkx_shortest_paths_with_cycles_too(template, events, seed):
    store, folder = _ingest_in_pieces(template, events, seed)
    try:
        _check(store, events, dag=False)
    finally:
        store.close()
        shutil.rmtree(folder)
