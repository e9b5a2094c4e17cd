"""Airflow as users run it: `make airflow SAMPLE_DATA=1` (``pipeline ui --sample-data``) in a ``var/`` of its own.

``airflow standalone`` starts the api-server, scheduler (LocalExecutor), dag-processor and triggerer; runs are
triggered through the REST API the UI's Trigger button calls, with the admin password Airflow generated.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from include.airflow import standalone
from include.core import settings
from include.services import postgres
from tests.integration import listening
from tests.support import environment_of_var, free_port

FINISHED = {"success", "failed"}


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def _described(process) -> str:
    import psutil

    try:
        command = " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        command = "?"
    return f"{process.pid} {command[:100]}"


# `pipeline ui` started as a script's background command is (`make airflow &` in a shell without job control): with
# SIGINT ignored, which exec keeps (Trap 43). Every Ctrl-C of the suite then tests that `pipeline ui` takes it anyway,
# whether or not pytest itself was started that way (a CI runner's script; a fresh clone's run from a tool).
AS_A_SCRIPTS_BACKGROUND_COMMAND = (
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])",
)

# include/airflow/standalone.py's bound (its grace, then its wait once the idle workers are ended) and a margin
CTRL_C_TIMEOUT = standalone.GRACE_SECONDS + standalone.AFTER_WORKERS_SECONDS + 20


@dataclass(frozen=True)
class StopOutcome:
    exited_in: float | None  # seconds from Ctrl-C to `pipeline ui`'s exit; None: it had not exited
    left: list[str]  # the processes of its session still running then


class RunningAirflow:
    def __init__(
        self,
        var_dir: Path,
        taxi_rows: int = 20_000,
        extra_env: dict[str, str] | None = None,
        sample_months: str | None = None,
    ):
        self.paths = settings.Paths(var_dir.resolve())
        self.sample_months = sample_months
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = environment_of_var(
            self.paths.var,
            SAMPLE_SOURCE_PORT=str(free_port()),
            DEMO_ROWS_PER_MONTH=str(taxi_rows),
            # the scheduler's and triggerer's log servers, off the defaults another Airflow may hold
            AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT=str(free_port()),
            AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT=str(free_port()),
            AIRFLOW_METADATA_DB_PORT=str(free_port()),
            **(extra_env or {}),
        )
        self.log_path = self.paths.var / "logs" / "airflow-standalone.log"
        self.stopped: StopOutcome | None = None
        self.process: subprocess.Popen | None = None
        self._token: str | None = None
        self._sampling = None
        self.listeners: set[listening.Listener] = set()

    # lifecycle
    def start(self, timeout: float = 300) -> RunningAirflow:
        venv_bin = Path(sys.executable).parent
        subprocess.run(
            [sys.executable, "-m", "include.setup.bootstrap"],
            env=self.env,
            check=True,
            cwd=settings.PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
        )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # Every socket this var/'s processes listen on while Airflow runs (the loopback test reads it).
        self._sampling = listening.sampled(
            self.paths.var, every=1.0, roots=lambda: [self.process.pid] if self.process else []
        )
        self.listeners = self._sampling.__enter__()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    *AS_A_SCRIPTS_BACKGROUND_COMMAND,
                    str(venv_bin / "pipeline"),
                    "ui",
                    "--sample-data",
                    "--port",
                    str(self.port),
                    *(["--sample-months", self.sample_months] if self.sample_months else []),
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=settings.PROJECT_ROOT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"`pipeline ui` exited with {self.process.returncode}; log {self.log_path}")
            if self._healthy():
                return self
            time.sleep(2)
        raise TimeoutError(f"Airflow did not become healthy within {timeout:.0f}s; log {self.log_path}")

    def _healthy(self) -> bool:
        try:
            health = requests.get(f"{self.base_url}/api/v2/monitor/health", timeout=5).json()
        except (requests.RequestException, ValueError):
            return False
        return all(health.get(part, {}).get("status") == "healthy" for part in ("metadatabase", "scheduler"))

    def stop(self) -> None:
        """Ctrl-C as a user would, then make sure nothing of this var/ is left (workers, spark-submit, servers).

        ``stopped`` records how long `pipeline ui` took to exit after Ctrl-C (None: not within ``CTRL_C_TIMEOUT``)
        and the processes of its session still running when it had: what a user's Ctrl-C would have left."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            started = time.monotonic()
            exited_in = None
            try:
                self.process.wait(timeout=CTRL_C_TIMEOUT)
                exited_in = round(time.monotonic() - started, 1)
            except subprocess.TimeoutExpired:
                pass
            left = [_described(process) for process in self._session_processes()]
            self.stopped = StopOutcome(exited_in, left)
        subprocess.run(
            [str(Path(sys.executable).parent / "pipeline"), "catalog", "stop"],
            env=self.env,
            stdout=subprocess.DEVNULL,
            cwd=settings.PROJECT_ROOT,
        )
        postgres.stop_metadata_db(self.paths)  # a fast shutdown: it ends the sessions Airflow's processes still hold
        self._kill_leftovers()
        if self._sampling is not None:
            self._sampling.__exit__(None, None, None)
            self._sampling = None

    def assert_stopped_like_ctrl_c_should(self) -> None:
        """After ``stop``: `pipeline ui` exited within the bound of include/airflow/standalone.py and left no process
        of its session running (before the fix, LocalExecutor's workers kept standalone, the scheduler and the
        triggerer running after Ctrl-C, Trap 35)."""
        if self.stopped is None:
            return  # never started, or had already exited: the run's own failure says why
        assert self.stopped.exited_in is not None, (
            f"`pipeline ui` still ran {CTRL_C_TIMEOUT:.0f} s after Ctrl-C; left: {self.stopped.left}; log {self.log_path}"
        )
        assert not self.stopped.left, f"Ctrl-C left processes running: {self.stopped.left}"

    def _session_processes(self) -> list:
        """The live processes of the session `pipeline ui` led (zombies are already over)."""
        import psutil

        if self.process is None:
            return []
        found = []
        for process in psutil.process_iter():
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                if (
                    process.pid != os.getpid()
                    and _session_of(process.pid) == self.process.pid
                    and process.status() != psutil.STATUS_ZOMBIE
                ):
                    found.append(process)
        return found

    def _kill_leftovers(self) -> None:
        """Every process of the session `pipeline ui` led, and every process of this var/ (by its environment).

        What is left of the session after Ctrl-C and its wait is stuck: Airflow's LocalExecutor workers outlive the
        scheduler, orphaned, and a SIGTERM only sets a flag they never read; their environment is overwritten by their
        title, so only the session finds them (Trap 35). They get SIGKILL; the others a SIGTERM first."""
        import psutil

        marker = str(self.paths.var)
        stuck = self._session_processes()
        in_session = {process.pid for process in stuck}
        leftovers = []
        for process in psutil.process_iter():
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                if (
                    process.pid != os.getpid()
                    and process.pid not in in_session
                    and process.environ().get("PIPELINE_VAR_DIR") == marker
                ):
                    leftovers.append(process)
        for process in stuck:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        for process in leftovers:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.terminate()
        _, alive = psutil.wait_procs(stuck + leftovers, timeout=20)
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()

    # REST API, as the UI uses it
    @property
    def admin_password(self) -> str:
        passwords = json.loads((self.paths.airflow_home / "simple_auth_manager_passwords.json.generated").read_text())
        return passwords["admin"]

    def token(self) -> str:
        if self._token is None:
            response = requests.post(
                f"{self.base_url}/auth/token", json={"username": "admin", "password": self.admin_password}, timeout=30
            )
            response.raise_for_status()
            self._token = response.json()["access_token"]
        return self._token

    def api(self, method: str, path: str, attempts: int | None = None, **kwargs) -> dict:
        """A REST call as the UI makes it. A write is made once: on PostgreSQL (`make airflow`'s metadata database)
        a trigger that met other writers must still answer 200. A read is retried on 5xx (a component restarting)."""
        attempts = attempts or (4 if method == "GET" else 1)
        for attempt in range(1, attempts + 1):
            response = requests.request(
                method,
                f"{self.base_url}/api/v2/{path.lstrip('/')}",
                headers={"Authorization": f"Bearer {self.token()}"},
                timeout=60,
                **kwargs,
            )
            if response.status_code < 500 or attempt == attempts:
                break
            time.sleep(5 * attempt)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: HTTP {response.status_code}: {response.text[:2000]}")
        return response.json() if response.content else {}

    def log_in(self, page, path: str, landed: str) -> None:
        """Open ``path`` in a Playwright page as a user does: the UI sends to its login page first, then to ``landed``."""
        page.goto(f"{self.base_url}{path}")
        page.wait_for_url("**/auth/login**", timeout=60_000)
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", self.admin_password)
        page.click("button:has-text('Sign in')")
        page.wait_for_url(landed, timeout=60_000)

    def wait_for_dag(self, dag_id: str, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return self.api("GET", f"dags/{dag_id}")
            except RuntimeError:
                time.sleep(3)
        raise TimeoutError(f"{dag_id} was not parsed within {timeout:.0f}s")

    def trigger(self, dag_id: str, logical_date: str, conf: dict | None = None) -> str:
        run = self.api("POST", f"dags/{dag_id}/dagRuns", json={"logical_date": logical_date, "conf": conf or {}})
        return run["dag_run_id"]

    def runs(self, dag_id: str) -> list[dict]:
        return self.api("GET", f"dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"]

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 1200) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in FINISHED:
                return run
            time.sleep(5)
        raise TimeoutError(f"{dag_id} {run_id} did not finish within {timeout:.0f}s; log {self.log_path}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        return self.api("GET", f"dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]


