"""The lineage store's semantics on events built with openlineage-python: de-duplication, order independence, the
closure table against networkx's transitive closure, idempotent re-ingest, Marquez's response shape, errors."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import random
import sys
import time
import uuid

import networkx as nx
import pytest
import requests
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    dataset_version_dataset,
    error_message_run,
    parent_run,
    schema_dataset,
    source_code_job,
    symlinks_dataset,
)
from openlineage.client.serde import Serde
from sqlalchemy import select

from include.lineage import cli
from include.lineage.errors import UnreadableEventFileError
from include.lineage.events import read_event_file
from include.lineage.queries import (
    EmptyStoreError,
    LineageQueries,
    UnknownNodeError,
    closure_downstream,
    closure_upstream,
    cte_walk,
)
from include.lineage.render import render_diff, render_tree
from include.lineage.store import LineageStore
from include.lineage.store.schema import (
    closure_table,
    datasets_table,
    events_table,
    job_versions_table,
    jobs_table,
    metadata,
    nodes_table,
    runs_table,
)

NS = "tests"
WAREHOUSE = "file:///warehouse"


def _event(
    event_type: str, job: str, run_id: str, time: str, inputs=(), outputs=(), run_facets=None, job_facets=None
) -> dict:
    """An OpenLineage event as openlineage-python serialises it."""
    event = RunEvent(
        eventType=RunState[event_type],
        eventTime=time,
        producer="https://example.com/tests",
        run=Run(runId=run_id, facets=run_facets or {}),
        job=Job(namespace=NS, name=job, facets=job_facets or {}),
        inputs=list(inputs),
        outputs=list(outputs),
    )
    return json.loads(Serde.to_json(event))


def _table(name: str, version: str | None = None, fields=(), column_lineage=None, output=False):
    facets = {
        "symlinks": symlinks_dataset.SymlinksDatasetFacet(
            identifiers=[symlinks_dataset.Identifier(namespace=WAREHOUSE, name=f"nyc.{name}", type="TABLE")]
        )
    }
    if version:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=version)
    if fields:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in fields]
        )
    if column_lineage:
        facets["columnLineage"] = column_lineage_dataset.ColumnLineageDatasetFacet(
            fields={
                out: column_lineage_dataset.Fields(
                    inputFields=[
                        column_lineage_dataset.InputField(
                            namespace="file",
                            name=f"/warehouse/{table}",
                            field=col,
                            transformations=[column_lineage_dataset.Transformation(type="DIRECT", subtype="IDENTITY")],
                        )
                        for table, col in sources
                    ]
                )
                for out, sources in column_lineage.items()
            }
        )
    cls = OutputDataset if output else InputDataset
    return cls(namespace="file", name=f"/warehouse/{name}", facets=facets)


def _code(text: str) -> dict:
    return {"sourceCode": source_code_job.SourceCodeJobFacet(language="python", sourceCode=text)}


def _parent(job: str, run_id: str) -> dict:
    return {
        "parent": parent_run.ParentRunFacet(
            job=parent_run.Job(namespace=NS, name=job), run=parent_run.Run(runId=run_id)
        )
    }


@pytest.fixture
def store(tmp_path):
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as lineage_store:
        yield lineage_store


def _pipeline_events() -> tuple[list[dict], dict[str, str]]:
    """A small pipeline: raw -> actuals -> forecast, run twice; the second forecast run adds a weather input and
    changes its code; a DAG run is the parent of every task run."""
    ids = {name: str(uuid.uuid4()) for name in ("dag1", "dag2", "actuals", "naive", "weather")}
    t = "2025-02-01T00:00:{:02d}+00:00".format
    actuals_out = _table(
        "actuals",
        "a1",
        [("total_rides", "long"), ("hour", "int")],
        {"total_rides": [("raw", "unique_row_id")], "hour": [("raw", "pickup_time")]},
        output=True,
    )
    events = [
        _event("START", "dag", ids["dag1"], t(0)),
        _event(
            "START",
            "dag.actuals",
            ids["actuals"],
            t(1),
            [_table("raw", "r1")],
            [_table("actuals", output=True)],
            _parent("dag", ids["dag1"]),
            _code("sum"),
        ),
        _event(
            "COMPLETE",
            "dag.actuals",
            ids["actuals"],
            t(2),
            [_table("raw", "r1", [("unique_row_id", "string"), ("pickup_time", "timestamp")])],
            [actuals_out],
            _parent("dag", ids["dag1"]),
            _code("sum"),
        ),
        _event(
            "START",
            "dag.forecast",
            ids["naive"],
            t(3),
            [_table("actuals", "a1")],
            [_table("forecast", output=True)],
            _parent("dag", ids["dag1"]),
            _code("naive"),
        ),
        _event(
            "COMPLETE",
            "dag.forecast",
            ids["naive"],
            t(4),
            [_table("actuals", "a1")],
            [_table("forecast", "f1", [("rides", "double")], {"rides": [("actuals", "total_rides")]}, output=True)],
            _parent("dag", ids["dag1"]),
            _code("naive"),
        ),
        _event("COMPLETE", "dag", ids["dag1"], t(5)),
        _event("START", "dag", ids["dag2"], t(10)),
        _event(
            "START",
            "dag.forecast",
            ids["weather"],
            t(11),
            [_table("actuals", "a1"), _table("weather", "w1")],
            [_table("forecast", output=True)],
            _parent("dag", ids["dag2"]),
            _code("weather"),
        ),
        _event(
            "FAIL",
            "dag.forecast",
            ids["weather"],
            t(12),
            [_table("actuals", "a1"), _table("weather", "w1")],
            [_table("forecast", "f2", [("rides", "double"), ("temperature", "double")], output=True)],
            {
                **_parent("dag", ids["dag2"]),
                "errorMessage": error_message_run.ErrorMessageRunFacet(message="boom", programmingLanguage="python"),
            },
            _code("weather"),
        ),
        _event("FAIL", "dag", ids["dag2"], t(13)),
    ]
    return events, ids


def _contents(store: LineageStore) -> dict:
    with store.engine.connect() as conn:
        return {
            table.name: sorted(tuple(map(str, row)) for row in conn.execute(select(table)))
            for table in metadata.sorted_tables
        }


def test_only_the_very_same_event_is_a_duplicate_another_time_notation_is_another_event(store):
    """Was: an event of the same run id, type and time was a duplicate, whatever else it said (and the same instant
    written another way too). Now only the same canonical JSON is; a re-spelled time is another event of the run."""
    run_id = str(uuid.uuid4())
    first = _event("START", "job", run_id, "2025-02-01T00:00:00.5+00:00")
    same_instant = {**first, "eventTime": "2025-02-01T00:00:00.500000Z"}
    later = {**first, "eventTime": "2025-02-01T00:00:01Z"}
    reordered = dict(reversed(list(first.items())))  # the same event, its keys in another order
    assert store.ingest([first]).new == 1
    result = store.ingest([same_instant, later, first, reordered])
    assert (result.read, result.new, result.duplicates) == (4, 2, 2)
    assert store.count(events_table) == 3
    with store.engine.connect() as conn:
        run = conn.execute(select(runs_table).where(runs_table.c.id == run_id)).one()
    assert (run.state, run.started_at) == ("RUNNING", "2025-02-01T00:00:00.500000Z")


def test_complete_before_start_leaves_the_run_completed_with_both_times(store):
    run_id = str(uuid.uuid4())
    complete = _event("COMPLETE", "job", run_id, "2025-02-01T00:00:05Z")
    start = _event("START", "job", run_id, "2025-02-01T00:00:00Z")
    running = _event("RUNNING", "job", run_id, "2025-02-01T00:00:03Z")
    store.ingest([complete, start, running])
    with store.engine.connect() as conn:
        run = conn.execute(select(runs_table).where(runs_table.c.id == run_id)).one()
    assert (run.state, run.started_at, run.ended_at) == (
        "COMPLETED",
        "2025-02-01T00:00:00.000000Z",
        "2025-02-01T00:00:05.000000Z",
    )


def test_later_terminal_event_wins_over_an_earlier_one(store):
    run_id = str(uuid.uuid4())
    store.ingest(
        [
            _event("FAIL", "job", run_id, "2025-02-01T00:00:09Z"),
            _event("COMPLETE", "job", run_id, "2025-02-01T00:00:05Z"),
        ]
    )
    with store.engine.connect() as conn:
        assert conn.execute(select(runs_table.c.state).where(runs_table.c.id == run_id)).scalar() == "FAILED"


def _random_dag_events(rng: random.Random, datasets: int, jobs: int) -> tuple[list[dict], nx.DiGraph]:
    """Jobs reading datasets below a random cut and writing datasets above it: a DAG over datasets and jobs."""
    graph = nx.DiGraph()
    events = []
    for j in range(jobs):
        cut = rng.randrange(1, datasets)
        inputs = rng.sample(range(cut), k=min(cut, rng.randint(1, 3)))
        outputs = rng.sample(range(cut, datasets), k=min(datasets - cut, rng.randint(1, 2)))
        job = f"job:{NS}:job{j}"
        for i in inputs:
            graph.add_edge(f"dataset:file:/d/{i}", job)
        for o in outputs:
            graph.add_edge(job, f"dataset:file:/d/{o}")
        events.append(
            _event(
                "COMPLETE",
                f"job{j}",
                str(uuid.uuid4()),
                "2025-01-01T00:00:00Z",
                [InputDataset(namespace="file", name=f"/d/{i}") for i in inputs],
                [OutputDataset(namespace="file", name=f"/d/{o}") for o in outputs],
            )
        )
    rng.shuffle(events)  # edges arrive in any order: the closure must not depend on it
    return events, graph


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_closure_table_equals_networkx_transitive_closure_with_shortest_depths(tmp_path, seed):
    rng = random.Random(seed)
    events, graph = _random_dag_events(rng, datasets=220, jobs=160)
    assert nx.is_directed_acyclic_graph(graph)
    with LineageStore(f"sqlite:///{tmp_path / 'closure.db'}") as store:
        for start in range(0, len(events), 37):  # several transactions
            store.ingest(events[start : start + 37])
        with store.engine.connect() as conn:
            key_of = dict(conn.execute(select(nodes_table.c.id, nodes_table.c.key)).all())
            stored = {(key_of[a], key_of[d]): depth for a, d, depth in conn.execute(select(closure_table)) if a != d}
            expected = {
                (a, d): depth
                for a in graph
                for d, depth in nx.single_source_shortest_path_length(graph, a).items()
                if a != d
            }
            assert set(stored) == set(nx.transitive_closure_dag(graph).edges)
            assert stored == expected
            id_of = {key: node_id for node_id, key in key_of.items()}
            for key in rng.sample(sorted(graph), 25):
                assert sorted(closure_upstream(conn, id_of[key], 1000)) == sorted(
                    cte_walk(conn, id_of[key], "upstream", 1000)
                )
                assert sorted(closure_downstream(conn, id_of[key], 1000)) == sorted(
                    cte_walk(conn, id_of[key], "downstream", 1000)
                )


def test_a_cycle_keeps_reachability_and_the_node_itself_at_depth_zero(store):
    events = [
        _event(
            "COMPLETE",
            "merge",
            str(uuid.uuid4()),
            "2025-01-01T00:00:00Z",
            [_table("raw")],
            [_table("raw", output=True)],
        )
    ]
    store.ingest(events)
    queries = LineageQueries(store)
    sub = queries.upstream("nyc.raw")
    assert sub.depths[sub.focus.id] == 0 and {n.label for n in sub.jobs()} == {"merge"}


def test_reingest_is_idempotent_and_order_does_not_matter(tmp_path):
    events, _ = _pipeline_events()
    with (
        LineageStore(f"sqlite:///{tmp_path / 'a.db'}") as first,
        LineageStore(f"sqlite:///{tmp_path / 'b.db'}") as reversed_store,
    ):
        assert first.ingest(events).new == len(events)
        before = _contents(first)
        assert first.ingest(events).new == 0
        assert _contents(first) == before
        reversed_store.ingest(list(reversed(events)))
        with first.engine.connect() as a, reversed_store.engine.connect() as b:

            def graph(conn):
                keys = dict(conn.execute(select(nodes_table.c.id, nodes_table.c.key)).all())
                return sorted((keys[x], keys[y], d) for x, y, d in conn.execute(select(closure_table)))

            def runs(conn):
                return sorted(
                    conn.execute(
                        select(
                            runs_table.c.id,
                            runs_table.c.state,
                            runs_table.c.started_at,
                            runs_table.c.ended_at,
                            runs_table.c.parent_run_id,
                            runs_table.c.error_message,
                        )
                    ).all()
                )

            assert graph(a) == graph(b)
            assert runs(a) == runs(b)


def test_job_versions_change_with_inputs_and_code_and_diff_names_them(store):
    events, ids = _pipeline_events()
    store.ingest(events)
    queries = LineageQueries(store)
    runs = queries.runs("dag.forecast")["runs"]
    assert [r["id"] for r in runs] == [ids["weather"], ids["naive"]]
    assert runs[0]["jobVersion"] != runs[1]["jobVersion"]
    with store.engine.connect() as conn:
        assert (
            conn.execute(select(jobs_table.c.latest_run_id).where(jobs_table.c.name == "dag.forecast")).scalar()
            == ids["weather"]
        )
    result = queries.diff(ids["naive"], ids["weather"])
    changes = result["changes"]
    assert [item["dataset"] for item in changes["inputs"]["added"]] == ["nyc.weather"]
    assert [item["dataset"] for item in changes["inputs"]["same"]] == ["nyc.actuals"]
    assert changes["outputs"]["changed"] == [
        {"dataset": "nyc.forecast", "namespace": "file", "name": "/warehouse/forecast", "from": "f1", "to": "f2"}
    ]
    assert changes["schema"]["nyc.forecast"]["added"] == ["temperature double"]
    assert changes["state"] == ["COMPLETED", "FAILED"] and changes["errorMessage"] == [None, "boom"]
    assert "codeHash" in changes
    text = render_diff(result)
    assert "+ nyc.weather" in text and "code version changed" in text and "boom" in text
    dag_diff = queries.diff(ids["dag1"], ids["dag2"])  # DAG runs: compared through their task runs
    assert [item["dataset"] for item in dag_diff["changes"]["inputs"]["added"]] == ["nyc.weather"]
    assert "dag.forecast" in dag_diff["changes"]["tasks"]


def test_parent_runs_and_impact_of_a_run_follow_the_versions_it_wrote(store):
    events, ids = _pipeline_events()
    store.ingest(events)
    queries = LineageQueries(store)
    result = queries.impact_of_run(ids["actuals"])
    assert {r["id"] for r in result["runs"]} == {ids["actuals"], ids["naive"], ids["weather"]}
    assert {(v["label"], v["version"]) for v in result["datasetVersions"]} == {
        ("nyc.actuals", "a1"),
        ("nyc.forecast", "f1"),
        ("nyc.forecast", "f2"),
    }
    dag_run = queries.impact_of_run(ids["dag1"])  # a DAG run touches what its task runs touched
    assert {ids["actuals"], ids["naive"]} <= {r["id"] for r in dag_run["runs"]}
    with store.engine.connect() as conn:
        assert (
            conn.execute(select(runs_table.c.parent_run_id).where(runs_table.c.id == ids["naive"])).scalar()
            == ids["dag1"]
        )


def test_impact_of_a_dataset_lists_downstream_datasets_jobs_and_the_runs_that_read_them(store):
    events, ids = _pipeline_events()
    store.ingest(events)
    result = LineageQueries(store).impact("nyc.raw")
    sub = result["subgraph"]
    assert [n.label for n in sub.datasets()] == ["nyc.actuals", "nyc.forecast"]
    assert [n.label for n in sub.jobs()] == ["dag.actuals", "dag.forecast"]
    assert {r["id"] for r in result["runs"]} == {ids["actuals"], ids["naive"], ids["weather"]}


def test_impact_lists_each_run_once_newest_first_however_many_impacted_datasets_it_read(store):
    """A run reading two of the impacted datasets is one run of the answer (the query joins a row per dataset);
    runs come newest first, runs of one start time by id, and ``as_of`` keeps only the runs started by then."""
    t = "2025-03-01T{:02d}:00:00+00:00".format
    split = str(uuid.uuid4())
    both = sorted(str(uuid.uuid4()) for _ in range(2))  # two runs of one start time
    late = str(uuid.uuid4())
    events = [
        _event(
            "COMPLETE", "dag.split", split, t(1), [_table("raw")], [_table("x", output=True), _table("y", output=True)]
        )
    ]
    for run_id, hour in ((both[0], 2), (both[1], 2), (late, 5)):
        events += [
            _event("START", "dag.join", run_id, t(hour), [_table("x"), _table("y")], [_table("z", output=True)]),
            _event("COMPLETE", "dag.join", run_id, t(hour + 1), [_table("x"), _table("y")], [_table("z", output=True)]),
        ]
    store.ingest(events)
    queries = LineageQueries(store)
    # dag.split read the focus itself: its run is one of them
    assert [r["id"] for r in queries.impact("nyc.raw")["runs"]] == [late, both[1], both[0], split]
    assert [r["id"] for r in queries.impact("nyc.raw", as_of=t(3))["runs"]] == [both[1], both[0], split]
    # --since: only the runs started at or after it (a bound on an answer that otherwise grows with history)
    assert [r["id"] for r in queries.impact("nyc.raw", since=t(2))["runs"]] == [late, both[1], both[0]]
    assert [r["id"] for r in queries.impact("nyc.raw", since=t(3))["runs"]] == [late]
    assert queries.impact("nyc.raw", since=t(6))["runs"] == []
    run = queries.impact("nyc.raw")["runs"][0]
    assert set(run) == {"id", "job", "state", "startedAt", "endedAt"}
    assert run["job"] == {"namespace": NS, "name": "dag.join"} and run["state"] == "COMPLETED"
    assert run["startedAt"].startswith("2025-03-01T05:00:00") and run["endedAt"].startswith("2025-03-01T06:00:00")


def test_upstream_tree_and_marquez_shape(store):
    events, _ = _pipeline_events()
    store.ingest(events)
    queries = LineageQueries(store)
    sub = queries.upstream("file:/warehouse/forecast")
    assert {n.label for n in sub.datasets()} == {"nyc.actuals", "nyc.raw", "nyc.weather"}
    tree = render_tree(sub)
    assert tree.index("dag.forecast") < tree.index("nyc.actuals") < tree.index("dag.actuals") < tree.index("nyc.raw")
    graph = queries.marquez_graph(sub)["graph"]
    ids = {node["id"] for node in graph}
    assert "dataset:file:/warehouse/forecast" in ids and f"job:{NS}:dag.forecast" in ids
    for node in graph:
        assert set(node) == {"id", "type", "data", "inEdges", "outEdges"}
        assert node["type"] in ("DATASET", "JOB")
        assert node["data"]["id"]["namespace"] and node["data"]["id"]["name"]
        for edge in node["inEdges"]:
            assert edge["destination"] == node["id"] and edge["origin"] in ids
        for edge in node["outEdges"]:
            assert edge["origin"] == node["id"] and edge["destination"] in ids
    job = next(node for node in graph if node["id"] == f"job:{NS}:dag.forecast")
    assert {d["name"] for d in job["data"]["inputs"]} == {"/warehouse/actuals", "/warehouse/weather"}
    assert job["data"]["latestRun"]["state"] == "FAILED"
    forecast = next(node for node in graph if node["id"] == "dataset:file:/warehouse/forecast")
    assert [f["name"] for f in forecast["data"]["fields"]] == ["rides", "temperature"]


def test_column_lineage_walks_upstream_through_two_datasets(store):
    events, _ = _pipeline_events()
    store.ingest(events)
    queries = LineageQueries(store)
    result = queries.columns("nyc.forecast.rides")
    reached = {(result["datasets"][ds][2], col) for ds, col in result["levels"]}
    assert reached == {("nyc.forecast", "rides"), ("nyc.actuals", "total_rides"), ("nyc.raw", "unique_row_id")}
    graph = queries.column_graph(result)["graph"]
    assert graph[0]["id"] == "datasetField:file:/warehouse/forecast:rides" and graph[0]["type"] == "DATASET_FIELD"


def test_errors_name_what_is_wrong(store, tmp_path):
    with pytest.raises(EmptyStoreError):
        LineageQueries(store).upstream("nyc.forecast")
    events, _ = _pipeline_events()
    store.ingest(events)
    queries = LineageQueries(store)
    with pytest.raises(UnknownNodeError) as unknown:
        queries.upstream("nyc.forcast")
    assert "nyc.forecast" in unknown.value.suggestions
    with pytest.raises(UnknownNodeError) as column:
        queries.columns("nyc.forecast.ride")
    assert "nyc.forecast.rides" in column.value.suggestions
    bad = tmp_path / "events.jsonl"
    bad.write_text(
        json.dumps(events[0]) + "\n" + json.dumps({"eventTime": "2025-01-01T00:00:00Z", "run": {}, "job": {}}) + "\n"
    )
    with pytest.raises(UnreadableEventFileError) as unreadable:
        store.ingest_files([bad])
    assert unreadable.value.file == str(bad) and unreadable.value.line == 2 and "runId" in str(unreadable.value)


def test_cli_exit_codes_and_messages(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    assert cli.main(["upstream", "nyc.forecast", "--store", url]) == 2
    assert "empty" in capsys.readouterr().err
    events, ids = _pipeline_events()
    good = tmp_path / "events.jsonl"
    good.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert cli.main(["--store", url, "ingest", str(good)]) == 0
    assert f"{len(events)} new" in capsys.readouterr().out
    assert cli.main(["ingest", str(good), "--store", url]) == 0
    assert "0 new" in capsys.readouterr().out
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(events[0]) + "\n{not json\n")
    assert cli.main(["ingest", str(broken), "--store", url]) == 2
    assert f"{broken}:2" in capsys.readouterr().err
    assert cli.main(["upstream", "nyc.forcast", "--store", url]) == 2
    assert "did you mean" in capsys.readouterr().err
    assert cli.main(["downstream", "nyc.raw", "--store", url, "--json"]) == 0
    graph = json.loads(capsys.readouterr().out)["graph"]
    assert "dataset:file:/warehouse/forecast" in {node["id"] for node in graph}
    assert cli.main(["impact", "--run", ids["actuals"][:8], "--store", url]) == 0
    assert "nyc.forecast" in capsys.readouterr().out
    # --since: runs started at or after it, named in the answer; a time without its offset, or with --run, is exit 2
    assert cli.main(["impact", "nyc.raw", "--since", "2025-02-01T00:00:03Z", "--store", url, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["since"].startswith("2025-02-01T00:00:03") and answer["runs"]
    assert all(run["startedAt"] >= answer["since"] for run in answer["runs"])
    assert cli.main(["impact", "nyc.raw", "--since", "2025-02-01T00:00:03Z", "--store", url]) == 0
    assert "(started since 2025-02-01T00:00:03" in capsys.readouterr().out
    assert cli.main(["impact", "nyc.raw", "--since", "2025-02-01T00:00:03", "--store", url]) == 2
    assert "--since" in capsys.readouterr().err
    assert cli.main(["impact", "--run", ids["actuals"][:8], "--since", "2025-02-01T00:00:03Z", "--store", url]) == 2
    assert "not a run's" in capsys.readouterr().err


def test_lineage_validate_names_a_line_that_is_no_event_and_checks_the_rest(tmp_path, monkeypatch, capsys):
    """`lineage validate` read the event files with ``json.loads`` per line: a torn line was a traceback, and a line
    holding JSON that is not an object an AttributeError, instead of an error naming the line among the others."""
    from include.core import settings
    from tests.unit.test_lineage_reads_survive_bad_events import good_event

    paths = settings.Paths(tmp_path / "var")
    paths.lineage.mkdir(parents=True)
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(paths.var))
    valid = json.dumps(good_event("2025-02-01T00:00:00Z"))
    paths.lineage_events.write_text(valid + "\n")
    assert cli.main(["validate"]) == 0
    assert ", 0 errors" in capsys.readouterr().out
    unschemed = good_event("2025-02-01T00:00:00Z")
    del unschemed["run"]["facets"]["nominalTime"]["_producer"]  # a standard facet without its required _producer
    paths.lineage_events.write_text("\n".join([valid, '{"eventType": "COMPL', "[1, 2]", json.dumps(unschemed)]) + "\n")
    assert cli.main(["validate"]) == 1
    printed = capsys.readouterr().out
    assert f"{paths.lineage_events}:2: not valid JSON" in printed
    assert f"{paths.lineage_events}:3: an OpenLineage event is a JSON object, not list" in printed
    assert (
        f'{paths.lineage_events}:4 (COMPLETE job-t): facet nominalTime: at $: "_producer" is a required property'
        in printed
    )
    assert printed.rstrip().endswith(", 4 errors"), printed  # the event schema's own error for line 4 too


@pytest.fixture
def served_store(tmp_path):
    """``create_app`` served by uvicorn on 127.0.0.1, as ``lineage serve`` does."""
    import threading

    import uvicorn

    from include.lineage.api.server import create_app
    from tests.support import free_port

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(f"sqlite:///{tmp_path / 'served.db'}"), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def test_http_transport_posts_to_the_endpoint_and_marquez_clients_read_it_back(served_store):
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    events, _ = _pipeline_events()
    plain = HttpTransport(HttpConfig.from_dict({"type": "http", "url": served_store, "endpoint": "api/v1/lineage"}))
    gzipped = HttpTransport(
        HttpConfig.from_dict({"type": "http", "url": served_store, "endpoint": "api/v1/lineage", "compression": "gzip"})
    )
    for index, event in enumerate(events):
        (gzipped if index % 2 else plain).emit(event)
    plain.emit(events[0])
    assert requests.get(f"{served_store}/api/v1/health", timeout=5).json()["events"] == len(events)
    graph = requests.get(
        f"{served_store}/api/v1/lineage", params={"nodeId": "dataset:file:/warehouse/actuals", "depth": 10}, timeout=5
    ).json()["graph"]
    ids = {node["id"] for node in graph}
    assert {
        "dataset:file:/warehouse/raw",
        "dataset:file:/warehouse/forecast",
        f"job:{NS}:dag.actuals",
    } <= ids  # both directions
    columns = requests.get(
        f"{served_store}/api/v1/column-lineage",
        params={"nodeId": "datasetField:file:/warehouse/forecast:rides"},
        timeout=5,
    )
    assert "datasetField:file:/warehouse/raw:unique_row_id" in {node["id"] for node in columns.json()["graph"]}
    unknown = requests.get(f"{served_store}/api/v1/lineage", params={"nodeId": "nyc.forcast"}, timeout=5)
    assert unknown.status_code == 404 and "nyc.forecast" in unknown.json()["detail"]
    invalid = requests.post(
        f"{served_store}/api/v1/lineage", json={"eventTime": "2025-01-01T00:00:00Z", "run": {}, "job": {}}, timeout=5
    )
    assert invalid.status_code == 422 and "runId" in invalid.json()["detail"]  # as Marquez: @NotNull runId


# ----------------------------------------------------------------------------- several events of one run, merged
def _plain_event(event_type: str, run_id: str, time: str, inputs=(), outputs=(), run_facets=None, job_facets=None):
    """An event as a dict, facets of any shape (``{"value": ...}``)."""
    return {
        "eventType": event_type,
        "eventTime": time,
        "producer": "https://example.com/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": run_id, "facets": run_facets or {}},
        "job": {"namespace": NS, "name": "merged", "facets": job_facets or {}},
        "inputs": [{"namespace": "file", "name": name, "facets": {}} for name in inputs],
        "outputs": [
            {"namespace": "file", "name": name, "facets": facets or {}}
            for name, facets in (outputs.items() if isinstance(outputs, dict) else ((o, None) for o in outputs))
        ],
    }


def _facet(value: str) -> dict:
    return {"_producer": "https://example.com/tests", "_schemaURL": "https://example.com/facet.json", "value": value}


def test_events_of_one_run_with_the_same_type_and_time_are_all_kept_and_their_datasets_unioned(store):
    run_id = str(uuid.uuid4())
    at = "2025-02-01T00:00:05Z"
    first = _plain_event("COMPLETE", run_id, at, inputs=["/a"], outputs=["/out"])
    second = _plain_event("COMPLETE", run_id, at, inputs=["/b"], outputs=["/out", "/side"])
    result = store.ingest([first, second])
    assert (result.new, result.duplicates) == (2, 0)  # was (1, 1): /b and /side were never seen
    assert store.ingest([second, first]).new == 0  # posted again: idempotent
    queries = LineageQueries(store)
    run = queries.run_details(run_id)
    assert sorted(d["name"] for d in run["inputs"]) == ["/a", "/b"]
    assert sorted(d["name"] for d in run["outputs"]) == ["/out", "/side"]
    with store.engine.connect() as conn:
        version = conn.execute(
            select(job_versions_table.c.inputs, job_versions_table.c.outputs)
            .join(runs_table, runs_table.c.job_version_id == job_versions_table.c.id)
            .where(runs_table.c.id == run_id)
        ).one()
    assert json.loads(version.inputs) == ["file:/a", "file:/b"]
    assert json.loads(version.outputs) == ["file:/out", "file:/side"]
    assert {n.name for n in queries.upstream("dataset:file:/out").datasets()} == {"/a", "/b"}


# Marquez keeps each event's facets in run_facets / job_facets / dataset_facets, keyed by the lineage event, and reads
# them back ordered by event time, a later one replacing an earlier one of the same name, whole
# (api/src/main/java/marquez/db/RunDao.java: JSON_AGG(rf.facet ORDER BY rf.lineage_event_time ASC) FROM
# run_facets_view; api/src/main/java/marquez/db/mappers/MapperUtils.java toFacetsOrNull: "newer facets will be added
# or override older facets"). Ours: per name, the latest event time wins; on a tie, the later-ingested event.
@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_facets_merge_per_name_the_latest_event_time_winning_in_any_arrival_order(tmp_path, order):
    run_id = str(uuid.uuid4())

    def facets(time: str, names: str) -> dict:
        return {name: _facet(f"{name}@{time[-3:-1]}") for name in names}

    def event(event_type: str, time: str, names: str) -> dict:
        return _plain_event(
            event_type,
            run_id,
            time,
            outputs={"/out": facets(time, names)},
            run_facets=facets(time, names),
            job_facets=facets(time, names),
        )

    events = [
        event("START", "2025-02-01T00:00:01Z", "xy"),
        event("COMPLETE", "2025-02-01T00:00:03Z", "x"),
        event("RUNNING", "2025-02-01T00:00:02Z", "xyz"),
    ]
    with LineageStore(f"sqlite:///{tmp_path / 'facets.db'}") as store:
        store.ingest([events[i] for i in order])
        with store.engine.connect() as conn:
            stored = [
                json.loads(conn.execute(select(runs_table.c.facets)).scalar_one()),
                json.loads(conn.execute(select(jobs_table.c.facets)).scalar_one()),
                json.loads(conn.execute(select(datasets_table.c.facets)).scalar_one()),
            ]
    for merged in stored:  # was, in the order 0, 1, 2: y@01, the earlier event's, for it came after a later one
        assert {name: facet["value"] for name, facet in merged.items()} == {"x": "x@03", "y": "y@02", "z": "z@02"}


def test_facets_of_events_at_the_same_time_the_later_ingested_one_wins(store):
    run_id = str(uuid.uuid4())
    at = "2025-02-01T00:00:01Z"
    first = _plain_event("RUNNING", run_id, at, run_facets={"progress": _facet("first")})
    second = _plain_event("RUNNING", run_id, at, run_facets={"progress": _facet("second")})
    store.ingest([first])
    store.ingest([second])
    store.ingest([first])  # a duplicate is not ingested again: it does not win now
    with store.engine.connect() as conn:
        facets, times = conn.execute(select(runs_table.c.facets, runs_table.c.facet_times)).one()
    assert json.loads(facets)["progress"]["value"] == "second"
    assert json.loads(times)["progress"] == ["2025-02-01T00:00:01.000000Z", 2]  # (event time, event id)


# ----------------------------------------------------------------------------- a file is all or nothing
def _lines(*events) -> str:
    return "".join((event if isinstance(event, str) else json.dumps(event)) + "\n" for event in events)


def test_a_file_with_a_bad_event_stores_none_of_its_events_and_the_other_files_are_ingested(store, tmp_path):
    def event(job: str) -> dict:
        return _event("COMPLETE", job, str(uuid.uuid4()), "2025-01-01T00:00:00Z")

    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    before.write_text(_lines(event("a"), event("b")))
    after.write_text(_lines(event("c")))
    unreadable = tmp_path / "unreadable.jsonl"
    unreadable.write_text(_lines(event("d"), event("e"), "{not json"))
    refused = tmp_path / "refused.jsonl"  # passes the shape check, but the store cannot keep its second event
    odd = event("g")
    odd["outputs"] = [{"namespace": "file", "name": "/x", "facets": ["not", "an", "object"]}]
    refused.write_text(_lines(event("f"), odd))

    with pytest.raises(UnreadableEventFileError) as failed:
        store.ingest_files([before, unreadable, refused, after])
    error = failed.value
    assert (error.file, error.line) == (str(unreadable), 3)  # the first bad file, at its first bad line
    assert [type(e) for e in error.errors] == [UnreadableEventFileError, UnreadableEventFileError]  # both named
    assert str(error.errors[1]).startswith(f"{refused}:2: ")
    assert (error.ingested.read, error.ingested.new) == (3, 3)  # before.jsonl and after.jsonl: the call went on
    with store.engine.connect() as conn:
        assert sorted(conn.execute(select(events_table.c.job_name)).scalars()) == ["a", "b", "c"]
        assert sorted(conn.execute(select(jobs_table.c.name)).scalars()) == ["a", "b", "c"]  # nothing of d, e, f
    with pytest.raises(UnreadableEventFileError) as alone:  # check_event refuses a facet that is not an object
        store.ingest_files([refused])
    assert str(alone.value) == f"{refused}:2: outputs[0].facets is a list, not an object of facets"
    unreadable.write_text(_lines(event("d"), event("e")))
    result = store.ingest_files([before, unreadable, after])
    assert (result.read, result.new) == (5, 2)


def test_an_event_file_is_stored_as_the_same_events_given_one_by_one(tmp_path):
    """``lineage ingest`` of a file (read and checked whole first) keeps the rows the same events ingested directly
    keep: payload, key, Marquez's view."""
    run_id = str(uuid.uuid4())
    events = [
        _event("START", "naïve_job", run_id, "2025-01-01T00:00:00Z", inputs=[_table("raw", "v1", [("é", "string")])]),
        _event("COMPLETE", "naïve_job", run_id, "2025-01-01T00:01:00Z", outputs=[_table("out", "v2", output=True)]),
        {**_event("COMPLETE", "other", str(uuid.uuid4()), "2025-01-01T00:02:00+02:00"), "extra": {"ü": [1, 2.5]}},
    ]
    file = tmp_path / "events.jsonl"
    file.write_text(_lines(*events), encoding="utf-8")
    rows = []
    for name, fill in (("file", lambda store: store.ingest_files([file])), ("direct", lambda s: s.ingest(events))):
        with LineageStore(f"sqlite:///{tmp_path / name}.db") as store:
            fill(store)
            e = events_table.c
            with store.engine.connect() as conn:
                rows.append(
                    [
                        (row.dedup_key, store.packer.text(conn, row.id, row.payload, row.packed), row.marquez)
                        for row in conn.execute(
                            select(e.id, e.dedup_key, e.payload, e.packed, e.marquez).order_by(e.id)
                        )
                    ]
                )
    assert rows[0] == rows[1] and len(rows[0]) == 3 and all(marquez for _, _, marquez in rows[0])
    assert [json.loads(payload)["job"]["name"] for _, payload, _ in rows[0]] == ["naïve_job", "naïve_job", "other"]


