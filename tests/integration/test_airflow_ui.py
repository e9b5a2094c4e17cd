"""The path users take: `make airflow SAMPLE_DATA=1`, Trigger in the UI, the scheduler runs it.

Everything here runs for real in a ``var/`` of its own: `pipeline ui --sample-data` (``airflow standalone``: api-server,
scheduler with LocalExecutor and parallelism 4, dag-processor, triggerer), the local Iceberg REST catalog server,
spark-submit in local mode, and a headless Chromium (Debian's package) logged into the UI.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict

import pytest

from include.core import settings
from include.services import postgres
from tests.integration.running_airflow import EXTRA_LOGICAL_DATES, FORECAST_DAG, INGEST_DAGS, UI_SPARK_MASTER
from tests.support import chromium

pytestmark = [pytest.mark.integration, pytest.mark.timeout(2700)]  # a slow machine: the whole chain runs in the fixture


@pytest.fixture(scope="module")
def airflow_ui(user_runs):
    return user_runs.airflow


@pytest.fixture(scope="module")
def concurrent_runs(user_runs):
    return {"run_ids": user_runs.run_ids, "finished": user_runs.finished, "forecast": user_runs.forecast}


def test_two_ingest_dags_at_once_succeed_with_every_task_on_its_first_try(airflow_ui, concurrent_runs):
    for dag_id, run in concurrent_runs["finished"].items():
        assert run["state"] == "success", f"{dag_id} ended {run['state']}; log {airflow_ui.log_path}"
        instances = airflow_ui.task_instances(dag_id, run["dag_run_id"])
        assert {ti["task_id"] for ti in instances} == EXPECTED_TASKS[dag_id]
        assert {(ti["task_id"], ti["state"], ti["try_number"]) for ti in instances} == {
            (ti["task_id"], "success", 1) for ti in instances
        }, "every task must succeed on its first try (no retry hiding a collision)"
    taxi, weather = (concurrent_runs["finished"][dag_id] for dag_id in INGEST_DAGS)
    overlap = min(taxi["end_date"], weather["end_date"]) > max(taxi["start_date"], weather["start_date"])
    assert overlap, "the two DAG runs must have run at the same time"


def test_triggers_again_and_again_answer_200_and_every_task_runs_on_its_first_try(airflow_ui, user_runs):
    """Right after the first pair, both ingest DAGs were triggered twice more at once (months the sample server does
    not publish): every trigger answered 200 on its first attempt (``RunningAirflow.api`` makes a write once), and
    every run ended with its download skipped on its first try: no writer met a locked metadata database."""
    assert set(user_runs.extra_run_ids) == {(dag_id, date) for dag_id in INGEST_DAGS for date in EXTRA_LOGICAL_DATES}
    for (dag_id, date), run in user_runs.extra_finished.items():
        instances = airflow_ui.task_instances(dag_id, run["dag_run_id"])
        states = {ti["task_id"]: (ti["state"], ti["try_number"]) for ti in instances}
        download = next(task for task in states if task.startswith("download_"))
        assert run["state"] == "success" and states[download] == ("skipped", 1), f"{dag_id} {date}: {states}"
        assert {state for state, _ in states.values()} == {"skipped"}, f"{dag_id} {date}: {states}"


def test_make_airflow_keeps_its_metadata_in_postgres_with_a_password_nowhere_else(airflow_ui, user_runs):
    """`make airflow` runs on this var/'s PostgreSQL (127.0.0.1, SCRAM): the runs triggered are rows there, the
    password is in var/secrets only (mode 600), in no Airflow process's environment, airflow.cfg or lineage."""
    import psycopg2

    url_file = settings.metadata_db_url_file(airflow_ui.paths)
    assert oct(url_file.stat().st_mode & 0o777) == "0o600"
    assert oct(postgres.secrets_file(airflow_ui.paths).stat().st_mode & 0o777) == "0o600"
    url = url_file.read_text()
    assert url.startswith("postgresql+psycopg2://airflow:") and "@127.0.0.1:" in url
    with psycopg2.connect(url.replace("+psycopg2", "")) as db, db.cursor() as cursor:
        cursor.execute("SELECT dag_id, run_id FROM dag_run")
        stored = set(cursor.fetchall())
    triggered = {(dag_id, run_id) for dag_id, run_id in user_runs.run_ids.items()}
    triggered |= {(dag_id, run_id) for (dag_id, _), run_id in user_runs.extra_run_ids.items()}
    assert triggered <= stored
    password = json.loads(postgres.secrets_file(airflow_ui.paths).read_text())["airflow_password"]
    assert password.encode() not in (airflow_ui.paths.airflow_home / "airflow.cfg").read_bytes()
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(url.replace("+psycopg2", "").replace(password, "wrong-password")).close()
    import psutil

    environments = 0
    for process in psutil.process_iter():
        try:
            environ = process.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if environ.get("PIPELINE_VAR_DIR") == str(airflow_ui.paths.var):
            environments += 1
            assert not any(password in value for value in environ.values()), f"password in {process.cmdline()[:3]}"
    assert environments >= 4, "the api-server, scheduler, dag-processor and triggerer run with this var/"


