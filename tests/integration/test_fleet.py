"""The whole pipeline on Airflow's CeleryExecutor, with two workers that share no disk (`pipeline fleet`,
include/services/fleet.py): triggered through Airflow's REST API, each hand-off between two tasks forced across
machines; its lineage in `lineage serve`'s store is complete (every event each machine emitted, once) and its graph of
the forecast is the graph of the same runs on one machine. Then a worker dies in the middle of its Spark task.

The one-machine reference is the same three runs through `airflow dags test` in a var/ of its own (local disk,
local warehouse), on the same generated month. The two graphs differ only by where the data lives (file paths
against s3:// keys, the sample server's port) and by Spark ML's random stage ids in the training job's names: both
are taken out before comparing (tests/integration/fleet_support.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from include.airflow import runs
from include.core import naming, settings
from include.services import fleet, fleet_config
from include.sources import sample_server
from tests.integration import fleet_support
from tests.integration.isolated_var import IsolatedVar
from tests.support import postgresql, require_system_tool

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

ROWS = 5_000
MONTH = (2025, 1)
INGEST_DATE = "2025-02-01T00:00:00+00:00"
FORECAST_DATE = "2025-02-01T01:00:00+00:00"
REINGEST_DATE = "2025-02-01T00:05:00+00:00"  # January again (the kill test)
TAXI, WEATHER, FORECAST = "ingest_yellow_taxi_data", "ingest_weather_data", "forecast_yellow_rides"
A, B = fleet_config.WORKERS
# Every hand-off crosses machines: the landed file, the staged month, the model.
PLACEMENT = {
    TAXI: {"download_tlc_month": A, "load_yellow_taxi_raw": B},
    WEATHER: {"download_noaa_month": B, "stage_weather": A, "merge_weather_raw": B},
    FORECAST: {"compute_hourly_actuals": A, "train_model": B, "write_forecast": A},
}
CONF = {TAXI: {}, WEATHER: {}, FORECAST: {"model": "weather"}}
DATES = {TAXI: INGEST_DATE, WEATHER: INGEST_DATE, FORECAST: FORECAST_DATE}
# The facets of a Spark task take longer than the extractor's default 5 s on a loaded 2-core machine: the graph's
# datasets must not depend on it (as tests/integration/conftest.py does for its runs).
BUDGET = {"LINEAGE_FACETS_BUDGET_SECONDS": "45"}


@pytest.fixture(scope="module")
def one_machine(paths):
    """The same runs on one machine, local disk: `airflow dags test` in one process, its events' graph."""
    source = paths.var / "fleet-reference-source"
    sample_server.publish_months(source, [MONTH], ROWS)
    reference = IsolatedVar(paths.var / "fleet-reference", BUDGET).setup()
    logs = reference.paths.var / "test-logs"
    try:
        with sample_server.serve(source) as source_env, reference.activated():
            tests = [runs.DagTest(dag, DATES[dag], CONF[dag], logs / f"{dag}.log") for dag in (TAXI, WEATHER, FORECAST)]
            env = {**reference.env, **settings.airflow_env(reference.paths), **source_env}
            results = list(runs.dags_test_in_one_process(tests, env=env))
        assert [result.state for result in results] == ["success"] * 3, f"logs under {logs}"
        env = {**reference.env, **settings.airflow_env(reference.paths)}
        store = f"sqlite:///{reference.paths.lineage / 'store.db'}"
        subprocess.run(
            [str(Path(sys.executable).parent / "lineage"), "ingest", "--store", store],
            env=env,
            check=True,
            capture_output=True,
            cwd=settings.PROJECT_ROOT,
        )
        yield fleet_support.forecast_graph(store, env)
    finally:
        reference.stop()


@pytest.fixture(scope="module")
def running_fleet(paths):
    postgresql("the fleet's metadata database, Celery's results and the lineage store are PostgreSQL")
    if not shutil.which("redis-server"):
        require_system_tool("redis-server", "the fleet's Celery broker (include/setup/system_packages.sh redis)")
    started = fleet_support.Fleet(
        paths.var / "fleet-test",
        ROWS,
        # Only the runs the test triggers: no scheduled run of today's month (its START would name other files).
        {**BUDGET, "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False"},
    )
    try:
        yield started.start()
    finally:
        print(started.stop())


