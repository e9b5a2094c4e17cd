"""The harness that runs `make airflow` for the UI tests (tests/integration/running_airflow.py) leaves nothing behind:
Airflow's LocalExecutor workers were found alive after the suite, orphaned, with no environment left to name their
var/ (Trap 35), so the harness also ends every process of the session `pipeline ui` led."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from tests.integration.running_airflow import RunningAirflow

# The leader forks a child that outlives it (an orphan, as the workers were), deaf to SIGTERM as they are (their
# handler sets a flag they never read), and records the child's pid.
ORPHANING = (
    "import os, signal, sys, time\n"
    "if os.fork() == 0:\n"
    "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "    open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "    time.sleep(300)\n"
)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_for_pid(path, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise TimeoutError(path)


def test_an_orphan_of_the_ui_session_without_the_var_in_its_environment_is_ended_and_others_are_not(tmp_path):
    airflow = RunningAirflow(tmp_path / "var")
    bare_environment = {"PATH": os.environ["PATH"]}  # no PIPELINE_VAR_DIR: the workers' environment was overwritten
    airflow.process = subprocess.Popen(
        [sys.executable, "-c", ORPHANING, str(tmp_path / "orphan.pid")], start_new_session=True, env=bare_environment
    )
    airflow.process.wait(timeout=30)
    orphan = _wait_for_pid(tmp_path / "orphan.pid")
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True, env=bare_environment)
    try:
        assert psutil.Process(orphan).status() != psutil.STATUS_ZOMBIE
        airflow._kill_leftovers()
        assert _gone(orphan), "the orphan of the UI's session outlived the harness"
        assert bystander.poll() is None, "a process of another session was ended"
    finally:
        bystander.kill()
        bystander.wait()
        if not _gone(orphan):
            os.kill(orphan, 9)
