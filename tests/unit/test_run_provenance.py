"""Run provenance: ``GET /api/v1/runlineage/upstream`` in Marquez's shape (``LineageDao.getUpstreamRuns``,
``UpstreamRunRowMapper``, ``LineageService.upstream``; MarquezProject/marquez 0.51, ``api/src/main/java/marquez``),
``lineage upstream --run`` and ``lineage diff --upstream``, on a three-level chain ingest -> merge -> forecast that is
re-ingested and re-run with an added input."""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient

from include.lineage import cli
from include.lineage.api.server import create_app
from include.lineage.store import LineageStore
from include.lineage.store.packing import PayloadPacker

NS = "provenance-tests"
PRODUCER = "https://example.com/tests/provenance"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
T = "2025-03-01T{:02d}:00:00+00:00".format


def ds(name: str, version: str | None = None) -> dict:
    facets = {}
    if version:
        facets["version"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json",
            "datasetVersion": version,
        }
    return {"namespace": "warehouse", "name": name, "facets": facets}


def run(job: str, hour: int, inputs=(), outputs=(), code: str = "v1") -> tuple[str, list[dict]]:
    run_id = str(uuid.uuid4())
    facets = {"sourceCode": {"_producer": PRODUCER, "_schemaURL": SCHEMA_URL, "language": "python", "sourceCode": code}}
    return run_id, [
        {
            "eventType": event_type,
            "eventTime": time,
            "producer": PRODUCER,
            "schemaURL": SCHEMA_URL,
            "run": {"runId": run_id, "facets": {}},
            "job": {"namespace": NS, "name": job, "facets": facets},
            "inputs": list(inputs),
            "outputs": list(outputs),
        }
        for event_type, time in (("START", T(hour)), ("COMPLETE", T(hour).replace(":00:00", ":30:00")))
    ]


@pytest.fixture
def chain(tmp_path):
    """ingest writes raw (Iceberg snapshots r1, r2), weather its table (w1), zones_loader a table without versions;
    merge reads raw (the second time also zones: a new input) into merged, forecast reads merged and weather."""
    steps = [
        ("ingest1", run("ingest", 1, [], [ds("raw", "r1")])),
        ("weather1", run("weather", 1, [], [ds("weather", "w1")])),
        ("merge1", run("merge", 2, [ds("raw", "r1")], [ds("merged", "m1")])),
        ("forecast1", run("forecast", 3, [ds("merged", "m1"), ds("weather", "w1")], [ds("forecast", "f1")])),
        ("ingest2", run("ingest", 5, [], [ds("raw", "r2")])),
        ("zones1", run("zones_loader", 5, [], [ds("zones")])),
        ("merge2", run("merge", 6, [ds("raw", "r2"), ds("zones")], [ds("merged", "m2")], code="v2")),
        ("forecast2", run("forecast", 7, [ds("merged", "m2"), ds("weather", "w1")], [ds("forecast", "f2")])),
    ]
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest([event for _, (_, events) in steps for event in events])
        yield store, {name: run_id for name, (run_id, _) in steps}


def upstream(store: LineageStore, run_id: str, depth: int = 20) -> dict:
    response = TestClient(create_app(store=store)).get(
        "/api/v1/runlineage/upstream", params={"runId": run_id, "depth": depth}
    )
    assert response.status_code == 200, response.text
    return response.json()


def summary(result: dict) -> list[tuple]:
    return [
        (
            entry["job"]["name"],
            entry["run"]["id"],
            [(i["name"], i["version"], i["producedByRunId"]) for i in entry["inputs"]],
        )
        for entry in result["runs"]
    ]