@pytest.fixture(scope="module")
def fleet_runs(one_machine, running_fleet):
    """Both ingest DAGs triggered at once, then the forecast, each task placed by its run's conf; each run's tasks
    with where they ran, the lineage emitted and stored, and the store's graph of the forecast, before the kill."""
    airflow = running_fleet
    airflow.wait_for_dags(PLACEMENT)
    started = time.monotonic()
    run_ids = {
        dag: airflow.trigger(dag, DATES[dag], {**CONF[dag], "queues": PLACEMENT[dag]}) for dag in (TAXI, WEATHER)
    }
    finished = {dag: airflow.wait_for_run(dag, run_id) for dag, run_id in run_ids.items()}
    run_ids[FORECAST] = airflow.trigger(FORECAST, DATES[FORECAST], {**CONF[FORECAST], "queues": PLACEMENT[FORECAST]})
    finished[FORECAST] = airflow.wait_for_run(FORECAST, run_ids[FORECAST])
    seconds = time.monotonic() - started
    tasks = {dag: airflow.task_instances(dag, run_id) for dag, run_id in run_ids.items()}
    where = {
        (dag, task): airflow.ran_on(dag, run_ids[dag], task) for dag, placed in PLACEMENT.items() for task in placed
    }
    machines = [airflow.machine(name) for name in (fleet_config.CONTROL, *fleet_config.WORKERS)]
    sent, kept = fleet_support.wait_until_stored(airflow.lineage_store_url, machines)
    graph = fleet_support.forecast_graph(airflow.lineage_store_url, airflow.env)
    print(f"\nfleet: three DAG runs in {seconds:.0f} s; tasks ran on {where}")
    return {"run_ids": run_ids, "finished": finished, "tasks": tasks, "where": where, "sent": sent, "kept": kept,
            "graph": graph}  # fmt: skip


def test_every_task_ran_where_its_run_placed_it_and_succeeded_on_its_first_try(fleet_runs):
    assert {dag: run["state"] for dag, run in fleet_runs["finished"].items()} == dict.fromkeys(PLACEMENT, "success")
    for dag, placed in PLACEMENT.items():
        for task, worker in placed.items():
            instance = fleet_runs["tasks"][dag][task]
            assert (instance["state"], instance["try_number"], instance["queue"]) == ("success", 1, worker), task
            assert fleet_runs["where"][(dag, task)] == [worker], f"{task}: its log is on {fleet_runs['where']}"
    # the month was downloaded on one machine and loaded on the other
    assert fleet_runs["where"][(TAXI, "download_tlc_month")] != fleet_runs["where"][(TAXI, "load_yellow_taxi_raw")]


def test_nothing_handed_over_is_on_a_local_disk(running_fleet, fleet_runs):
    for name in (fleet_config.CONTROL, *fleet_config.WORKERS):
        paths = running_fleet.machine(name)
        assert not [path for path in paths.landing.rglob("*") if path.is_file()], f"{name}: a landed file stayed"
        assert not [path for path in paths.models.rglob("*") if path.is_file()], f"{name}: a model stayed"
        assert not [path for path in paths.warehouse.rglob("*") if path.is_file()], f"{name}: table files"
        assert not [path for path in paths.lineage_spool.rglob("*") if path.is_file()], f"{name}: events waiting"
        assert not list((paths.lineage / "spark" / "outbox").glob("*.ndjson")), f"{name}: Spark events not forwarded"
    from include.core import object_store

    with _fleet_environment(running_fleet):
        assert object_store.exists(f"s3://{fleet_config.BUCKET}/landing/tlc/yellow_tripdata_2025-01.parquet")
        assert object_store.exists(f"{naming.model_uri('weather')}/spark_model")


def test_every_event_each_machine_emitted_is_in_the_store_once(fleet_runs):
    sent, kept = fleet_runs["sent"], fleet_runs["kept"]
    assert sent, "the machines kept no copy of what they emitted"
    duplicates = {run: n for run, events in sent.items() if (n := sum(events.values()) - len(events))}
    assert duplicates == {}, "an event was emitted twice"
    missing = {run: len(set(events) - set(kept.get(run, {}))) for run, events in sent.items()}
    assert {run: n for run, n in missing.items() if n} == {}, "events emitted but not stored (per run)"
    assert {run: len(events) for run, events in kept.items() if run in sent} == {
        run: len(events) for run, events in sent.items()
    }
    print(f"\nfleet: {sum(len(e) for e in sent.values())} events of {len(sent)} runs emitted, each stored once")


def test_the_store_graph_of_the_forecast_is_the_one_machine_graph(fleet_runs, one_machine):
    on_fleet, on_one = fleet_support.Graph.of(fleet_runs["graph"]), fleet_support.Graph.of(one_machine)
    print(
        f"\ngraph of the forecast: one machine {len(on_one.nodes)} nodes, {len(on_one.edges)} edges; "
        f"fleet {len(on_fleet.nodes)} nodes, {len(on_fleet.edges)} edges"
    )
    assert sorted(on_fleet.nodes - on_one.nodes) == [] and sorted(on_one.nodes - on_fleet.nodes) == []
    assert sorted(on_fleet.edges - on_one.edges) == [] and sorted(on_one.edges - on_fleet.edges) == []
    datasets = {node for node in on_fleet.nodes if node.startswith("dataset ")}
    assert {"dataset landed:tlc/yellow_tripdata_2025-01.parquet", "dataset model:weather"} <= datasets


def _fleet_environment(airflow):
    """This process sees the fleet's shared services (its catalog, object store) for the duration."""
    from tests.integration.isolated_var import IsolatedVar

    reader = IsolatedVar(airflow.paths.var / "reader", fleet_config.Topology.load(airflow.root).shared_environment())
    reader.env["ICEBERG_CATALOG_URI"] = airflow.topology.url("catalog")
    return reader.activated()


