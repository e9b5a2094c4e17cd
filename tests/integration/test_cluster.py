"""The DAGs on a Spark standalone cluster: a master and a worker started from pyspark's own ``spark-class`` on
127.0.0.1, ``spark_default`` pointed at it through ``AIRFLOW_CONN_SPARK_DEFAULT``, the taxi and forecast DAGs run with
``airflow dags test`` in a ``var/`` of their own, and compared with the session's demo (tests/integration/demo_run.py):
the same DAGs on the same generated month in local mode.

The executors run a Python that has the dependencies but not the project (a venv whose site-packages point at the
project venv's, without its editable install), as a worker machine would: the project's code reaches them only in
the zip spark-submit ships (``--py-files``), the jars only through ``--jars``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyspark
import pytest
import requests

from include.core import naming, settings
from include.sources import sample_server
from include.spark import submit
from tests.integration.demo_run import FIRST_FORECAST_DATE, FIRST_INGEST_DATE, MONTH, ROWS
from tests.integration.isolated_var import RUN_SPECIFIC, IsolatedVar, comparable
from tests.support import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]  # module fixtures run several DAGs

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_TASKS = {"load_yellow_taxi_raw", "compute_hourly_actuals", "train_model", "write_forecast"}
WORKER_MEMORY = "1536m"
PROBE = settings.PROJECT_ROOT / "tests" / "jobs" / "where_is_the_code.py"


def deps_only_python(folder: Path) -> Path:
    """A venv that sees the project venv's packages but not the project (no editable install), like a worker."""
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site_packages = Path(sysconfig.get_paths(vars={"base": str(folder), "platbase": str(folder)})["purelib"])
    # A path line in a .pth adds the folder to sys.path without running the .pth files inside it (the editable one).
    (site_packages / "project-venv-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder / "bin" / "python"


class StandaloneCluster:
    """One master and one worker (2 cores, small memory) on 127.0.0.1, from pyspark's own launcher."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.port, self.webui_port, self.worker_webui_port = free_port(), free_port(), free_port()
        self.env = {name: value for name, value in os.environ.items() if not name.startswith(("PYTHON", "PIPELINE_"))}
        self.env.update({"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(folder)})
        self.processes: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def json_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}/json/"

    def _launch(self, name: str, *arguments: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with (self.folder / f"{name}.log").open("ab") as log:
            self.processes.append(
                subprocess.Popen(
                    [str(SPARK_HOME / "bin" / "spark-class"), *arguments],
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def state(self) -> dict:
        return requests.get(self.json_url, timeout=5).json()

    def _wait(self, ready, what: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(process.poll() is not None for process in self.processes):
                raise RuntimeError(f"spark {what}: a process exited; logs in {self.folder}")
            try:
                if ready(self.state()):
                    return
            except (requests.RequestException, ValueError):
                pass
            time.sleep(1)
        raise TimeoutError(f"spark {what} not ready within {timeout:.0f}s; logs in {self.folder}")

    def start(self) -> StandaloneCluster:
        self._launch(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.webui_port),
        )
        self._wait(lambda state: state.get("status") == "ALIVE", "master")
        self._launch(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            "--host",
            "127.0.0.1",
            "--cores",
            "2",
            "--memory",
            WORKER_MEMORY,
            "--webui-port",
            str(self.worker_webui_port),
            "--work-dir",
            str(self.folder / "work"),
        )
        self._wait(lambda state: state.get("aliveworkers") == 1, "worker")
        return self

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster(paths):
    running = StandaloneCluster(paths.var / "spark-cluster").start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def executor_python(paths) -> Path:
    return deps_only_python(paths.var / "executor-python")


@pytest.fixture(scope="module")
def runs(paths, cluster, executor_python, demo_run):
    """The taxi DAG and the forecast DAG (seasonal-naive) on the cluster, on the month, rows and logical dates of the
    session's demo, which ran the same DAGs in local mode."""
    assert demo_run.returncode == 0, f"the demo, the local-mode reference, failed: {demo_run.paths.var}/demo-output.txt"
    source_root = paths.var / "scaleout-source"
    sample_server.publish_months(source_root, [MONTH], ROWS)
    connection = json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1", "port": cluster.port})
    on_cluster = IsolatedVar(
        paths.var / "scaleout-cluster",
        {
            "AIRFLOW_CONN_SPARK_DEFAULT": connection,
            "SPARK_PYSPARK_PYTHON": str(executor_python),
            "SPARK_LOCAL_IP": "127.0.0.1",
        },
    ).setup()
    try:
        with sample_server.serve(source_root) as source_env:
            on_cluster.dags_test("taxi", "ingest_yellow_taxi_data", FIRST_INGEST_DATE, env=source_env)
            on_cluster.dags_test(
                "forecast", "forecast_yellow_rides", FIRST_FORECAST_DATE, {"model": "seasonal_naive"}, source_env
            )
        timings = {
            "local": round(demo_run.timings()["steps"]["ingest_yellow_taxi_data"], 1),
            "cluster": round(on_cluster.results["taxi"].seconds, 1),
        }
        (paths.bench).mkdir(parents=True, exist_ok=True)
        (paths.bench / "taxi-dag-cluster-vs-local.json").write_text(json.dumps({"rows": ROWS, "seconds": timings}))
        yield {"local": demo_run, "cluster": on_cluster}
    finally:
        on_cluster.stop()


def test_both_dags_succeed_on_the_cluster_and_the_master_lists_their_applications_completed(cluster, runs):
    state = cluster.state()
    assert state["activeapps"] == []
    completed = state["completedapps"]
    assert {app["state"] for app in completed} == {"FINISHED"}
    assert len(completed) == len(SPARK_TASKS), [app["name"] for app in completed]
    for key, spark_tasks in (("taxi", 1), ("forecast", 3)):
        log = runs["cluster"].results[key].log
        assert log.count(f"Spark-Submit cmd: spark-submit --master {cluster.master_url} ") == spark_tasks, key


def _seasonal_naive_only(table: pa.Table) -> pa.Table:
    """The demo also ran the weather model: its forecasts are not the cluster's to match."""
    if "model_name" not in table.column_names:
        return table
    return table.filter(pc.equal(table["model_name"], "seasonal_naive"))


@pytest.mark.parametrize("table", [naming.TAXI_RAW, naming.HOURLY_ACTUALS, naming.HOURLY_FORECAST])
def test_the_cluster_writes_the_same_rows_as_local_mode(runs, table):
    local = _seasonal_naive_only(runs["local"].table(table))
    on_cluster = runs["cluster"].table(table)
    assert local.num_rows > 0
    assert comparable(on_cluster, RUN_SPECIFIC[table]) == comparable(local, RUN_SPECIFIC[table])


@pytest.mark.usefixtures("demo_run")  # in the demo's group, so that the module's one cluster serves this test too
def test_executors_import_the_project_only_from_the_shipped_zip(paths, cluster, executor_python, monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": cluster.master_url}))
    monkeypatch.setenv("SPARK_PYSPARK_PYTHON", str(executor_python))
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")

    def probe(name: str, **overrides) -> list[dict]:
        output = paths.var / "spark-cluster" / f"{name}.json"
        launch = {**submit.spark_submit_kwargs(paths, lineage=False), **overrides}
        SparkSubmitHook(**launch, name=name, application_args=[str(output)]).submit(str(PROBE))
        return json.loads(output.read_text())

    shipped = probe("probe_shipped")
    zip_name = Path(submit.spark_submit_kwargs(paths)["py_files"]).name
    for executor in shipped:
        assert executor["python"] == str(executor_python)
        for module in ("include", "spark_jobs"):
            assert f"{zip_name}/" in executor[module], executor
            assert not executor[module].startswith(str(settings.PROJECT_ROOT / module)), executor

    not_shipped = probe("probe_not_shipped", py_files=None)
    assert {executor.get("error") for executor in not_shipped} == {"ModuleNotFoundError: No module named 'include'"}
