"""Know what is missing: each DAG run's lineage reported complete, or what is missing named (``lineage checks``,
``include/lineage/queries/completeness.py``), on events made for each case; the same cases made for real (a killed
Spark driver, a dropped event, a refused line) are in ``tests/integration/test_lineage_completeness_real.py``."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from include.core import settings
from include.lineage import cli
from include.lineage.queries import LineageQueries
from include.lineage.store import LineageStore, dead_letters

NS = "pipeline"
PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/2.20.3"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/integration/spark"
LATER = datetime(2030, 1, 1, tzinfo=UTC)


def _event(kind: str, job: str, run_id: str, minute: int, parent: tuple | None = None, **facets) -> dict:
    run_facets = dict(facets.pop("run_facets", {}))
    if parent is not None:
        run_facets["parent"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json",
            "run": {"runId": parent[0]},
            "job": {"namespace": NS, "name": parent[1]},
        }
    return {
        "eventType": kind,
        "eventTime": f"2025-02-01T00:{minute:02d}:00Z",
        "run": {"runId": run_id, "facets": run_facets},
        "job": {"namespace": NS, "name": job, "facets": facets.pop("job_facets", {})},
        "inputs": [],
        "outputs": [],
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def _job_type(kind: str, integration: str) -> dict:
    return {
        "jobType": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/2-0-3/JobTypeJobFacet.json",
            "processingType": "BATCH",
            "integration": integration,
            "jobType": kind,
        }
    }


SPARK_TASK = {"airflow": {"task": {"operator_class": "LakehouseSparkSubmitOperator"}}}


def _dag_run(store: LineageStore, dag: str, *, complete: bool) -> dict[str, str]:
    """A DAG run of three Spark tasks and one other task; ``complete`` False drops or breaks one thing per case."""
    ids = {name: str(uuid.uuid4()) for name in ("dag", "killed", "app", "lost", "late", "open", "done", "done_app")}
    dag_type, task_type = _job_type("DAG", "AIRFLOW"), _job_type("TASK", "AIRFLOW")
    app_type = _job_type("APPLICATION", "SPARK")
    parent = (ids["dag"], dag)
    events = [
        _event("START", dag, ids["dag"], 0, job_facets=dag_type),
        _event("START", f"{dag}.done", ids["done"], 1, parent, job_facets=task_type, run_facets=SPARK_TASK),
        _event("START", "done_app", ids["done_app"], 2, (ids["done"], f"{dag}.done"), job_facets=app_type),
        _event("COMPLETE", "done_app", ids["done_app"], 3, (ids["done"], f"{dag}.done"), job_facets=app_type),
        _event("COMPLETE", f"{dag}.done", ids["done"], 4, parent, job_facets=task_type, run_facets=SPARK_TASK),
        _event("COMPLETE", dag, ids["dag"], 30, job_facets=dag_type),
    ]
    if not complete:
        events += [
            # a Spark driver killed: the application's START, no COMPLETE; its task failed
            _event("START", f"{dag}.killed", ids["killed"], 5, parent, job_facets=task_type, run_facets=SPARK_TASK),
            _event("START", "killed_app", ids["app"], 6, (ids["killed"], f"{dag}.killed"), job_facets=app_type),
            _event("FAIL", f"{dag}.killed", ids["killed"], 7, parent, job_facets=task_type, run_facets=SPARK_TASK),
            # a completed Spark task whose application's events were all lost
            _event("START", f"{dag}.lost", ids["lost"], 8, parent, job_facets=task_type, run_facets=SPARK_TASK),
            _event("COMPLETE", f"{dag}.lost", ids["lost"], 9, parent, job_facets=task_type, run_facets=SPARK_TASK),
            # a dropped START
            _event("COMPLETE", f"{dag}.late", ids["late"], 10, parent, job_facets=task_type),
            # a START whose terminal event never came
            _event("START", f"{dag}.open", ids["open"], 11, parent, job_facets=task_type),
        ]
    store.ingest(events)
    return ids


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    settings.Paths.current().lineage.mkdir(parents=True)
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        yield opened


def test_a_complete_dag_run_is_complete_and_each_gap_of_another_is_named(store):
    good = _dag_run(store, "good_dag", complete=True)
    bad = _dag_run(store, "bad_dag", complete=False)
    dead_letters.keep(
        store, json.dumps({"run": {"runId": bad["open"]}}).encode(), "eventTime: 'soon' is not a time", 400, "/x"
    )
    torn = [("1-bad_dag.killed.1-ab.ndjson.torn", f'{{"run": {{"runId": "{bad["app"]}"'.encode())]
    answers = {
        answer["job"]: answer
        for answer in LineageQueries(store).completeness(grace=0, torn=torn, limit=10)
        if answer["job"] in ("good_dag", "bad_dag")
    }
    assert answers["good_dag"]["complete"] and answers["good_dag"]["missing"] == []
    assert answers["good_dag"]["runs"] == 3
    missing = {(item["kind"], item["runId"]) for item in answers["bad_dag"]["missing"]}
    assert missing == {
        ("Spark application without COMPLETE", bad["app"]),
        ("fewer Spark applications than submitted", bad["lost"]),
        ("no START", bad["late"]),
        ("no terminal event", bad["open"]),
        ("a post refused", bad["open"]),
        ("a torn event file", bad["app"]),
    }
    killed = next(item for item in answers["bad_dag"]["missing"] if item["runId"] == bad["app"])
    assert f"started under task bad_dag.killed (run {bad['killed']})" in killed["detail"]
    assert good["dag"] != bad["dag"]


def test_a_run_is_not_missing_its_terminal_event_within_the_grace_after_its_parent_ended(store):
    bad = _dag_run(store, "bad_dag", complete=False)
    (answer,) = LineageQueries(store).completeness(dag_run=bad["dag"])  # now (2026+) is past the grace anyway
    assert {item["kind"] for item in answer["missing"]} >= {"no terminal event"}
    from include.lineage.queries.completeness import completeness

    with store.engine.connect() as conn:
        soon = completeness(conn, bad["dag"], now=datetime(2025, 2, 1, 0, 12, tzinfo=UTC), grace=600)
    assert {item["kind"] for item in soon["missing"]} == {"no START", "fewer Spark applications than submitted"}


def test_lineage_checks_prints_each_dag_run_and_fails_when_lineage_is_missing(store, capsys):
    _dag_run(store, "good_dag", complete=True)
    bad = _dag_run(store, "bad_dag", complete=False)
    assert cli.main(["checks", "--store", store.url, "--grace", "0"]) == 1
    printed = capsys.readouterr().out
    assert "good_dag  run" in printed and ": lineage complete" in printed
    assert "bad_dag  run" in printed and "lineage incomplete, 4 missing" in printed
    assert f"- Spark application without COMPLETE: killed_app (run {bad['app']})" in printed
    assert "lineage checks: 2 DAG run(s), 1 with lineage missing" in printed
    assert cli.main(["checks", "--store", store.url, "--dag-run", bad["dag"][:8], "--grace", "0", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["runId"] == bad["dag"]
