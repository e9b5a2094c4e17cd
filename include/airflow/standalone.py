"""``make airflow`` stopped with Ctrl-C: every process of ``airflow standalone`` ends, within a bound.

Ctrl-C reaches ``airflow standalone`` and its components (one process group, the terminal's). Standalone then
terminates each component and waits for each one's output to end. LocalExecutor's idle workers never end on that
signal (they ignore SIGINT, and SIGTERM only sets a flag they do not read: Trap 35) and they hold the scheduler's
output pipe. So the scheduler waits for them in its executor's shutdown, standalone waits on the pipe, and Ctrl-C
left ``make airflow`` hanging with the scheduler, the triggerer and the workers running. Measured on 25 November
2026: still running 90 s after Ctrl-C, after one DAG run.

``stop`` gives Airflow its own graceful shutdown first (``GRACE_SECONDS``). It then ends the stuck LocalExecutor
workers, which lets the scheduler's shutdown finish. Only what is still running after that is killed. A second
Ctrl-C skips the waiting.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable

GRACE_SECONDS = 15.0  # components that can stop do so within seconds
AFTER_WORKERS_SECONDS = 10.0  # the scheduler's shutdown, once its workers are gone
LOCAL_EXECUTOR_WORKER = "airflow worker -- LocalExecutor"  # the title Airflow gives the workers (setproctitle)


def _tree(pid: int) -> list:
    """``pid``'s descendants now, while they are still its descendants: a worker whose scheduler has exited is
    re-parented to init and can no longer be found from here."""
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _command(process) -> str:
    import psutil

    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def _alive(processes: list) -> list:
    import psutil

    alive = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
    return alive


def _kill(processes: list) -> None:
    import psutil

    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(processes, timeout=5)


def _wait(child: subprocess.Popen, seconds: float) -> int | None:
    try:
        return child.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None
    except KeyboardInterrupt:
        return None  # Ctrl-C again: the user will not wait; what is left is ended now


def stop(
    child: subprocess.Popen,
    say: Callable[[str], None] = print,
    grace: float = GRACE_SECONDS,
    after_workers: float = AFTER_WORKERS_SECONDS,
) -> int:
    """Stop ``airflow standalone`` (``child``) after Ctrl-C and return its exit status. Everything it started has
    ended when this returns: what is still running once standalone has exited (it may exit and leave its
    components behind) is ended too."""
    tree = _tree(child.pid)
    child.send_signal(signal.SIGINT)  # a Ctrl-C sent to `pipeline ui` alone (kill -INT) reaches standalone too
    started = time.monotonic()
    status = _wait(child, grace)
    if status is None:
        workers = [p for p in _alive(tree) if LOCAL_EXECUTOR_WORKER in _command(p)]
        if workers:
            say(
                f"pipeline: Airflow did not stop within {time.monotonic() - started:.0f} s of Ctrl-C; ending "
                f"{len(workers)} idle LocalExecutor worker(s), which ignore it (Trap 35)"
            )
            _kill(workers)
        status = _wait(child, after_workers)
    left = _alive(tree)
    if left:
        say(f"pipeline: ending {len(left)} of Airflow's processes still running after Ctrl-C")
        _kill(left)
    if status is None:
        child.kill()
        status = child.wait()
    return status
