"""Ctrl-C on `make airflow` ends every process of `airflow standalone` within a bound (include/airflow/standalone.py).

Real processes shaped as Airflow's were when Ctrl-C hung (measured: still running 90 s after it): a "standalone" that
terminates its component on SIGINT and then reads the component's output until it ends; a "scheduler" that, asked to
stop, waits for its worker; and an idle "LocalExecutor worker" that ignores SIGINT and SIGTERM and holds the
scheduler's output pipe (Trap 35). Airflow itself is stopped this way by every `make airflow` of the suite
(tests/integration/running_airflow.py asserts how long `pipeline ui` took and what it left)."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from include.airflow import standalone

pytestmark = pytest.mark.timeout(60)  # a stop that waits without a bound hangs: fail, do not hang the suite

WORKER = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], "w").write("up")
while True:
    time.sleep(1)
"""

# The worker's title, spelled so that only the worker's own command line holds it (not its parents' sources).
WORKER_TITLE = standalone.LOCAL_EXECUTOR_WORKER.replace(" ", "_")
assert WORKER_TITLE != standalone.LOCAL_EXECUTOR_WORKER

# A component: starts the worker (which inherits its stdout), and on SIGTERM waits for it, as the scheduler's
# executor shutdown waits for its workers; `deaf` makes it ignore SIGTERM as well.
COMPONENT = f"""
import os, signal, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", {WORKER!r}, sys.argv[1], {WORKER_TITLE!r}.replace("_", " ")])
def stop(*_):
    worker.wait()
    sys.exit(0)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[2] == "deaf" else stop)
while True:
    time.sleep(1)
"""

# standalone: on SIGINT, terminate the component, then read its output until the pipe ends (its reader threads).
STANDALONE = f"""
import signal, subprocess, sys
component = subprocess.Popen([sys.executable, "-c", {COMPONENT!r}, sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE)
try:
    signal.pause()
except KeyboardInterrupt:
    if sys.argv[2] == "standalone-exits":
        sys.exit(4)  # as a second Ctrl-C did: standalone's main thread ends, its components run on
    component.terminate()
    component.stdout.read()
    sys.exit(3)
"""


def _start(tmp_path, component_mode: str = "waits-for-worker") -> tuple[subprocess.Popen, list]:
    flag = tmp_path / "worker.up"
    child = subprocess.Popen([sys.executable, "-c", STANDALONE, str(flag), component_mode], start_new_session=True)
    deadline = time.monotonic() + 30
    while not flag.exists():
        assert time.monotonic() < deadline, "the fake Airflow did not start"
        time.sleep(0.05)
    return child, psutil.Process(child.pid).children(recursive=True)


def _running(processes) -> list:
    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.NoSuchProcess:
            continue
    return alive


@pytest.fixture
def cleanup():
    started = []
    yield started
    for process in _running(started):
        process.kill()


def test_the_deaf_workers_are_ended_after_the_grace_and_then_airflow_stops_by_itself(tmp_path, cleanup):
    child, tree = _start(tmp_path)
    cleanup.extend(tree)
    said = []
    began = time.monotonic()
    status = standalone.stop(child, say=said.append, grace=1.0, after_workers=10.0)
    took = time.monotonic() - began
    assert status == 3, "standalone's own exit: it finished its shutdown once the worker was gone"
    assert not _running(tree), "a process of Airflow outlived Ctrl-C"
    assert took < 8, took
    assert len(said) == 1 and "ending 1 idle LocalExecutor worker(s)" in said[0], said


def test_without_the_fix_the_same_processes_are_still_running_after_ctrl_c(tmp_path, cleanup):
    """What `pipeline ui` did before: forward Ctrl-C and wait. The fake reproduces the hang this module is about."""
    child, tree = _start(tmp_path)
    cleanup.extend([*tree, psutil.Process(child.pid)])
    child.send_signal(2)
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=3)
    assert len(_running(tree)) == 2


def test_a_component_that_ignores_everything_is_killed_after_the_bound(tmp_path, cleanup):
    child, tree = _start(tmp_path, component_mode="deaf")
    cleanup.extend(tree)
    said = []
    status = standalone.stop(child, say=said.append, grace=0.5, after_workers=0.5)
    assert not _running(tree) and child.poll() is not None
    assert status in (3, -9), status  # standalone ends once the pipe does, or is killed last
    assert any("still running after Ctrl-C" in line for line in said), said


def test_airflow_that_stops_within_the_grace_is_left_to_stop_and_nothing_is_said(tmp_path):
    quick = "import signal, sys\ntry:\n    signal.pause()\nexcept KeyboardInterrupt:\n    sys.exit(0)\n"
    child = subprocess.Popen([sys.executable, "-c", quick], start_new_session=True)
    time.sleep(0.5)  # its handler is in place
    said = []
    assert standalone.stop(child, say=said.append, grace=5.0) == 0
    assert said == []


def test_components_that_outlive_standalone_are_ended_too(tmp_path, cleanup):
    """Seen with Airflow: a second SIGINT ends standalone's main thread at once, and the scheduler, the triggerer and
    the workers run on, orphaned."""
    child, tree = _start(tmp_path, component_mode="standalone-exits")
    cleanup.extend(tree)
    said = []
    began = time.monotonic()
    assert standalone.stop(child, say=said.append, grace=10.0) == 4
    assert time.monotonic() - began < 8, "standalone had exited: nothing to wait for"
    assert not _running(tree)
    assert said == ["pipeline: ending 2 of Airflow's processes still running after Ctrl-C"]


def test_a_second_ctrl_c_ends_the_wait_at_once(tmp_path, cleanup):
    """The user presses Ctrl-C again during the grace: nothing more is waited for, and nothing is left."""
    import _thread
    import threading

    child, tree = _start(tmp_path)
    cleanup.extend(tree)
    said = []
    threading.Timer(0.5, _thread.interrupt_main).start()  # the grace below is 60 times longer: it lands inside it
    began = time.monotonic()
    standalone.stop(child, say=said.append, grace=30.0, after_workers=30.0)
    assert time.monotonic() - began < 10
    assert not _running(tree) and child.poll() is not None
    assert said and "ending 1 idle LocalExecutor worker(s)" in said[0], said
    assert int(said[0].split("within ")[1].split(" s")[0]) < 5, "the message gives the time waited, not the grace"
