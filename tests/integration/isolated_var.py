"""A ``var/`` of its own with its own environment (catalog, warehouse, Spark master), set up as ``make setup`` does.

The scale-out tests run the same DAGs against several configurations side by side (local mode and a cluster, a
Postgres catalog, an S3 warehouse); each gets a folder, an Airflow home, a catalog server port and the variables a
user would export. Nothing is changed in the pytest process except for the duration of ``activated()``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from include.airflow import runs
from include.core import naming, settings
from include.services import catalog_server
from tests.support import environment_of_var


class IsolatedVar:
    def __init__(self, var_dir: Path, env: dict[str, str] | None = None):
        self.paths = settings.Paths(var_dir.resolve())
        self.env = environment_of_var(self.paths.var, **(env or {}))
        self.results: dict[str, runs.DagTestResult] = {}

    @contextlib.contextmanager
    def activated(self):
        """The pytest process sees this var/'s environment (for config, pyiceberg and the catalog server)."""
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def setup(self) -> IsolatedVar:
        subprocess.run(
            [sys.executable, "-m", "include.setup.bootstrap"],
            env=self.env,
            check=True,
            cwd=settings.PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
        )
        return self

    def dags_test(
        self, key: str, dag_id: str, logical_date: str, conf: dict | None = None, env: dict[str, str] | None = None
    ) -> runs.DagTestResult:
        log = self.paths.var / "test-logs" / f"{key}.log"
        with self.activated():
            result = runs.dags_test(
                dag_id,
                logical_date,
                conf,
                env={**self.env, **settings.airflow_env(self.paths), **(env or {})},
                log_file=log,
            )
        self.results[key] = result
        assert result.succeeded, f"{dag_id} ended {result.state} (rc {result.returncode}); log: {log}"
        return result

    def catalog(self):
        with self.activated():
            return settings.pyiceberg_catalog()

    def catalog_settings(self) -> settings.CatalogSettings:
        with self.activated():
            return settings.CatalogSettings.current(self.paths)

    def table(self, name: str) -> pa.Table:
        with self.activated():
            return settings.pyiceberg_catalog().load_table(f"{settings.ICEBERG_NAMESPACE}.{name}").scan().to_arrow()

    def stop(self) -> None:
        catalog_server.stop(self.paths)


def comparable(table: pa.Table, drop: tuple[str, ...] = ()) -> list[tuple]:
    """Rows of a table as sorted tuples, without the columns that name the run (time, file path, run id)."""
    keep = [name for name in table.column_names if name not in drop]
    return sorted(tuple(row[name] for name in keep) for row in table.select(keep).to_pylist())


RUN_SPECIFIC = {
    naming.TAXI_RAW: ("filename", "ingest_timestamp"),
    naming.HOURLY_ACTUALS: (),
    naming.HOURLY_FORECAST: ("run_id", "created_at"),
}