def test_lineage_ingest_reports_every_bad_file_and_what_the_good_ones_stored(tmp_path, capsys):
    from include.lineage.cli import main

    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text(_lines(_event("COMPLETE", "a", str(uuid.uuid4()), "2025-01-01T00:00:00Z")))
    bad.write_text(_lines(_event("COMPLETE", "b", str(uuid.uuid4()), "2025-01-01T00:00:00Z"), "{not json"))
    code = main(["ingest", str(good), str(bad), "--store", f"sqlite:///{tmp_path / 'store.db'}"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "1 events read, 1 new" in out
    assert f"not stored: {bad}:2:" in err


# ----------------------------------------------------------------------------- gzip-compressed event files
def _texts(events: list[dict]) -> dict[str, str]:
    """An event file's contents in each format ``read_event_file`` takes."""
    return {
        "json lines": _lines(*events),
        "a json list": json.dumps(events, indent=2),
        "one json event": json.dumps(events[0], indent=2),
    }


@pytest.mark.parametrize(
    ("form", "plain_name", "gzip_name"),
    [
        ("json lines", "events.jsonl", "events.jsonl.gz"),
        ("a json list", "events.json", "events.json.gz"),
        ("one json event", "event.json", "event.json.gz"),
        ("json lines", "events.jsonl", "compressed.jsonl"),  # recognised by its first bytes, not by its name
        ("a json list", "events.json", "EVENTS.JSON.GZ"),
    ],
)
def test_a_gzip_event_file_is_ingested_as_the_plain_file_it_holds(store, tmp_path, form, plain_name, gzip_name):
    events, _ = _pipeline_events()
    text = _texts(events)[form]
    plain, compressed = tmp_path / plain_name, tmp_path / gzip_name
    plain.write_text(text)
    compressed.write_bytes(gzip.compress(text.encode()))
    from_plain, from_gzip = read_event_file(plain), read_event_file(compressed)
    assert [item.event for item in from_gzip] == [item.event for item in from_plain]
    assert [item.source.replace(str(compressed), str(plain)) for item in from_gzip] == [
        item.source for item in from_plain
    ], "the same line numbers (or event indexes)"
    expected = 1 if form == "one json event" else len(events)
    assert (store.ingest_files([compressed]).new, store.ingest_files([plain]).new) == (expected, 0)


def test_a_gzip_event_file_on_stdin_is_read_as_the_plain_one(monkeypatch):
    events, _ = _pipeline_events()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(_lines(*events).encode()))))
    read = read_event_file("-")
    assert [item.event for item in read] == events and read[1].source == "<stdin>:2"


