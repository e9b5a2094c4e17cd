"""`make demo` as a newcomer runs it: the real ``pipeline demo --rows N`` in a ``var/`` of its own, set up as
``make setup`` does, with every socket its processes listened on sampled while it ran.

One demo per test session (the ``demo_run`` fixture, tests/integration/conftest.py), read by the demo's own tests
(test_demo.py) and, as the local-mode reference of the same generated month, by the cluster tests (test_cluster.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa

from include.core import settings
from include.demo import DEMO_MONTH, dag_runs
from tests.integration import listening
from tests.integration.isolated_var import IsolatedVar
from tests.support import free_port

ROWS = 3_000
MONTH = DEMO_MONTH
# The logical dates of the first demo of a var/ (the session's demo is its var/'s first), as include/demo.py sets them.
_FIRST_DEMO = {(dag_id, conf.get("model")): date for dag_id, date, conf in dag_runs(0)}
FIRST_INGEST_DATE = _FIRST_DEMO[("ingest_yellow_taxi_data", None)]
FIRST_FORECAST_DATE = _FIRST_DEMO[("forecast_yellow_rides", "seasonal_naive")]


class Demo:
    def __init__(self, var_dir: Path):
        self.var = IsolatedVar(var_dir, {"SAMPLE_SOURCE_PORT": str(free_port())})
        self.paths = self.var.paths
        self.env = self.var.env
        self.output = ""
        self.returncode: int | None = None
        self.listeners: set[listening.Listener] = set()
        self.seconds = 0.0

    def run(self) -> Demo:
        self.var.setup()
        started = time.monotonic()
        with listening.sampled(self.paths.var) as seen:
            completed = subprocess.run(
                [str(Path(sys.executable).parent / "pipeline"), "demo", "--rows", str(ROWS)],
                env=self.env,
                cwd=settings.PROJECT_ROOT,
                capture_output=True,
                text=True,
                timeout=2000,
            )
        self.seconds = time.monotonic() - started
        self.listeners = set(seen)
        self.output = completed.stdout + completed.stderr
        self.returncode = completed.returncode
        (self.paths.var / "demo-output.txt").write_text(self.output)
        return self

    def timings(self) -> dict:
        return json.loads((self.paths.var / "demo-logs" / "timings.json").read_text())

    def table(self, name: str) -> pa.Table:
        """A table as the demo left it, through the demo's own catalog server (still running: the fixture stops it)."""
        return self.var.table(name)

    def lineage(self, *args: str) -> dict:
        completed = subprocess.run(
            [str(Path(sys.executable).parent / "lineage"), *args, "--json"],
            env=self.env,
            cwd=settings.PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(completed.stdout)
