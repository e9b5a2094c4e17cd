"""Run DAGs with ``airflow dags test`` in the project's Airflow home and report how each run ended.

``dags_test`` starts one ``airflow dags test`` process for one run. ``dags_test_in_one_process`` runs several, one
after another, through the same CLI command in one Airflow process (``python -m include.airflow.runs``): the
process's start-up (imports, configuration, providers) and the in-process execution API that ``dags test`` builds for
its first task are then paid once, not once per run: on the demo's four runs that was about 15 s per run.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from include.core import settings

FINISHED = re.compile(
    r"DagRun Finished: dag_id=(?P<dag_id>[^,]+), logical_date=[^,]*, run_id=(?P<run_id>[^,]+),.*?state=(?P<state>\w+)"
)


@dataclass
class DagTestResult:
    dag_id: str
    state: str
    run_id: str | None
    seconds: float
    returncode: int
    log: str

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0 and self.state == "success"


def dags_test_arguments(dag_id: str, logical_date: str, conf: dict | None = None) -> list[str]:
    """The arguments of ``airflow dags test`` for one run (after ``airflow``)."""
    return ["dags", "test", dag_id, logical_date, *(["-c", json.dumps(conf)] if conf else [])]


def dags_test(
    dag_id: str,
    logical_date: str,
    conf: dict | None = None,
    env: dict[str, str] | None = None,
    log_file: Path | None = None,
    timeout: float = 1800,
) -> DagTestResult:
    command = [str(Path(sys.executable).parent / "airflow"), *dags_test_arguments(dag_id, logical_date, conf)]
    started = time.monotonic()
    completed = subprocess.run(
        command,
        env={**os.environ, **settings.airflow_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = completed.stdout + completed.stderr
    if log_file:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        log_file.write_text(output)
    return dag_test_result(dag_id, output, time.monotonic() - started, completed.returncode)


def dag_test_result(dag_id: str, output: str, seconds: float, returncode: int) -> DagTestResult:
    """How a run ended, from its ``airflow dags test`` output (the last ``DagRun Finished`` line) and exit code."""
    finished = list(FINISHED.finditer(output))
    match = finished[-1] if finished else None
    return DagTestResult(
        dag_id=dag_id,
        state=match["state"] if match else "unknown",
        run_id=match["run_id"] if match else None,
        seconds=seconds,
        returncode=returncode,
        log=output,
    )


# The child of dags_test_in_one_process: this module's main().
ONE_PROCESS_COMMAND = [sys.executable, "-m", "include.airflow.runs"]
EXIT_GRACE_SECONDS = 60  # for the child to exit after its last run


@dataclass(frozen=True)
class DagTest:
    """One ``airflow dags test`` run of a sequence, and the file its output goes to."""

    dag_id: str
    logical_date: str
    conf: dict
    log_file: Path


def dags_test_in_one_process(
    tests: Sequence[DagTest], env: dict[str, str] | None = None, timeout: float = 1800
) -> Iterator[DagTestResult]:
    """Run ``tests`` one after another in one Airflow process, each as ``airflow dags test`` runs it, stopping after
    the first that does not succeed; yield each run's result as it ends.

    Each run's output (Airflow's log, its tasks' and their subprocesses') goes to its own ``log_file``; what the
    process prints outside the runs goes to ``process.log`` beside the first. ``timeout`` is per run: a run that
    takes longer has its process killed and is reported failed (returncode -9).
    """
    if not tests:
        return
    process_log = tests[0].log_file.with_name("process.log")
    for test in tests:
        test.log_file.parent.mkdir(parents=True, exist_ok=True)
    spec = json.dumps([{**asdict(test), "log_file": str(test.log_file)} for test in tests])
    with process_log.open("w") as stderr:
        process = subprocess.Popen(
            ONE_PROCESS_COMMAND,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, **settings.airflow_env(), **(env or {})},
            text=True,
            start_new_session=True,  # its own process group: what it leaves behind can be ended with it
        )
        process.stdin.write(spec)
        process.stdin.close()
        # The child's lines are read by a thread into a queue: waiting on the pipe itself (select) would miss a line
        # that the buffered reader already took in with the one before it.
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True)
        reader.start()
        reported: list[DagTestResult] = []
        try:
            for result in _results_as_they_end(process, lines, tests, timeout):
                reported.append(result)
                yield result
        finally:
            # After its last run or a failed one the child ends by itself, flushing the lineage events it still
            # holds; only a caller that stopped while runs remained gets it killed at once.
            mid_run = len(reported) < len(tests) and all(result.succeeded for result in reported)
            _end(process, wait=not mid_run)
            reader.join(timeout=10)
            if not reader.is_alive():  # closing under a blocked read would wait for that read's lock
                process.stdout.close()


def _end(process: subprocess.Popen, wait: bool) -> None:
    """End the child and every process of its group: after ``EXIT_GRACE_SECONDS`` for the child to exit by itself
    (``wait``), or at once. What it leaves behind is killed too: the OpenLineage provider emits DAG-run events from a
    forked process pool whose workers outlive a process that ran several ``dags test`` (found blocked on their
    queue, parent 1, holding the result pipe open: Trap 42)."""
    if wait:
        try:
            process.wait(timeout=EXIT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            pass
    _kill_group(process)
    process.wait()


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # the group is gone: the child and everything it started have ended
        pass


def _results_as_they_end(
    process: subprocess.Popen, lines: queue.Queue, tests: Sequence[DagTest], timeout: float
) -> Iterator[DagTestResult]:
    for test in tests:
        started = time.monotonic()
        line = _next_line(process, lines, started + timeout)
        if line:
            ended = json.loads(line)
            seconds, returncode = ended["seconds"], ended["returncode"]
        else:  # timed out, or the process ended without reporting this run
            _kill_group(process)
            returncode = process.wait() or -9
            seconds = time.monotonic() - started
        output = test.log_file.read_text(errors="replace") if test.log_file.exists() else ""
        result = dag_test_result(test.dag_id, output, seconds, returncode)
        yield result
        if not result.succeeded:
            return


def _next_line(process: subprocess.Popen, lines: queue.Queue, deadline: float) -> str | None:
    """The child's next line; None at the deadline, or once the child has exited without writing it (its pipe may
    stay open after it exits: a process it forked can hold it)."""
    while (left := deadline - time.monotonic()) > 0:
        try:
            return lines.get(timeout=min(left, 1.0))
        except queue.Empty:
            if process.poll() is not None:
                try:  # what it wrote just before exiting may still be on its way through the reader
                    return lines.get(timeout=2)
                except queue.Empty:
                    return None
    return None


def _read_lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


@contextmanager
def _output_to(log_file: Path) -> Iterator[None]:
    """Point this process's stdout and stderr (the file descriptors, so subprocesses follow) at ``log_file``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with log_file.open("w") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _run_here(parser, test: dict) -> int:
    """One ``airflow dags test`` in this process, as Airflow's ``main`` runs it; its exit code."""
    try:
        args = parser.parse_args(dags_test_arguments(test["dag_id"], test["logical_date"], test["conf"]))
        args.func(args)
    except SystemExit as exit:  # `dags test` exits with "DagRun failed" when the run failed
        if exit.code not in (None, 0):
            print(exit.code, file=sys.stderr)
        return exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


def main() -> None:
    """The child of ``dags_test_in_one_process``: the runs from stdin, one JSON line per ended run on stdout."""
    from airflow.cli import cli_parser
    from airflow.configuration import write_default_airflow_configuration_if_needed

    tests = json.loads(sys.stdin.read())
    results = os.fdopen(os.dup(1), "w", buffering=1)
    write_default_airflow_configuration_if_needed()
    parser = cli_parser.get_parser()
    for test in tests:
        started = time.monotonic()
        with _output_to(Path(test["log_file"])):
            returncode = _run_here(parser, test)
        results.write(json.dumps({"seconds": time.monotonic() - started, "returncode": returncode}) + "\n")
        if returncode:
            break


if __name__ == "__main__":
    main()