def _damaged_gzip(data: bytes) -> dict[str, bytes]:
    compressed = gzip.compress(data)
    return {
        "truncated": compressed[: len(compressed) // 2],
        "cut before its trailer": compressed[:-4],
        "the magic bytes alone": b"\x1f\x8b",
        "garbage after the magic bytes": b"\x1f\x8b" + b"garbage, not a gzip header nor deflate data" * 3,
        "damaged deflate data": compressed[:10] + b"\xff" * 64,
        "a wrong CRC": compressed[:-8] + bytes(4) + compressed[-4:],
        "garbage after the gzip member": compressed + b"not another gzip member",
    }


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        *(("events.jsonl.gz", damage) for damage in _damaged_gzip(b"x")),
        ("events.json.gz", "truncated"),
        ("events.jsonl", "truncated"),  # gzip by its first bytes: damaged, though not named .gz
        ("events.jsonl.gz", "not gzip, named .gz"),
        ("events.json.gz", "an empty file named .gz"),
    ],
)
def test_a_damaged_gzip_event_file_is_unreadable_named_and_stores_nothing(store, tmp_path, name, damage):
    events, _ = _pipeline_events()
    data = _lines(*events).encode()
    contents = {**_damaged_gzip(data), "not gzip, named .gz": data, "an empty file named .gz": b""}
    bad, good = tmp_path / name, tmp_path / "good.jsonl.gz"
    bad.write_bytes(contents[damage])
    good.write_bytes(gzip.compress(_lines(events[0]).encode()))
    with pytest.raises(UnreadableEventFileError) as unreadable:
        read_event_file(bad)
    error = unreadable.value
    assert (error.file, error.line) == (str(bad), None) and str(error).startswith(f"{bad}: ")
    assert "gzip" in error.reason, error.reason
    with pytest.raises(UnreadableEventFileError) as failed:  # all or nothing: none of its events, the good file's
        store.ingest_files([bad, good])
    assert str(failed.value) == str(error) and (failed.value.ingested.read, failed.value.ingested.new) == (1, 1)
    with store.engine.connect() as conn:
        assert conn.execute(select(events_table.c.job_name)).scalars().all() == [events[0]["job"]["name"]]


