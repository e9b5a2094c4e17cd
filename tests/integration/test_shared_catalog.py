"""A shared catalog on a real PostgreSQL (Debian's package, installed by ``include/setup/system_packages.sh``): a throwaway
cluster of ``include/services/postgres.py`` under the session's ``var/`` (``initdb``, ``pg_ctl`` on 127.0.0.1 with
password authentication), stopped at the end.

Two configurations a user sets with environment variables only, one taxi DAG run each:

- ``ICEBERG_CATALOG_TYPE=jdbc`` with ``ICEBERG_CATALOG_URI=jdbc:postgresql://…``: Spark's and pyiceberg's JDBC/SQL
  catalogs on Postgres, no server;
- the default local REST catalog server with ``ICEBERG_REST_BACKEND_URI=jdbc:postgresql://…`` behind it.

pyiceberg reads the tables each run wrote, through the configured catalog and straight from the Postgres tables.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

import psycopg2
import pytest

from include.core import naming, settings
from include.services import catalog_server
from include.services import postgres as postgres_service
from include.sources import sample_server
from tests.integration.isolated_var import IsolatedVar
from tests.support import free_port, postgresql

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]  # module fixtures run several DAGs

USER = "iceberg"
PASSWORD = "iceberg-test-password"
ROWS = 5_000
MONTH = (2025, 1)
TAXI_TABLES = {naming.TAXI_QUARANTINE, naming.TAXI_RAW}


class ThrowawayPostgres(postgres_service.Cluster):
    """A throwaway cluster (``include/services/postgres.py``, the one implementation) with the Iceberg user's
    databases, and the catalog's own table read back over TCP as that user."""

    def create_database(self, name: str) -> str:
        self.ensure_database(name, USER)
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{name}"

    def iceberg_tables(self, database: str) -> set[tuple[str, str, str]]:
        """(catalog, namespace, table) rows of the Iceberg JDBC catalog's own table, read over TCP as the user."""
        with psycopg2.connect(host="127.0.0.1", port=self.port, dbname=database, user=USER, password=PASSWORD) as db:
            with db.cursor() as cursor:
                cursor.execute("SELECT catalog_name, table_namespace, table_name FROM iceberg_tables")
                return set(cursor.fetchall())


@pytest.fixture(scope="module")
def postgres(paths):
    postgresql("the shared Iceberg JDBC catalog lives in a throwaway PostgreSQL cluster")
    server = ThrowawayPostgres(paths.var / "postgres", free_port()).init().start(durable=False)
    try:
        server.ensure_role(USER, PASSWORD)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def source_env(paths):
    root = paths.var / "shared-catalog-source"
    sample_server.publish_months(root, [MONTH], ROWS)
    with sample_server.serve(root) as env:
        yield env


def _taxi_run(folder: Path, env: dict[str, str], source_env: dict[str, str]) -> IsolatedVar:
    run = IsolatedVar(folder, {"ICEBERG_CATALOG_USER": USER, "ICEBERG_CATALOG_PASSWORD": PASSWORD, **env}).setup()
    try:
        run.dags_test("taxi", "ingest_yellow_taxi_data", "2025-02-01", env=source_env)
    finally:
        run.stop()
    return run


@pytest.fixture(scope="module")
def jdbc_run(paths, postgres, source_env):
    uri = postgres.create_database("iceberg_jdbc")
    return _taxi_run(
        paths.var / "catalog-jdbc-postgres", {"ICEBERG_CATALOG_TYPE": "jdbc", "ICEBERG_CATALOG_URI": uri}, source_env
    )


@pytest.fixture(scope="module")
def rest_run(paths, postgres, source_env):
    uri = postgres.create_database("iceberg_rest")
    run = IsolatedVar(
        paths.var / "catalog-rest-postgres",
        {"ICEBERG_CATALOG_USER": USER, "ICEBERG_CATALOG_PASSWORD": PASSWORD, "ICEBERG_REST_BACKEND_URI": uri},
    ).setup()
    run.dags_test("taxi", "ingest_yellow_taxi_data", "2025-02-01", env=source_env)
    yield run
    run.stop()


def _rows(table) -> int:
    return table.scan().to_arrow().num_rows