def test_every_process_of_make_airflow_listened_on_loopback_only(airflow_ui, user_runs):
    """Sampled from /proc/net/tcp from the start of `pipeline ui` to now: the api-server, the scheduler's and the
    triggerer's log servers, PostgreSQL, the catalog server, the sample-file server and every Spark driver."""
    seen = set(airflow_ui.listeners)
    ports = {listener.port for listener in seen}
    log_servers = {int(airflow_ui.env[f"AIRFLOW__LOGGING__{kind}_LOG_SERVER_PORT"]) for kind in ("WORKER", "TRIGGER")}
    assert {airflow_ui.port, *log_servers} <= ports, f"the api-server and both log servers must have been seen: {seen}"
    programs = {listener.process.split()[0].rsplit("/", 1)[-1] for listener in seen}
    assert {"postgres", "java"} <= programs, programs
    outside = sorted(f"{item.process} on {item.readable_address}:{item.port}" for item in seen if not item.loopback)
    assert outside == [], "listening beyond loopback:\n" + "\n".join(outside)


def test_forecast_is_triggered_by_the_two_raw_assets_and_succeeds(airflow_ui, concurrent_runs):
    forecast = concurrent_runs["forecast"]
    assert forecast["state"] == "success", f"forecast ended {forecast['state']}; log {airflow_ui.log_path}"
    assert [ti["state"] for ti in airflow_ui.task_instances(FORECAST_DAG, forecast["dag_run_id"])] == ["success"] * 3


def _events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


EXPECTED_TASKS = {
    "ingest_yellow_taxi_data": {"download_tlc_month", "load_yellow_taxi_raw"},
    "ingest_weather_data": {"download_noaa_month", "stage_weather", "merge_weather_raw"},
    FORECAST_DAG: {"compute_hourly_actuals", "train_model", "write_forecast"},
}


def _events_once_complete(path, timeout: float = 180) -> list[dict]:
    """A task's COMPLETE event is written by its runner after the task is marked successful: wait for them."""
    expected = {f"{dag_id}.{task_id}" for dag_id, tasks in EXPECTED_TASKS.items() for task_id in tasks}
    deadline = time.monotonic() + timeout
    while True:
        events = _events(path)
        completed = {e["job"]["name"] for e in events if e["eventType"] == "COMPLETE"}
        if expected <= completed or time.monotonic() > deadline:
            return events
        time.sleep(3)