@pytest.mark.parametrize(
    ("number", "bad_line"),
    [
        (1, "{not json"),
        (2, '{"eventTime": "2025-01-01T00:00:00Z", "run": {}, "job": {}}'),
        (6, "[1, 2]"),
        (9, "\udcff not UTF-8"),
    ],
)
def test_a_bad_line_of_a_gzip_event_file_is_named_by_its_line_number(store, tmp_path, number, bad_line):
    events, _ = _pipeline_events()
    lines = [json.dumps(event) for event in events[: number - 1]]
    if number > 2:
        lines[1] = ""  # a blank line counts, as in the plain file
    text = "\n".join([*lines, bad_line, json.dumps(events[-1])]) + "\n"
    data = text.encode("utf-8", "surrogateescape")  # \udcff: the byte 0xff
    plain, compressed = tmp_path / "events.jsonl", tmp_path / "events.jsonl.gz"
    plain.write_bytes(data)
    compressed.write_bytes(gzip.compress(data))
    with pytest.raises(UnreadableEventFileError) as from_plain:
        read_event_file(plain)
    with pytest.raises(UnreadableEventFileError) as from_gzip:
        store.ingest_files([compressed])
    assert (from_gzip.value.file, from_gzip.value.line) == (str(compressed), number)
    assert str(from_gzip.value) == str(from_plain.value).replace(str(plain), str(compressed))
    with store.engine.connect() as conn:
        assert conn.execute(select(events_table.c.id)).first() is None


def test_lineage_ingest_stores_the_events_of_a_gzip_event_file(tmp_path, capsys):
    events, _ = _pipeline_events()
    compressed = tmp_path / "events.jsonl.gz"
    compressed.write_bytes(gzip.compress(_lines(*events).encode()))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert cli.main(["ingest", str(compressed), "--store", url]) == 0
    assert f"{len(events)} events read from 1 file(s), {len(events)} new" in capsys.readouterr().out
    with LineageStore(url) as stored, stored.engine.connect() as conn:
        assert conn.execute(select(events_table.c.job_name).order_by(events_table.c.id)).scalars().all() == [
            event["job"]["name"] for event in events
        ]