def test_runlineage_upstream_lists_the_runs_that_wrote_the_versions_read(chain):
    # LineageDao.getUpstreamRuns: level 0 is the run with the dataset versions it read (runs_input_mapping), each with
    # the run that produced it (dataset_versions.run_uuid -> producedByRunId); the recursion goes on from those runs;
    # ORDER BY depth ASC, job_name ASC, and LineageService.upstream groups the rows by run in that order. A run that
    # read nothing is listed with no inputs (the LEFT JOINs of the initial case).
    store, ids = chain
    result = upstream(store, ids["forecast1"])
    assert summary(result) == [
        ("forecast", ids["forecast1"], [("merged", "m1", ids["merge1"]), ("weather", "w1", ids["weather1"])]),
        ("merge", ids["merge1"], [("raw", "r1", ids["ingest1"])]),
        ("weather", ids["weather1"], []),
        ("ingest", ids["ingest1"], []),
    ]
    # UpstreamRunRowMapper / LineageService.UpstreamRun: {"job", "run", "inputs"} and no more
    first = result["runs"][0]
    assert list(first) == ["job", "run", "inputs"]
    assert set(first["job"]) == {"namespace", "name", "version"} and first["job"]["namespace"] == NS
    assert first["run"] == {
        "id": ids["forecast1"],
        "start": "2025-03-01T03:00:00.000000Z",
        "end": "2025-03-01T03:30:00.000000Z",
        "status": "COMPLETED",
    }
    assert set(first["inputs"][0]) == {"namespace", "name", "version", "producedByRunId"}


def test_a_reingest_makes_a_new_version_the_next_run_reaches_and_the_old_run_keeps_the_old(chain):
    store, ids = chain
    assert summary(upstream(store, ids["forecast2"])) == [
        ("forecast", ids["forecast2"], [("merged", "m2", ids["merge2"]), ("weather", "w1", ids["weather1"])]),
        # zones has no version facet: the latest write of it before merge2 started, by zones_loader's run
        ("merge", ids["merge2"], [("raw", "r2", ids["ingest2"]), ("zones", None, ids["zones1"])]),
        ("weather", ids["weather1"], []),
        ("ingest", ids["ingest2"], []),
        ("zones_loader", ids["zones1"], []),
    ]
    old = summary(upstream(store, ids["forecast1"]))
    assert [run_id for _, run_id, _ in old] == [ids["forecast1"], ids["merge1"], ids["weather1"], ids["ingest1"]]


def test_depth_lists_runs_up_to_that_level_and_their_inputs(chain):
    # LineageDao.getUpstreamRuns: the recursion stops at "depth < :depth": the runs of the last level are listed with
    # their inputs and producers, the producers themselves are not.
    store, ids = chain
    assert summary(upstream(store, ids["forecast2"], depth=0)) == [
        ("forecast", ids["forecast2"], [("merged", "m2", ids["merge2"]), ("weather", "w1", ids["weather1"])])
    ]
    one = summary(upstream(store, ids["forecast2"], depth=1))
    assert [job for job, _, _ in one] == ["forecast", "merge", "weather"]
    assert one[1][2] == [("raw", "r2", ids["ingest2"]), ("zones", None, ids["zones1"])]


def test_a_run_that_read_a_version_it_wrote_itself_is_not_followed_into_itself(tmp_path):
    # LineageDao.getUpstreamRuns: "WHERE ... ur.u_r_uuid <> ur.r_uuid": avoid following cycles (a MERGE statement).
    compact_id, events = run("compact", 1, [ds("table", "s5")], [ds("table", "s5")])
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest(events)
        assert summary(upstream(store, compact_id)) == [("compact", compact_id, [("table", "s5", compact_id)])]


def test_an_unknown_run_is_a_404_and_the_cli_exits_2(chain, capsys):
    # OpenLineageResource.getRunLineageUpstream: throwIfNotExists(runId) -> RunNotFoundException (404).
    store, _ = chain
    response = TestClient(create_app(store=store)).get(
        "/api/v1/runlineage/upstream", params={"runId": str(uuid.uuid4())}
    )
    assert response.status_code == 404 and "no run named" in response.json()["message"]
    assert cli.main(["upstream", "--run", "no-such-run", "--store", store.url]) == 2
    assert "no run named 'no-such-run'" in capsys.readouterr().err
    assert cli.main(["upstream", "--store", store.url]) == 2
    assert "give a NODE or --run RUN_ID" in capsys.readouterr().err