def test_scheduler_path_emits_dag_and_task_lineage_with_parents(airflow_ui, concurrent_runs):
    events = _events_once_complete(airflow_ui.paths.lineage_events)
    dag_runs: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    task_events: list[dict] = []
    for event in events:
        name = event["job"]["name"]
        if "." in name:
            task_events.append(event)
        else:
            dag_runs[name][event["eventType"]].add(event["run"]["runId"])
    for dag_id in (*INGEST_DAGS, FORECAST_DAG):
        assert dag_runs[dag_id]["START"] & dag_runs[dag_id]["COMPLETE"], f"{dag_id}: no DAG run with START and COMPLETE"
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for event in task_events:
        dag_id, task_id = event["job"]["name"].split(".", 1)
        parent = event["run"]["facets"]["parent"]
        assert parent["job"]["name"] == dag_id
        assert parent["run"]["runId"] in dag_runs[dag_id]["START"] | dag_runs[dag_id]["COMPLETE"], (
            f"{event['job']['name']}: parent run {parent['run']['runId']} is not a run of DAG {dag_id}"
        )
        seen[(dag_id, task_id)].add(event["eventType"])
    for dag_id, tasks in EXPECTED_TASKS.items():
        for task_id in tasks:
            assert {"START", "COMPLETE"} <= seen[(dag_id, task_id)], f"{dag_id}.{task_id}: {seen[(dag_id, task_id)]}"


def test_no_secret_of_the_airflow_home_reaches_lineage(airflow_ui, concurrent_runs):
    secrets = json.loads((airflow_ui.paths.secrets / "airflow.json").read_text())
    secrets["admin_password"] = airflow_ui.admin_password
    secrets.update(json.loads(postgres.secrets_file(airflow_ui.paths).read_text()))
    files = [path for path in airflow_ui.paths.lineage.rglob("*") if path.is_file()]
    assert files
    for path in files:
        content = path.read_bytes()
        for name, secret in secrets.items():
            assert secret.encode() not in content, f"{name} found in {path}"


def test_spark_default_edited_in_the_ui_is_used_by_the_spark_tasks(airflow_ui, concurrent_runs):
    masters = set()
    for event in _events(airflow_ui.paths.spark_lineage_events):
        properties = event.get("run", {}).get("facets", {}).get("spark_properties", {}).get("properties", {})
        if "spark.master" in properties:
            masters.add(properties["spark.master"])
    assert masters == {UI_SPARK_MASTER}


def test_scheduled_runs_of_unpublished_months_end_skipped(airflow_ui, concurrent_runs):
    for dag_id in INGEST_DAGS:
        scheduled = [run for run in airflow_ui.runs(dag_id) if run["run_type"] == "scheduled"]
        assert scheduled, f"airflow standalone should have scheduled the latest interval of {dag_id}"
        for run in scheduled:
            run = airflow_ui.wait_for_run(dag_id, run["dag_run_id"], timeout=300)
            instances = airflow_ui.task_instances(dag_id, run["dag_run_id"])
            states = {ti["task_id"]: ti["state"] for ti in instances}
            assert run["state"] == "success" and set(states.values()) == {"skipped"}, (
                f"{dag_id} {run['dag_run_id']}: {states}"
            )
            download = next(ti for ti in instances if ti["task_id"].startswith("download_"))
            assert download["try_number"] == 1, (
                "the scheduler's first tasks must reach the api-server on their first try"
            )


def test_forecast_graph_view_in_a_real_browser(airflow_ui, concurrent_runs):
    executable = chromium("the forecast DAG's graph view is checked in a real browser")
    from playwright.sync_api import sync_playwright

    screenshot = airflow_ui.paths.var / "screenshots" / "forecast-graph.png"
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            airflow_ui.log_in(page, f"/dags/{FORECAST_DAG}", landed=f"**/dags/{FORECAST_DAG}**")
            page.click("[aria-label='Show Graph (Press g)']")
            page.wait_for_selector(".react-flow__node", timeout=60_000)
            nodes = {node.get_attribute("data-id") for node in page.query_selector_all(".react-flow__node")}
            page.screenshot(path=str(screenshot))
        finally:
            browser.close()
    assert {"compute_hourly_actuals", "train_model", "write_forecast"} <= nodes
    assert screenshot.stat().st_size > 10_000
