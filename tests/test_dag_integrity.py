"""DAG integrity: every DAG imports, is documented, tagged and retried, and parsing touches no DB or connection."""

from __future__ import annotations

import ast
import socket
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from include.core import naming, settings

EXPECTED_DAGS = {"ingest_yellow_taxi_data", "ingest_weather_data", "forecast_yellow_rides"}


@pytest.fixture(scope="module")
def dagbag_and_parse_activity(airflow_env, monkeypatch_module):
    from airflow.models.connection import Connection
    from airflow.sdk import BaseHook

    statements: list[str] = []
    lookups: list[str] = []
    sockets: list[object] = []

    def count_statement(conn, cursor, statement, *args):
        statements.append(statement)

    def forbid_lookup(*args, **kwargs):
        lookups.append(str(args[:2]))
        raise AssertionError("connection looked up at parse time")

    def forbid_socket(self, address):
        sockets.append(address)
        raise AssertionError(f"network access at parse time: {address}")

    # The dag-processor has [core] plugins_folder on sys.path (Airflow appends it when first imported, from the
    # airflow.cfg of that moment): the DAGs import the notifier from there. In a test worker Airflow may have been
    # first imported before the session's airflow.cfg existed (a module importing it at collection), so the folder is
    # put there as the dag-processor has it; without this the DAGs' import of it passes or fails with test order.
    monkeypatch_module.syspath_prepend(str(settings.PLUGINS_DIR))
    monkeypatch_module.setattr(BaseHook, "get_connection", classmethod(forbid_lookup))
    monkeypatch_module.setattr(Connection, "get_connection_from_secrets", classmethod(forbid_lookup))
    monkeypatch_module.setattr(socket.socket, "connect", forbid_socket)
    event.listen(Engine, "before_cursor_execute", count_statement)
    try:
        from airflow.dag_processing.dagbag import DagBag

        dagbag = DagBag(dag_folder=str(settings.DAGS_DIR))
    finally:
        event.remove(Engine, "before_cursor_execute", count_statement)
    return dagbag, statements, lookups, sockets


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_dagbag_has_the_three_dags_and_no_import_errors(dagbag_and_parse_activity):
    dagbag, *_ = dagbag_and_parse_activity
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == EXPECTED_DAGS


def test_parsing_makes_no_db_query_connection_lookup_or_network_access(dagbag_and_parse_activity):
    _, statements, lookups, sockets = dagbag_and_parse_activity
    assert statements == []
    assert lookups == []
    assert sockets == []


@pytest.mark.parametrize("dag_id", sorted(EXPECTED_DAGS))
def test_every_dag_is_documented_tagged_and_retried(dagbag_and_parse_activity, dag_id):
    dag = dagbag_and_parse_activity[0].dags[dag_id]
    assert dag.doc_md and len(dag.doc_md) > 200
    assert dag.tags and "openlineage" in dag.tags
    for task in dag.tasks:
        assert task.retries >= 1, f"{dag_id}.{task.task_id} has no retries"


SPARK_TASKS = {
    ("ingest_yellow_taxi_data", "load_yellow_taxi_raw"): "load_taxi.py",
    ("ingest_weather_data", "stage_weather"): "stage_weather.py",
    ("ingest_weather_data", "merge_weather_raw"): "merge_weather.py",
    ("forecast_yellow_rides", "compute_hourly_actuals"): "compute_actuals.py",
    ("forecast_yellow_rides", "train_model"): "train_model.py",
    ("forecast_yellow_rides", "write_forecast"): "write_forecast.py",
}


def _runs_main_through_the_runner(script) -> bool:
    """``if __name__ == "__main__": run(main)``: bad input then fails fast and leaves its report."""
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return any("run(main" in ast.unparse(statement) for statement in node.body)
    return False


def test_each_spark_task_runs_its_own_script_through_the_job_runner(dagbag_and_parse_activity):
    dagbag = dagbag_and_parse_activity[0]
    applications = {
        (dag.dag_id, task.task_id): Path(task.application)
        for dag in dagbag.dags.values()
        for task in dag.tasks
        if hasattr(task, "application")
    }
    assert {key: path.name for key, path in applications.items()} == SPARK_TASKS
    for (dag_id, task_id), path in applications.items():
        assert path.parent == settings.SPARK_JOBS_DIR and path.is_file(), f"{dag_id}.{task_id}: no script {path}"
        assert _runs_main_through_the_runner(path), (
            f"{path.name} does not run main through spark_jobs.common.runner.run"
        )


# Each Spark task's script and the datasets it declares it writes (its ``outputs``): what the ``lineageDrift`` run facet
# compares the task's observed outputs with (include/lineage/emit/observed.py ``drift``), and what its outlets name.
DECLARED_OUTPUTS = {
    ("ingest_yellow_taxi_data", "load_yellow_taxi_raw"): ("load_taxi", [naming.TAXI_RAW, naming.TAXI_QUARANTINE]),
    ("ingest_weather_data", "stage_weather"): ("stage_weather", [naming.WEATHER_STAGING]),
    ("ingest_weather_data", "merge_weather_raw"): ("merge_weather", [naming.WEATHER_RAW]),
    ("forecast_yellow_rides", "compute_hourly_actuals"): ("compute_actuals", [naming.HOURLY_ACTUALS]),
    ("forecast_yellow_rides", "train_model"): ("train_model", [naming.model_key("{{ params.model }}")]),
    ("forecast_yellow_rides", "write_forecast"): ("write_forecast", [naming.HOURLY_FORECAST]),
}


def test_each_spark_task_declares_the_datasets_it_writes(dagbag_and_parse_activity):
    declared = {
        (dag.dag_id, task.task_id): (task.script, task.lineage_keys()[1])
        for dag in dagbag_and_parse_activity[0].dags.values()
        for task in dag.tasks
        if hasattr(task, "script")
    }
    # not a loop over nothing: every Spark task of the DAGs, each with its script and what it declares it writes
    assert declared == DECLARED_OUTPUTS
    for (dag_id, task_id), (_, outputs) in declared.items():
        task = dagbag_and_parse_activity[0].dags[dag_id].get_task(task_id)
        tables = {naming.table_asset(key).name for key in outputs if naming.is_table_key(key)}
        assert {outlet.name for outlet in task.outlets} == tables, f"{dag_id}.{task_id}: outlets {task.outlets}"


def test_forecast_dag_is_scheduled_by_the_raw_tables_assets(dagbag_and_parse_activity):
    from include.core import naming

    dag = dagbag_and_parse_activity[0].dags["forecast_yellow_rides"]
    condition = dag.timetable.asset_condition
    assert type(condition).__name__ == "AssetAll", "the forecast waits for both raw tables"
    uris = {asset.uri for asset in condition.objects}
    assert uris == {naming.table_asset(naming.TAXI_RAW).uri, naming.table_asset(naming.WEATHER_RAW).uri}
    load = dagbag_and_parse_activity[0].dags["ingest_yellow_taxi_data"].get_task("load_yellow_taxi_raw")
    assert [outlet.uri for outlet in load.outlets] == [
        naming.table_asset(naming.TAXI_RAW).uri,
        naming.table_asset(naming.TAXI_QUARANTINE).uri,
    ]