def test_cli_upstream_run_prints_the_provenance_tree_and_marquezs_json(chain, capsys):
    store, ids = chain
    assert cli.main(["upstream", "--run", ids["forecast2"], "--store", store.url]) == 0
    tree = capsys.readouterr().out
    assert tree.splitlines()[0].startswith(f"run {ids['forecast2']}  forecast  COMPLETED  2025-03-01T07:00:00")
    assert "read warehouse:merged  version m2" in tree and f"written by run {ids['merge2']}  merge" in tree
    assert "read warehouse:raw  version r2" in tree and f"written by run {ids['ingest2']}  ingest" in tree
    assert "read warehouse:zones  unversioned  (latest write before the run)" in tree
    assert tree.index("merged") < tree.index("raw") < tree.index("weather")  # depth first, as a tree
    assert cli.main(["upstream", "--run", ids["forecast2"], "--store", store.url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == upstream(store, ids["forecast2"])


def test_diff_upstream_names_the_added_input_and_the_versions_that_changed(chain, capsys):
    store, ids = chain
    assert cli.main(["diff", ids["forecast1"], ids["forecast2"], "--upstream", "--store", store.url, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["upstream"]
    assert result["jobVersion"] is None  # forecast itself did not change
    jobs = {item["job"]: item for item in result["jobs"]}
    assert jobs["merge"]["change"] == "other runs" and jobs["merge"]["runs"] == [[ids["merge1"]], [ids["merge2"]]]
    assert jobs["merge"]["jobVersion"]["inputsAdded"] == ["warehouse:zones"]
    assert jobs["merge"]["jobVersion"]["inputsRemoved"] == [] and jobs["merge"]["jobVersion"]["codeChanged"] is True
    assert jobs["weather"]["change"] == "same runs"
    assert jobs["ingest"]["change"] == "other runs" and jobs["ingest"]["jobVersion"] is None
    assert jobs["zones_loader"]["change"] == "only in B"
    versions = {(item["reader"], item["dataset"]): (item["A"], item["B"]) for item in result["datasetVersions"]}
    assert versions[("(the run)", "warehouse:merged")] == (
        [{"version": "m1", "producedByRunId": ids["merge1"]}],
        [{"version": "m2", "producedByRunId": ids["merge2"]}],
    )
    assert versions[("merge", "warehouse:raw")][1] == [{"version": "r2", "producedByRunId": ids["ingest2"]}]
    assert versions[("merge", "warehouse:zones")][0] == []
    assert ("(the run)", "warehouse:weather") not in versions  # the same version, by the same run
    assert cli.main(["diff", ids["forecast1"], ids["forecast2"], "--upstream", "--store", store.url]) == 0
    text = capsys.readouterr().out
    assert "upstream (what A and B read, who wrote it, how those runs differ):" in text
    assert "+ input warehouse:zones, code changed" in text and "zones_loader  (2 levels up): only in B" in text


def _with_parent(parent_job: str, parent_run: str, events: list[dict]) -> list[dict]:
    for event in events:
        event["run"]["facets"]["parent"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
            "run": {"runId": parent_run},
            "job": {"namespace": NS, "name": parent_job},
        }
    return events


def test_diff_upstream_of_two_dag_runs_compares_them_through_their_task_runs(tmp_path, capsys):
    """`lineage runs DAG` lists DAG runs, which read nothing themselves: the diff of two of them compares their task
    runs' provenance, as its plain part compares their task runs' datasets (the demo's two forecasts)."""
    steps = {"load": run("load", 1, [], [ds("raw", "r1")]), "weather": run("weather", 1, [], [ds("weather", "w1")])}
    events = steps["load"][1] + steps["weather"][1]
    dag_runs = {}
    for key, hour, inputs in (("A", 2, [ds("raw", "r1")]), ("B", 4, [ds("raw", "r1"), ds("weather", "w1")])):
        dag_id, dag_events = run("forecast_dag", hour)
        for event in dag_events:
            event["inputs"] = event["outputs"] = []
        task_id, task_events = run("forecast_dag.train", hour, inputs, [ds("model", key)])
        dag_runs[key], steps[f"train{key}"] = dag_id, (task_id, task_events)
        events += dag_events + _with_parent("forecast_dag", dag_id, task_events)
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest(events)
        assert cli.main(["diff", dag_runs["A"], dag_runs["B"], "--upstream", "--store", store.url, "--json"]) == 0
        result = json.loads(capsys.readouterr().out)["upstream"]
        jobs = {item["job"]: item for item in result["jobs"]}
        train = jobs["forecast_dag.train"]
        assert train["depth"] == 0 and train["runs"] == [[steps["trainA"][0]], [steps["trainB"][0]]]
        assert train["jobVersion"]["inputsAdded"] == ["warehouse:weather"]
        assert jobs["weather"]["change"] == "only in B" and jobs["load"]["change"] == "same runs"
        versions = {(item["reader"], item["dataset"]): item["B"] for item in result["datasetVersions"]}
        assert versions[("forecast_dag.train", "warehouse:weather")] == [
            {"version": "w1", "producedByRunId": steps["weather"][0]}
        ]
        assert cli.main(["diff", dag_runs["A"], dag_runs["B"], "--upstream", "--store", store.url]) == 0
        text = capsys.readouterr().out
        assert "forecast_dag.train  (a task of the run)" in text and "+ input warehouse:weather" in text
        assert "(no upstream runs" not in text
        assert cli.main(["upstream", "--run", dag_runs["B"], "--store", store.url]) == 0
        tree = capsys.readouterr().out
        assert "(it read no datasets)" in tree  # Marquez's answer for a run without inputs, and ours in --json
        assert f"lineage upstream --run {steps['trainB'][0]}   # forecast_dag.train" in tree


def test_upstream_run_of_a_job_or_dataset_as_of_a_time_reaches_the_versions_current_then(chain, capsys):
    # The seeds' question: the forecast was good at 04:00 and bad at 08:00; what was it made of, each time?
    store, ids = chain
    for ref, as_of, expected in (
        ("warehouse:forecast", "2025-03-01T04:00:00Z", "forecast1"),
        ("warehouse:forecast", "2025-03-01T08:00:00+00:00", "forecast2"),
        ("warehouse:forecast", "2025-03-01T07:10:00Z", "forecast1"),  # forecast2 had started, not yet written
        (f"job:{NS}:forecast", "2025-03-01T07:10:00Z", "forecast2"),  # a job: its latest run started by then
        ("forecast", "2025-03-01T03:00:00+00:00", "forecast1"),
        ("forecast", None, "forecast2"),
        ("warehouse:merged", "2025-03-01T06:45:00+01:00", "merge1"),  # 05:45 UTC: merge2 had not ended
    ):
        argv = ["upstream", "--run", ref, "--store", store.url, "--json"]
        assert cli.main(argv + (["--as-of", as_of] if as_of else [])) == 0, (ref, as_of)
        assert json.loads(capsys.readouterr().out) == upstream(store, ids[expected]), (ref, as_of)
    assert (
        cli.main(["upstream", "--run", "warehouse:forecast", "--as-of", "2025-03-01T04:00:00Z", "--store", store.url])
        == 0
    )
    tree = capsys.readouterr().out
    assert "read warehouse:raw  version r1  written 2025-03-01T01:00:00" in tree, tree
    assert f"written by run {ids['ingest1']}" in tree and ids["ingest2"] not in tree


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--as-of", "2025-03-01T04:00:00"], "not an ISO-8601 time with a UTC offset"),
        (["--as-of", "yesterday"], "not an ISO-8601 time with a UTC offset"),
        (["--as-of", "2025-03-01T00:30:00Z"], "a run that wrote it by"),  # nothing written yet
        (["--all-history"], "--all-history is for a NODE's graph"),
    ],
)
def test_upstream_run_as_of_refuses_what_names_no_run(chain, capsys, argv, message):
    store, _ = chain
    assert cli.main(["upstream", "--run", "warehouse:forecast", *argv, "--store", store.url]) == 2
    assert message in capsys.readouterr().err


def test_as_of_with_a_run_id_is_refused_a_runs_provenance_does_not_change(chain, capsys):
    store, ids = chain
    assert (
        cli.main(["upstream", "--run", ids["forecast1"], "--as-of", "2025-03-01T04:00:00Z", "--store", store.url]) == 2
    )
    assert "is a run: its provenance does not change with time" in capsys.readouterr().err


def _dag_event(run_id: str, event_type: str, time: str, logical_date: str, clear_number: int = 0) -> dict:
    facet = {
        "_producer": PRODUCER,
        "_schemaURL": SCHEMA_URL,
        "dag": {"dag_id": "ingest"},
        "dagRun": {"dag_id": "ingest", "logical_date": logical_date, "clear_number": clear_number, "run_id": "manual"},
    }
    return {
        "eventType": event_type,
        "eventTime": time,
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
        "run": {"runId": run_id, "facets": {"airflowDagRun": facet}},
        "job": {"namespace": NS, "name": "ingest_dag", "facets": {}},
        "inputs": [],
        "outputs": [],
    }


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        # the demo's case: the same logical date again, so the provider derives the same run id; a START after the end
        (("2025-03-02T00:00:00+00:00", "2025-02-01T00:00:00+00:00", 0), "a START at 2025-03-02T00:00:00"),
        # events of another DAG run (another logical date or clear number) under the same run id
        (("2025-03-01T00:10:00+00:00", "2025-02-02T00:00:00+00:00", 0), "events of 2 Airflow DAG runs"),
        (("2025-03-01T00:10:00+00:00", "2025-02-01T00:00:00+00:00", 1), "clear_number 1"),
    ],
)
def test_ingest_and_runs_say_when_one_run_id_holds_two_runs(tmp_path, capsys, second, reason):
    run_id = str(uuid.uuid4())
    time, logical_date, clear_number = second
    first = [
        _dag_event(run_id, "START", "2025-03-01T00:00:00+00:00", "2025-02-01T00:00:00+00:00"),
        _dag_event(run_id, "COMPLETE", "2025-03-01T00:05:00+00:00", "2025-02-01T00:00:00+00:00"),
    ]
    again = [
        _dag_event(run_id, "START", time, logical_date, clear_number),
        _dag_event(run_id, "COMPLETE", time.replace(":00+00:00", ":30+00:00"), logical_date, clear_number),
    ]
    files = []
    for index, events in enumerate((first, again)):
        files.append(tmp_path / f"events{index}.jsonl")
        files[-1].write_text("".join(json.dumps(event) + "\n" for event in events))
    store = f"sqlite:///{tmp_path / 'store.db'}"
    assert cli.main(["ingest", str(files[0]), "--store", store]) == 0
    assert "warning" not in capsys.readouterr().err, "one run's events are not a merge"
    assert cli.main(["ingest", str(files[1]), "--store", store]) == 0
    err = capsys.readouterr().err
    assert f"warning: run {run_id} (ingest_dag) holds the events of more than one run" in err and reason in err, err
    assert cli.main(["runs", "ingest_dag", "--store", store]) == 0
    assert f"warning: run {run_id}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        (("2025-03-02T00:00:00+00:00", "2025-02-01T00:00:00+00:00", 0), "a START at 2025-03-02T00:00:00"),
        (("2025-03-01T00:10:00+00:00", "2025-02-02T00:00:00+00:00", 0), "events of 2 Airflow DAG runs"),
        (("2025-03-01T00:10:00+00:00", "2025-02-01T00:00:00+00:00", 1), "clear_number 1"),
        (("2025-03-01T00:01:00+00:00", "2025-02-01T00:00:00+00:00", 0), None),  # one run's events again: no merge
    ],
)
def test_a_run_made_by_the_ingest_is_judged_from_its_events_as_the_store_judges_it(tmp_path, capsys, second, reason):
    """The runs an ingest makes are judged from the events it read (``IngestResult.created_runs``), the others from
    their stored events: both give the same answer, and ``lineage ingest`` of one file holding both runs warns."""
    run_id = str(uuid.uuid4())
    time, logical_date, clear_number = second
    events = [
        _dag_event(run_id, "START", "2025-03-01T00:00:00+00:00", "2025-02-01T00:00:00+00:00"),
        _dag_event(run_id, "COMPLETE", "2025-03-01T00:05:00+00:00", "2025-02-01T00:00:00+00:00"),
        _dag_event(run_id, "START", time, logical_date, clear_number),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert cli.main(["ingest", str(path), "--store", url]) == 0
    err = capsys.readouterr().err
    assert (reason in err) if reason else ("warning" not in err), err
    with LineageStore(f"sqlite:///{tmp_path / 'again.db'}") as store:
        result = store.ingest(events)
        assert set(result.created_runs) == {run_id} and len(result.created_runs[run_id]) == 3
        queries = LineageQueries(store)
        assert queries.merged_runs([], result.created_runs) == queries.merged_runs([run_id])


def test_ingest_checks_only_the_runs_it_added_events_to_not_the_whole_store(tmp_path, capsys, monkeypatch):
    """``lineage ingest`` asks whether its runs hold two runs' events of the runs it added events to: those it made
    from the events it read, those it continued from their stored events; the store's other events are never
    unpacked again (each command of a year's build unpacked every event stored so far, a quarter of its time 140,000
    events in and growing with the store), and a merge warned of once is not repeated by every later ingest."""
    merged, continued, made = (str(uuid.uuid4()) for _ in range(3))
    store = f"sqlite:///{tmp_path / 'store.db'}"

    def ingest(name: str, *events: dict) -> None:
        path = tmp_path / name
        path.write_text("".join(json.dumps(event) + "\n" for event in events))
        assert cli.main(["ingest", str(path), "--store", store]) == 0

    ingest("merged0.jsonl", _dag_event(merged, "START", "2025-03-01T00:00:00+00:00", "2025-02-01T00:00:00+00:00"))
    ingest("merged1.jsonl", _dag_event(merged, "START", "2025-03-01T00:10:00+00:00", "2025-02-02T00:00:00+00:00"))
    assert f"warning: run {merged}" in capsys.readouterr().err
    ingest("started.jsonl", _dag_event(continued, "START", "2025-04-01T00:00:00+00:00", "2025-03-31T00:00:00+00:00"))
    unpacked: list[int] = []
    text_of = PayloadPacker.text

    def counting(self, conn, event_id, payload, packed):
        unpacked.append(event_id)
        return text_of(self, conn, event_id, payload, packed)

    monkeypatch.setattr(PayloadPacker, "text", counting)
    ingest(
        "later.jsonl",
        _dag_event(continued, "COMPLETE", "2025-04-01T00:05:00+00:00", "2025-03-31T00:00:00+00:00"),
        _dag_event(made, "START", "2025-04-01T01:00:00+00:00", "2025-03-31T01:00:00+00:00"),
        _dag_event(made, "COMPLETE", "2025-04-01T01:05:00+00:00", "2025-03-31T01:00:00+00:00"),
    )
    assert "warning" not in capsys.readouterr().err, "the earlier merge is not this ingest's"
    with LineageStore(store) as opened, opened.engine.connect() as conn:
        stored = set(conn.execute(text("SELECT id FROM lineage_events WHERE run_id = :r"), {"r": continued}).scalars())
    assert len(stored) == 2 and sorted(unpacked) == sorted(stored), "only the continued run's events are unpacked"


def test_a_run_with_start_running_and_complete_events_is_not_reported_as_merged(chain, capsys):
    store, ids = chain
    running = run("forecast", 9)[1][0] | {"eventType": "RUNNING", "eventTime": T(9).replace(":00:00", ":10:00")}
    running["run"] = {"runId": ids["forecast2"], "facets": {}}
    store.ingest([running])
    assert cli.main(["runs", "forecast", "--store", store.url]) == 0
    assert "warning" not in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------------
# The provenance query (one recursive query, then one for the runs and their inputs) against the straightforward walk
# it replaced: level by level, each input's writer asked on its own, on random histories.
from hypothesis import HealthCheck, given  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from sqlalchemy import text  # noqa: E402

from include.lineage.queries import LineageQueries  # noqa: E402
from tests.unit.test_store_batch_writes import WRITE_TIME_MISMATCHES  # noqa: E402

_READS = text(
    "SELECT rd.dataset_id, rd.dataset_version_id, d.namespace, d.name, dv.version, dv.created_by_run_id"
    " FROM lineage_run_datasets rd JOIN lineage_datasets d ON d.id = rd.dataset_id"
    " LEFT JOIN lineage_dataset_versions dv ON dv.id = rd.dataset_version_id"
    " WHERE rd.run_id = :run AND rd.direction = 'input'"
)
_WRITES_BEFORE = text(
    "SELECT rd.run_id, dv.version FROM lineage_run_datasets rd JOIN lineage_runs r ON r.id = rd.run_id"
    " LEFT JOIN lineage_dataset_versions dv ON dv.id = rd.dataset_version_id"
    " WHERE rd.dataset_id = :dataset AND rd.direction = 'output' AND rd.run_id <> :run"
    " AND COALESCE(r.ended_at, r.state_time, r.started_at) <= :read_at"
    " ORDER BY COALESCE(r.ended_at, r.state_time, r.started_at) DESC, rd.run_id DESC"
)


def _provenance_by_levels(conn, root: str, depth: int) -> dict[str, tuple[int, list[tuple]]]:
    """run -> (level, [(namespace, name, version, producing run)]): a run's inputs one by one, an input without a
    version read as the latest write by another run ended by the reading run's start, level by level."""
    found: dict[str, tuple[int, list[tuple]]] = {}
    levels, frontier, level = {root: 0}, [root], 0
    while frontier:
        following = []
        for run_id in frontier:
            row = conn.execute(
                text("SELECT started_at, first_event_time, state_time FROM lineage_runs WHERE id = :run"),
                {"run": run_id},
            ).one()
            read_at = row.started_at or row.first_event_time or row.state_time or ""
            inputs = []
            for read in conn.execute(_READS, {"run": run_id}):
                version, writer = read.version, read.created_by_run_id
                if read.dataset_version_id is None:
                    latest = conn.execute(
                        _WRITES_BEFORE, {"dataset": read.dataset_id, "run": run_id, "read_at": read_at}
                    ).first()
                    version, writer = (latest.version, latest.run_id) if latest else (None, None)
                inputs.append((read.namespace, read.name, version, writer))
                if level < depth and writer and writer != run_id and writer not in levels:
                    levels[writer] = level + 1
                    following.append(writer)
            found[run_id] = (level, sorted(inputs))
        frontier, level = following, level + 1
    return found


@st.composite
def _run_histories(draw) -> list[dict]:
    """Runs of four jobs over five datasets: inputs with a version facet (one some run wrote, or not) or without,
    outputs with a version or without, START and COMPLETE at random seconds, arriving in any order, some twice."""
    events = []
    for index in range(draw(st.integers(1, 9))):
        job = f"j{draw(st.integers(0, 3))}"
        start = draw(st.integers(0, 20))
        names = draw(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=4, unique=True))
        split = draw(st.integers(0, len(names)))
        inputs = [ds(name, draw(st.sampled_from([None, "v1", "v2", "v3"]))) for name in names[:split]]
        outputs = [ds(name, draw(st.sampled_from([None, "v1", "v2", "v3"]))) for name in names[split:]]
        run_id = f"run-{index}"
        # outputs said by the START, the COMPLETE or both: a write said early and ended later (the link's write time
        # moves with the run's end, in whichever transaction it comes)
        said = draw(st.sampled_from([{"START"}, {"COMPLETE"}, {"START", "COMPLETE"}]))
        for event_type, second in (("START", start), ("COMPLETE", start + draw(st.integers(0, 5)))):
            events.append(
                {
                    "eventType": event_type,
                    "eventTime": f"2025-03-01T00:00:{second:02d}Z",
                    "producer": PRODUCER,
                    "schemaURL": SCHEMA_URL,
                    "run": {"runId": run_id, "facets": {}},
                    "job": {"namespace": NS, "name": job, "facets": {}},
                    "inputs": inputs if event_type == "COMPLETE" or draw(st.booleans()) else [],
                    "outputs": outputs if event_type in said else [],
                }
            )
    order = draw(st.permutations(events))
    return list(order) + draw(st.lists(st.sampled_from(events), max_size=3))