def test_jdbc_catalog_on_postgres_holds_the_tables_pyiceberg_reads(jdbc_run, postgres):
    jdbc_settings = jdbc_run.catalog_settings()
    assert jdbc_settings.type == "jdbc" and jdbc_settings.uri.startswith("jdbc:postgresql://127.0.0.1:")
    assert {row for row in postgres.iceberg_tables("iceberg_jdbc")} >= {
        ("lakehouse", "nyc_taxi", table) for table in TAXI_TABLES
    }
    catalog = jdbc_run.catalog()
    assert type(catalog).__name__ == "SqlCatalog"
    raw = catalog.load_table(f"nyc_taxi.{naming.TAXI_RAW}")
    quarantine = catalog.load_table(f"nyc_taxi.{naming.TAXI_QUARANTINE}")
    assert _rows(raw) + _rows(quarantine) == ROWS


def test_rest_server_over_postgres_serves_the_tables_it_keeps_there(rest_run, postgres):
    assert {row for row in postgres.iceberg_tables("iceberg_rest")} >= {
        ("lakehouse", "nyc_taxi", table) for table in TAXI_TABLES
    }
    with rest_run.activated():
        through_server = settings.pyiceberg_catalog()
        assert type(through_server).__name__ == "RestCatalog"
        served = through_server.load_table(f"nyc_taxi.{naming.TAXI_RAW}")
        backend = settings.CatalogSettings.current(rest_run.paths)
    # The same table read straight from the server's Postgres backend, with pyiceberg's SQL catalog.
    direct_settings = dataclasses.replace(
        backend, type="jdbc", uri=backend.rest_backend_uri, is_local_rest_server=False
    )
    direct = settings.pyiceberg_catalog(direct_settings).load_table(f"nyc_taxi.{naming.TAXI_RAW}")
    assert direct.metadata_location == served.metadata_location
    assert _rows(direct) == _rows(served) > 0
    assert not (rest_run.paths.catalog_dir / "iceberg_catalog.db").exists(), "the SQLite backend must not be used"


def test_compose_catalog_service_runs_over_postgres(paths, postgres):
    """docker-compose's ``iceberg-catalog`` service, natively: its command and environment (database host and port
    mapped to this Postgres, loopback instead of the container's every interface); pyiceberg creates a namespace
    through it and the namespace is a row in Postgres."""
    import signal
    import sys
    import time

    import yaml

    service = yaml.safe_load((settings.PROJECT_ROOT / "docker-compose.yml").read_text())["services"]["iceberg-catalog"]
    uri = postgres.create_database("iceberg_service")
    env = {key: re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value)) for key, value in service["environment"].items()}
    assert env["ICEBERG_REST_BACKEND_URI"] == "jdbc:postgresql://postgres:5432/iceberg"
    port = free_port()
    var_dir = paths.var / "compose-catalog-service"
    env.update(
        {
            "PIPELINE_VAR_DIR": str(var_dir),
            "ICEBERG_REST_PORT": str(port),
            "ICEBERG_REST_BACKEND_URI": uri,
            "ICEBERG_CATALOG_PASSWORD": PASSWORD,
            "ICEBERG_WAREHOUSE": (var_dir / "warehouse").as_uri(),
        }
    )
    script = service["command"][-1].replace("/opt/project", str(settings.PROJECT_ROOT))
    process = subprocess.Popen(
        [sys.executable, script, "--host", "127.0.0.1"],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(settings.PROJECT_ROOT), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not catalog_server.is_healthy(f"http://127.0.0.1:{port}") and time.monotonic() < deadline:
            assert process.poll() is None, "the catalog service exited"
            time.sleep(0.5)
        with IsolatedVar(var_dir, {"ICEBERG_CATALOG_URI": f"http://127.0.0.1:{port}"}).activated():
            settings.pyiceberg_catalog().create_namespace("compose_check")
        with (
            psycopg2.connect(
                host="127.0.0.1", port=postgres.port, dbname="iceberg_service", user=USER, password=PASSWORD
            ) as db,
            db.cursor() as cursor,
        ):
            cursor.execute("SELECT DISTINCT namespace FROM iceberg_namespace_properties")
            assert ("compose_check",) in cursor.fetchall()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