def _spark_driver_of(airflow, script: str, label: str, timeout: float = 600) -> tuple[str, psutil.Process]:
    """(worker, process) of the Spark driver running ``script`` (the JVM of ``SparkSubmit``, not spark-submit's
    short-lived launcher), once its application has started: its listener wrote a first event in the worker's
    outbox."""
    leaders = {c["pid"]: c["machine"] for c in airflow.state["components"] if c["name"].startswith("celery-")}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in psutil.process_iter():
            try:
                command = " ".join(process.cmdline())
                worker = leaders.get(os.getsid(process.pid))
                if worker and f"spark_jobs/{script}" in command and "org.apache.spark.deploy.SparkSubmit" in command:
                    if _outbox_lines(airflow.machine(worker), label):
                        return worker, process
            except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
                continue
        time.sleep(0.3)
    raise TimeoutError(f"no Spark application of {script} started on a worker within {timeout:.0f}s")


def _outbox_lines(paths: settings.Paths, label: str) -> list[bytes]:
    lines = []
    for outbox in (paths.lineage / "spark" / "outbox").glob(f"*{label}*.ndjson"):
        lines += [line for line in outbox.read_bytes().split(b"\n") if line.strip()]
    return lines


def test_a_worker_killed_mid_task_is_retried_on_the_other_and_loads_each_trip_once(running_fleet, fleet_runs):
    """SIGKILL every process of the worker running the load's Spark driver (a machine that died): the scheduler sees
    the task without a heartbeat, the retry runs on the other worker (the load's queue is the shared one), the month
    is loaded once, and the store holds both attempts: the killed one FAILED, the retry COMPLETE."""
    airflow = running_fleet
    conf = {"force": True, "reprocess": True, "queues": {"download_tlc_month": A}}  # the load on the shared queue
    run_id = airflow.trigger(TAXI, REINGEST_DATE, conf)
    label = f"{TAXI}.load_yellow_taxi_raw.1"
    worker, driver = _spark_driver_of(airflow, "load_taxi.py", label)
    time.sleep(3)  # in the middle of its work
    killed = fleet.kill_machine(worker, airflow.paths)
    assert driver.pid in killed
    lost = _outbox_lines(airflow.machine(worker), label)
    survivor = B if worker == A else A
    finished = airflow.wait_for_run(TAXI, run_id)
    load = airflow.task_instances(TAXI, run_id)["load_yellow_taxi_raw"]
    print(
        f"\nkill: {worker} killed ({len(killed)} processes) while its Spark driver ran; the retry ran on "
        f"{airflow.ran_on(TAXI, run_id, 'load_yellow_taxi_raw', 2)}; the dead worker's outbox held {len(lost)} "
        f"event(s), {sum(len(line) + 1 for line in lost)} bytes"
    )
    assert (finished["state"], load["state"], load["try_number"]) == ("success", "success", 2)
    assert airflow.ran_on(TAXI, run_id, "load_yellow_taxi_raw", 1) == [worker]
    assert airflow.ran_on(TAXI, run_id, "load_yellow_taxi_raw", 2) == [survivor]

    with _fleet_environment(airflow):
        catalog = settings.pyiceberg_catalog()
        raw = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}").scan().to_arrow()
        quarantine = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_QUARANTINE}").scan().to_arrow()
    ids = raw["unique_row_id"].to_pylist()
    assert len(ids) == len(set(ids)) and raw.num_rows + quarantine.num_rows == ROWS

    survivors = [airflow.machine(name) for name in (fleet_config.CONTROL, survivor)]
    sent, kept = fleet_support.wait_until_stored(airflow.lineage_store_url, survivors)
    assert {
        run: len(set(e) - set(kept.get(run, {}))) for run, e in sent.items() if set(e) - set(kept.get(run, {}))
    } == {}
    attempts = _attempts(fleet_support.stored(airflow.lineage_store_url), f"{TAXI}.load_yellow_taxi_raw", run_id)
    assert attempts[1][0] == "START" and attempts[1][-1] in ("FAIL", "ABORT"), attempts
    assert attempts[2] == ["START", "COMPLETE"], attempts


def _attempts(events: list[dict], job: str, dag_run_id: str) -> dict[int, list[str]]:
    """Try number -> the event types, in time order, of ``job``'s task runs in the DAG run ``dag_run_id``."""
    found: dict[int, list[tuple[str, str]]] = {}
    for event in events:
        facets = event["run"].get("facets", {})
        instance = (facets.get("airflow") or {}).get("taskInstance") or {}
        dag_run = ((facets.get("airflow") or {}).get("dagRun") or {}).get("run_id")
        if event["job"]["name"] == job and dag_run == dag_run_id:
            found.setdefault(instance.get("try_number"), []).append((event["eventTime"], event["eventType"]))
    return {attempt: [kind for _, kind in sorted(kinds)] for attempt, kinds in found.items()}
