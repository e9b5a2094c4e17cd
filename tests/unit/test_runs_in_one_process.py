"""The parent side of ``runs.dags_test_in_one_process``, with a stand-in child (no Airflow): how results are read
while the child goes on, and what a silent or dead child is reported as. The child's Airflow side is tested on real
Airflow in tests/integration/test_dags_test_in_one_process.py."""

from __future__ import annotations

import itertools
import sys
import time
import uuid

import pytest

from include.airflow import runs
from tests.support import live_processes_with_env

# Reads the runs from stdin, writes a finished line into each run's log, reports the runs' results as the real child
# does (one JSON line each), then behaves as told: "sleep" (goes on without a word) or "die" (exits 3).
STAND_IN = """
import json, subprocess, sys, time
tests = json.loads(sys.stdin.read())
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])  # as a provider's pool worker would stay
report = [t for t in tests if t["conf"].get("report")]
for test in report:
    with open(test["log_file"], "w") as log:
        log.write("DagRun Finished: dag_id=%s, logical_date=x, run_id=run-%s, state=success, run_type=manual\\n"
                  % (test["dag_id"], test["dag_id"]))
sys.stdout.write("".join(json.dumps({"seconds": 0.5, "returncode": t["conf"].get("rc", 0)}) + "\\n" for t in report))
sys.stdout.flush()
then = tests[-1]["conf"].get("then")
if then == "die":
    sys.exit(3)
if then == "flush then exit":  # as the real child does after a failed run: its exit flushes what it holds
    time.sleep(1)
    open(tests[0]["log_file"] + ".exited", "w").close()
    sys.exit(1)
time.sleep(60)
"""


def _tests(tmp_path, reported: int, unreported: int, then: str = "sleep"):
    names = [f"dag_{index}" for index in range(reported + unreported)]
    return [
        runs.DagTest(name, "2025-02-01", {"report": index < reported, "then": then}, tmp_path / f"{name}.log")
        for index, name in enumerate(names)
    ]


def test_results_written_together_are_each_read_at_once(tmp_path, monkeypatch):
    """Two results reach the pipe in one write while the child goes on: the second must not wait for the child's
    next line (a select on the pipe would, since the buffered reader took both lines in with the first)."""
    monkeypatch.setattr(runs, "ONE_PROCESS_COMMAND", [sys.executable, "-c", STAND_IN])
    monkeypatch.setattr(runs, "EXIT_GRACE_SECONDS", 1)
    started = time.monotonic()
    results, seconds = [], []
    for result in runs.dags_test_in_one_process(_tests(tmp_path, reported=2, unreported=0), timeout=8):
        results.append(result)
        seconds.append(time.monotonic() - started)
    assert [(result.dag_id, result.state, result.succeeded) for result in results] == [
        ("dag_0", "success", True),
        ("dag_1", "success", True),
    ]
    assert [result.run_id for result in results] == ["run-dag_0", "run-dag_1"]
    assert seconds[1] < 8, "the second result waited for the timeout"


def test_a_run_not_reported_within_its_timeout_is_failed_and_the_child_killed(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "ONE_PROCESS_COMMAND", [sys.executable, "-c", STAND_IN])
    tests = _tests(tmp_path, reported=1, unreported=2)
    results = list(runs.dags_test_in_one_process(tests, timeout=3))
    assert [result.dag_id for result in results] == ["dag_0", "dag_1"], "nothing is reported after a failed run"
    assert results[0].succeeded and not results[1].succeeded
    assert results[1].returncode == -9 and results[1].state == "unknown"
    assert 2.5 <= results[1].seconds < 30


def test_a_child_that_dies_is_reported_with_its_exit_code(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "ONE_PROCESS_COMMAND", [sys.executable, "-c", STAND_IN])
    tests = _tests(tmp_path, reported=1, unreported=1, then="die")
    started = time.monotonic()
    results = list(runs.dags_test_in_one_process(tests, timeout=30))
    assert [(result.succeeded, result.returncode) for result in results] == [(True, 0), (False, 3)]
    assert time.monotonic() - started < 30, "a dead child must not be waited for until the timeout"


@pytest.mark.parametrize(
    ("reported", "unreported", "then", "consumed"),
    [
        (2, 0, "sleep", None),  # every run reported, the child lingers: killed after the grace period
        (1, 1, "die", None),  # the child exits on its own, its grandchild stays
        (1, 2, "sleep", None),  # a run times out
        (2, 1, "sleep", 1),  # the caller stops after the first result
    ],
)
def test_nothing_the_child_started_outlives_the_runs(tmp_path, monkeypatch, reported, unreported, then, consumed):
    monkeypatch.setattr(runs, "ONE_PROCESS_COMMAND", [sys.executable, "-c", STAND_IN])
    monkeypatch.setattr(runs, "EXIT_GRACE_SECONDS", 2)
    mark = uuid.uuid4().hex
    results = runs.dags_test_in_one_process(
        _tests(tmp_path, reported, unreported, then), env={"RUNS_TEST_MARK": mark}, timeout=3
    )
    next(results)
    assert live_processes_with_env("RUNS_TEST_MARK", mark), "the stand-in and its grandchild should be running"
    for _ in itertools.islice(results, None if consumed is None else consumed - 1):
        pass
    results.close()
    assert live_processes_with_env("RUNS_TEST_MARK", mark) == []


def test_after_a_failed_run_the_child_is_left_to_exit_by_itself(tmp_path, monkeypatch):
    """The demo stops reading at a failed run; the child then exits by itself, and its exit flushes the lineage
    events its provider still holds: it must not be killed before that."""
    monkeypatch.setattr(runs, "ONE_PROCESS_COMMAND", [sys.executable, "-c", STAND_IN])
    failing = runs.DagTest("dag_0", "2025-02-01", {"report": True, "rc": 1}, tmp_path / "dag_0.log")
    never = runs.DagTest("dag_1", "2025-02-01", {"then": "flush then exit"}, tmp_path / "dag_1.log")
    results = runs.dags_test_in_one_process([failing, never], timeout=30)
    first = next(results)
    assert not first.succeeded and first.returncode == 1
    results.close()
    assert (tmp_path / "dag_0.log.exited").exists(), "the child was killed before it could exit by itself"