INGEST_DAGS = ("ingest_yellow_taxi_data", "ingest_weather_data")
FORECAST_DAG = "forecast_yellow_rides"
SAMPLE_LOGICAL_DATE = "2025-02-01T00:00:00Z"  # the runs whose data interval ends on Feb 1 ingest January (the sample)
# Triggered right after the first two, twice more: months not published by the sample server (their runs skip).
EXTRA_LOGICAL_DATES = ("2024-07-01T00:00:00Z", "2024-08-01T00:00:00Z")
UI_SPARK_MASTER = "local[2]"  # what the runs' spark_default is set to through the connections API the UI uses


@dataclass
class UserRuns:
    """What a user does first in the UI: edit spark_default, trigger both ingest DAGs at once, let the Assets start
    the forecast. Shared by every test of the UI path (one Airflow, one set of runs per session)."""

    airflow: RunningAirflow
    run_ids: dict[str, str]
    finished: dict[str, dict]
    forecast: dict
    seconds_to_forecast: float
    extra_run_ids: dict[tuple[str, str], str]  # (dag_id, logical date) of the triggers of unpublished months
    extra_finished: dict[tuple[str, str], dict]
    # what the alert connections' webhook receiver and SMTP server received (tests/alert_receivers.Received)
    hooks: object = None
    mails: object = None