_BATCH_SIZES = st.sampled_from([1, 2, 5, 1000])  # a run's events in one transaction or spread over several


@pytest.fixture(scope="module")
def empty_store_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("provenance-template") / "store.db"
    LineageStore(f"sqlite:///{path}").close()
    return path


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(events=_run_histories(), batch_size=_BATCH_SIZES)
def test_the_provenance_query_equals_a_level_by_level_walk_on_random_histories(
    empty_store_file, tmp_path, events, batch_size
):
    import shutil

    folder = tmp_path / f"example-{uuid.uuid4().hex}"
    folder.mkdir()
    shutil.copy(empty_store_file, folder / "store.db")
    with LineageStore(f"sqlite:///{folder / 'store.db'}") as store:
        store.ingest(events, batch_size=batch_size)
        queries = LineageQueries(store)
        with store.engine.connect() as conn:
            assert conn.execute(text(WRITE_TIME_MISMATCHES)).all() == []  # what the latest write is looked up by
            run_ids = conn.execute(text("SELECT id FROM lineage_runs ORDER BY id")).scalars().all()
            for run_id in run_ids:
                for depth in (0, 1, 2, 20):
                    expected = _provenance_by_levels(conn, run_id, depth)
                    entries = queries.run_lineage(run_id, depth)["runs"]
                    got = {
                        entry["run"]["id"]: (
                            entry["depth"],
                            sorted(
                                (i["namespace"], i["name"], i["version"], i["producedByRunId"]) for i in entry["inputs"]
                            ),
                        )
                        for entry in entries
                    }
                    assert got == expected, (run_id, depth)
                    assert len(entries) == len(got)  # each run once
                    assert [entry["depth"] for entry in entries] == sorted(entry["depth"] for entry in entries)
    shutil.rmtree(folder)


@pytest.mark.parametrize(
    ("run_facets", "identity"),
    [
        (
            {"airflowDagRun": {"dagRun": {"dag_id": "d", "logical_date": "x", "clear_number": 0}}},
            (("dag_id", "d"), ("logical_date", "x"), ("clear_number", "0")),
        ),
        ({"airflow": {"dagRun": {"dag_id": "d", "run_id": 7}}}, (("dag_id", "d"), ("run_id", "7"))),
        ({"airflowDagRun": {"dagRun": {}}, "airflow": {"dagRun": {"dag_id": "e"}}}, (("dag_id", "e"),)),
        ({"airflowDagRun": "not an object"}, None),
        ({"airflowDagRun": {"dagRun": ["not", "an", "object"]}}, None),
        (["not", "an", "object"], None),
        ({}, None),
    ],
)
def test_the_dag_run_an_events_facets_name_and_what_names_none(run_facets, identity):
    from include.lineage.events import dag_run_identity

    assert dag_run_identity(run_facets) == identity
