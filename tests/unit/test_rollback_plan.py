"""`lineage rollback --run` says what it will do to every table the run touched, on real Iceberg tables (pyiceberg's SQL
catalog on SQLite, metadata and data files on disk; no Spark): back to snapshot S, already there, "created by the
affected runs" with the user's choice (``--created drop|truncate|keep``, never chosen silently), or why it cannot.

The bad run is a DAG run whose task run started *before* it (what a reused run id looks like: the DAG run's START
came later), and that task run created a table: both used to be left out of the plan silently."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from include.core import settings
from include.lineage import cli
from include.lineage.rollback import apply, plan, render_plan
from include.lineage.store import LineageStore

NS = "rollback-tests"
PRODUCER = "https://example.com/tests/rollback"
SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
ROWS = pa.schema([pa.field("id", pa.int64())])


def _now() -> str:
    time.sleep(0.01)  # snapshots are timed in milliseconds: keep events and commits apart
    return datetime.now(UTC).isoformat()


def _table_dataset(catalog: SqlCatalog, table: str) -> dict:
    loaded = catalog.load_table(table)
    snapshot = loaded.current_snapshot()
    facets = {
        "symlinks": {"identifiers": [{"namespace": "sqlcat", "name": table, "type": "TABLE"}]},
        "catalog": {"framework": "iceberg", "type": "sql", "name": "test"},
    }
    if snapshot is not None:
        facets["version"] = {"datasetVersion": str(snapshot.snapshot_id)}
    return {"namespace": "file", "name": loaded.location(), "facets": facets}


def _event(run_id: str, job: str, event_type: str, at: str, inputs=(), outputs=(), parent: str | None = None) -> dict:
    facets = {}
    if parent:
        facets["parent"] = {"run": {"runId": parent}, "job": {"namespace": NS, "name": "bad_dag"}}
    return {
        "eventType": event_type,
        "eventTime": at,
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
        "run": {"runId": run_id, "facets": facets},
        "job": {"namespace": NS, "name": job, "facets": {}},
        "inputs": list(inputs),
        "outputs": list(outputs),
    }


def _append(catalog: SqlCatalog, table: str, ids: list[int]) -> None:
    catalog.load_table(table).append(pa.table({"id": pa.array(ids, pa.int64())}, schema=ROWS))


def _rows(catalog: SqlCatalog, table: str) -> list[int]:
    return sorted(catalog.load_table(table).scan().to_arrow()["id"].to_pylist())


@pytest.fixture
def world(tmp_path):
    """raw and derived exist with good data; then the bad DAG run: its task run (started before the DAG run's START)
    appends bad rows to raw and creates new_table; a later run reads the bad raw and rewrites derived."""
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=warehouse.as_uri())
    catalog.create_namespace("nyc_taxi")
    events = []
    good = str(uuid.uuid4())
    events.append(_event(good, "good_load", "START", _now()))
    for table in ("nyc_taxi.raw", "nyc_taxi.derived"):
        catalog.create_table(table, schema=ROWS)
        _append(catalog, table, [1, 2])
    events.append(
        _event(good, "good_load", "COMPLETE", _now(), outputs=[_table_dataset(catalog, t) for t in ("nyc_taxi.raw",)])
    )
    before = {t: catalog.load_table(t).current_snapshot().snapshot_id for t in ("nyc_taxi.raw", "nyc_taxi.derived")}
    dag, task, reader = (str(uuid.uuid4()) for _ in range(3))
    events.append(_event(task, "bad_dag.load", "START", _now(), parent=dag))
    events.append(_event(dag, "bad_dag", "START", _now()))  # the DAG run's START after its task's
    _append(catalog, "nyc_taxi.raw", [666])
    catalog.create_table("nyc_taxi.new_table", schema=ROWS)
    _append(catalog, "nyc_taxi.new_table", [7])
    bad_outputs = [_table_dataset(catalog, t) for t in ("nyc_taxi.raw", "nyc_taxi.new_table")]
    events.append(_event(task, "bad_dag.load", "COMPLETE", _now(), outputs=bad_outputs, parent=dag))
    events.append(_event(dag, "bad_dag", "COMPLETE", _now()))
    events.append(_event(reader, "derive", "START", _now()))
    _append(catalog, "nyc_taxi.derived", [666])
    events.append(
        _event(
            reader,
            "derive",
            "COMPLETE",
            _now(),
            inputs=[bad_outputs[0]],
            outputs=[_table_dataset(catalog, "nyc_taxi.derived")],
        )
    )
    store = LineageStore(f"sqlite:///{tmp_path / 'store.db'}")
    store.ingest(events)
    yield {"catalog": catalog, "store": store, "bad": dag, "task": task, "before": before, "tmp": tmp_path}
    store.close()


def test_the_plan_lists_every_table_the_run_touched_with_what_will_happen(world):
    catalog, before = world["catalog"], world["before"]
    rollback_plan = plan(world["store"], world["bad"], catalog)
    steps = {step.table: step for step in rollback_plan.tables}
    assert set(steps) == {"nyc_taxi.raw", "nyc_taxi.new_table", "nyc_taxi.derived"}, "no table left out"
    assert steps["nyc_taxi.raw"].target_snapshot_id == before["nyc_taxi.raw"]
    assert steps["nyc_taxi.derived"].target_snapshot_id == before["nyc_taxi.derived"]
    assert steps["nyc_taxi.new_table"].created and steps["nyc_taxi.new_table"].created_action is None
    assert world["task"] in {run["id"] for run in rollback_plan.affected_runs}, "the task run is the run's own"
    text = render_plan(rollback_plan)
    assert f"nyc_taxi.raw{' ' * 28} back to snapshot {before['nyc_taxi.raw']}" in text, text
    assert "nyc_taxi.new_table" in text and "NOT CHOSEN, give --created drop|truncate|keep" in text


def test_apply_refuses_until_the_created_table_has_a_choice_and_changes_nothing(world):
    catalog = world["catalog"]
    rollback_plan = plan(world["store"], world["bad"], catalog)
    with pytest.raises(Exception, match="nyc_taxi.new_table was created by the affected runs: give --created"):
        apply(rollback_plan, catalog)
    assert _rows(catalog, "nyc_taxi.raw") == [1, 2, 666] and _rows(catalog, "nyc_taxi.new_table") == [7]


@pytest.mark.parametrize(
    ("choice", "new_table_after"),
    [("drop", None), ("truncate", []), ("keep", [7])],
)
def test_each_choice_for_the_created_table_and_the_others_back_to_their_snapshots(world, choice, new_table_after):
    catalog, store = world["catalog"], world["store"]
    snapshot_before_apply = catalog.load_table("nyc_taxi.new_table").current_snapshot().snapshot_id
    rollback_plan = plan(store, world["bad"], catalog, created=choice)
    assert "nyc_taxi.new_table" in render_plan(rollback_plan)
    done = apply(rollback_plan, catalog, store)
    assert _rows(catalog, "nyc_taxi.raw") == [1, 2] and _rows(catalog, "nyc_taxi.derived") == [1, 2]
    if new_table_after is None:
        assert not catalog.table_exists("nyc_taxi.new_table")
    else:
        assert _rows(catalog, "nyc_taxi.new_table") == new_table_after
        changed = catalog.load_table("nyc_taxi.new_table").current_snapshot().snapshot_id != snapshot_before_apply
        assert changed == (choice == "truncate")
    assert ("nyc_taxi.new_table" in {step.table for step in done}) == (choice != "keep")


def test_a_table_whose_earlier_snapshots_expired_is_listed_with_why(world):
    catalog = world["catalog"]
    derived = catalog.load_table("nyc_taxi.derived")
    current = derived.current_snapshot().snapshot_id
    older = [s.snapshot_id for s in derived.metadata.snapshots if s.snapshot_id != current]
    derived.maintenance.expire_snapshots().by_ids(older).commit()
    rollback_plan = plan(world["store"], world["bad"], catalog, created="keep")
    step = next(step for step in rollback_plan.tables if step.table == "nyc_taxi.derived")
    assert not step.created and "no snapshot of it before the first affected write" in step.problem
    assert "CANNOT ROLL BACK" in render_plan(rollback_plan)


def test_the_cli_plans_refuses_without_a_choice_then_applies_it(world, monkeypatch, capsys):
    var = world["tmp"] / "var"
    (var / "lineage").mkdir(parents=True)
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(var))
    monkeypatch.setattr(cli, "_rollback_catalog", lambda paths: world["catalog"])
    monkeypatch.setattr(cli, "configured_transport", lambda: {"type": "console"})
    store = world["store"].url
    assert cli.main(["rollback", "--run", world["bad"], "--store", store]) == 0
    captured = capsys.readouterr()
    assert "nyc_taxi.new_table" in captured.out and "choose what to do with them (--created" in captured.err
    assert cli.main(["rollback", "--run", world["bad"], "--apply", "--store", store]) == 2
    assert "give --created drop|truncate|keep" in capsys.readouterr().err
    assert _rows(world["catalog"], "nyc_taxi.raw") == [1, 2, 666], "a refused rollback changes nothing"
    assert cli.main(["rollback", "--run", world["bad"], "--apply", "--created", "drop", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "dropped nyc_taxi.new_table" in out and "rolled back nyc_taxi.raw" in out
    assert not world["catalog"].table_exists("nyc_taxi.new_table")
    applied = json.loads((settings.Paths(var).lineage / "rollback" / f"{world['bad']}.applied.json").read_text())
    assert {s["table"]: s["created_action"] for s in applied["tables"]}["nyc_taxi.new_table"] == "drop"
    with pytest.raises(SystemExit) as refused:  # argparse: exit 2 naming the choices
        cli.main(["rollback", "--run", world["bad"], "--created", "bogus", "--store", store])
    assert refused.value.code == 2 and "choose from 'drop', 'truncate', 'keep'" in capsys.readouterr().err