def run_as_a_user(airflow: RunningAirflow, alerts: tuple = (None, None)) -> UserRuns:
    import threading

    for dag_id in (*INGEST_DAGS, FORECAST_DAG):
        airflow.wait_for_dag(dag_id)
    airflow.api(
        "PATCH",
        "connections/spark_default",
        json={"connection_id": "spark_default", "conn_type": "spark", "host": UI_SPARK_MASTER},
    )
    run_ids: dict[str, str] = {}
    extra_run_ids: dict[tuple[str, str], str] = {}
    failures: list[str] = []

    def trigger_round(logical_date: str, into: dict, key) -> None:
        """Both ingest DAGs at once, as two users clicking Trigger together; any non-2xx answer is a failure."""
        barrier = threading.Barrier(len(INGEST_DAGS))

        def trigger(dag_id: str) -> None:
            barrier.wait()
            try:
                into[key(dag_id)] = airflow.trigger(dag_id, logical_date)
            except Exception as error:  # noqa: BLE001 - reported below with every other failure
                failures.append(f"{dag_id} {logical_date}: {error}")

        threads = [threading.Thread(target=trigger, args=(dag_id,)) for dag_id in INGEST_DAGS]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    triggered_at = time.monotonic()
    trigger_round(SAMPLE_LOGICAL_DATE, run_ids, lambda dag_id: dag_id)
    # Again and again, while the first runs start: months the sample server does not publish (their runs skip).
    for logical_date in EXTRA_LOGICAL_DATES:
        trigger_round(logical_date, extra_run_ids, lambda dag_id, date=logical_date: (dag_id, date))
    assert not failures, f"every trigger must answer 200 at once: {failures}; log {airflow.log_path}"
    assert set(run_ids) == set(INGEST_DAGS), f"a trigger failed; log {airflow.log_path}"
    finished = {dag_id: airflow.wait_for_run(dag_id, run_id) for dag_id, run_id in run_ids.items()}
    extra_finished = {key: airflow.wait_for_run(key[0], run_id) for key, run_id in extra_run_ids.items()}
    forecast = wait_for_asset_triggered_forecast(airflow)
    seconds = time.monotonic() - triggered_at
    (airflow.paths.var / "trigger-to-forecast-seconds.txt").write_text(f"{seconds:.1f}\n")
    print(f"\ntrigger -> asset-triggered forecast {forecast['state']}: {seconds:.0f} s")
    return UserRuns(airflow, run_ids, finished, forecast, seconds, extra_run_ids, extra_finished, *alerts)


def wait_for_asset_triggered_forecast(airflow: RunningAirflow, timeout: float = 1200) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = [run for run in airflow.runs(FORECAST_DAG) if run["run_type"] == "asset_triggered"]
        if runs:
            return airflow.wait_for_run(FORECAST_DAG, runs[0]["dag_run_id"], timeout=deadline - time.monotonic())
        time.sleep(5)
    raise TimeoutError("no asset-triggered forecast run appeared")
