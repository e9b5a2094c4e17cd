"""``runs.dags_test_in_one_process`` (what `make demo` runs its four DAG runs with): several ``airflow dags test``
runs through Airflow's own CLI command in one process, each run's output in its own log, stopping at the first run
that fails. Real Airflow, on the session's metadata database; the DAGs are small ones of the test's own folder."""

from __future__ import annotations

import re
import uuid

import pytest

from include.airflow import runs
from tests.support import live_processes_with_env

pytestmark = [pytest.mark.integration]

DAG_FILE = """
import os
from datetime import datetime

from airflow.sdk import DAG, task

with DAG("one_process_{name}", schedule=None, start_date=datetime(2025, 1, 1), catchup=False):

    @task
    def say():
        print("RUN {name} IN PROCESS", os.getpid(), flush=True)
        if {fail}:
            raise RuntimeError("run {name} fails on purpose")

    say()
"""


@pytest.fixture
def dags_folder(tmp_path):
    folder = tmp_path / "dags"
    folder.mkdir()
    for name, fail in (("first", False), ("second", False), ("broken", True), ("after", False)):
        (folder / f"{name}.py").write_text(DAG_FILE.format(name=name, fail=fail))
    return folder


def test_runs_share_one_process_keep_their_own_logs_and_stop_at_the_first_failure(airflow_env, dags_folder, tmp_path):
    logs = tmp_path / "logs"
    tests = [
        runs.DagTest(f"one_process_{name}", "2025-02-01T00:00:00+00:00", {"note": name}, logs / f"{name}.log")
        for name in ("first", "second", "broken", "after")
    ]
    mark = uuid.uuid4().hex
    env = {"AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder), "RUNS_TEST_MARK": mark}
    results = list(runs.dags_test_in_one_process(tests, env=env, timeout=600))
    # The provider's forked workers that emit DAG-run events stayed behind before the process group was ended
    assert live_processes_with_env("RUNS_TEST_MARK", mark) == []

    assert [result.dag_id for result in results] == ["one_process_first", "one_process_second", "one_process_broken"]
    assert [result.state for result in results] == ["success", "success", "failed"]
    assert [result.succeeded for result in results] == [True, True, False]
    assert results[2].returncode != 0
    assert all(result.run_id for result in results)
    assert not tests[3].log_file.exists(), "the run after a failed one must not start"

    pids = []
    for test, result in zip(tests, results, strict=False):
        name = test.dag_id.removeprefix("one_process_")
        own = re.findall(rf"RUN {name} IN PROCESS (\d+)", result.log)
        assert own, f"the task's output is missing from its run's log {test.log_file}"
        others = {"first", "second", "broken"} - {name}
        assert not any(f"RUN {other} IN PROCESS" in result.log for other in others), "a run's log holds another's"
        pids.append(own[0])
    assert len(set(pids)) == 1, f"the runs ran in different processes: {pids}"
    assert "fails on purpose" in results[2].log


def test_a_run_that_outlives_its_timeout_is_killed_and_reported_failed(airflow_env, tmp_path):
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "slow.py").write_text(
        DAG_FILE.format(name="slow", fail=False).replace('print("RUN', 'import time; time.sleep(600); print("RUN')
    )
    test = runs.DagTest("one_process_slow", "2025-02-01T00:00:00+00:00", {}, tmp_path / "slow.log")
    (result,) = runs.dags_test_in_one_process([test], env={"AIRFLOW__CORE__DAGS_FOLDER": str(folder)}, timeout=20)
    assert not result.succeeded
    assert result.returncode != 0
    assert result.seconds < 120
