"""Run a DAG with ``airflow dags test`` in the project's Airflow home and report how it ended."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
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


def dags_test(
    dag_id: str,
    logical_date: str,
    conf: dict | None = None,
    env: dict[str, str] | None = None,
    log_file: Path | None = None,
    timeout: float = 1800,
) -> DagTestResult:
    command = [str(Path(sys.executable).parent / "airflow"), "dags", "test", dag_id, logical_date]
    if conf:
        command += ["-c", json.dumps(conf)]
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
    finished = list(FINISHED.finditer(output))
    match = finished[-1] if finished else None
    return DagTestResult(
        dag_id=dag_id,
        state=match["state"] if match else "unknown",
        run_id=match["run_id"] if match else None,
        seconds=time.monotonic() - started,
        returncode=completed.returncode,
        log=output,
    )
