"""The local Iceberg REST catalog server: loopback only, one per var/, concurrent writers, an earlier var/ kept.

Real parts only: the server's JVM from the pinned jars, spark-submit jobs committing at the same time, pyiceberg.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from include.core import settings
from include.services import catalog_server
from include.spark import submit
from tests.support import free_port, spark_submit_command

pytestmark = pytest.mark.integration
JOB = settings.PROJECT_ROOT / "tests" / "jobs" / "concurrent_commit.py"


IPV4_MAPPED_PREFIX = "0000000000000000FFFF0000"  # ::ffff:a.b.c.d in /proc/net/tcp6


def _listening_addresses(port: int) -> set[str]:
    """Local IPv4 addresses (hex, as the kernel writes them) of the sockets listening on ``port``."""
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:  # 0A: LISTEN
                addresses.add(address.removeprefix(IPV4_MAPPED_PREFIX))
    return addresses


def test_server_listens_on_loopback_only_and_is_reused(paths, catalog_server_state):
    assert catalog_server_state.host == "127.0.0.1"
    assert _listening_addresses(catalog_server_state.port) == {"0100007F"}, "only 127.0.0.1 may be bound"  # 127.0.0.1
    again = catalog_server.ensure_running(paths)
    assert again.pid == catalog_server_state.pid, "one server per var/: a second start must reuse it"
    log = catalog_server.log_file(paths).read_text()
    assert f"listening on http://127.0.0.1:{catalog_server_state.port}" in log
    assert oct((paths.catalog_dir / "rest-server.properties").stat().st_mode & 0o777) == "0o600"


def test_a_port_taken_by_another_process_is_a_clear_error(tmp_path, monkeypatch):
    import socket

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        monkeypatch.setenv("ICEBERG_REST_PORT", str(squatter.getsockname()[1]))
        other = settings.Paths(tmp_path / "var").ensure()
        with pytest.raises(catalog_server.CatalogServerError, match="already in use by another process"):
            catalog_server.ensure_running(other)


def test_a_var_made_by_the_serverless_catalog_keeps_its_tables(tmp_path, monkeypatch):
    """An earlier var/ (JDBC catalog on SQLite, no server) is served as it is: same file, same catalog name."""
    old = settings.Paths(tmp_path / "old-var").ensure()
    monkeypatch.setenv("ICEBERG_CATALOG_TYPE", "jdbc")
    monkeypatch.delenv("ICEBERG_CATALOG_URI", raising=False)
    serverless = settings.pyiceberg_catalog(settings.CatalogSettings.current(old))
    serverless.create_namespace_if_not_exists(settings.ICEBERG_NAMESPACE)
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
    table = serverless.create_table(f"{settings.ICEBERG_NAMESPACE}.kept", schema=rows.schema)
    table.append(rows)
    snapshot = table.current_snapshot().snapshot_id

    monkeypatch.setenv("ICEBERG_CATALOG_TYPE", "rest")
    monkeypatch.setenv("ICEBERG_REST_PORT", str(free_port()))
    old_settings = settings.CatalogSettings.current(old)
    catalog_server.ensure_running(old, old_settings)
    try:
        served = settings.pyiceberg_catalog(old_settings).load_table(f"{settings.ICEBERG_NAMESPACE}.kept")
        assert served.current_snapshot().snapshot_id == snapshot
        assert sorted(served.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == rows.to_pylist()
    finally:
        assert catalog_server.stop(old)
    assert catalog_server.running(old) is None


def _submit(paths: settings.Paths, table: str, writer: str, rows: int, commits: int) -> subprocess.Popen:
    conf = {**submit.spark_conf(paths, lineage=False), "spark.driver.memory": "640m"}
    command = spark_submit_command(
        conf,
        "local[1]",
        "--jars",
        submit.spark_submit_jars(),
        *[str(JOB), "--table", table, "--writer", writer, "--rows", str(rows), "--commits", str(commits)],
    )
    log = (paths.logs / f"concurrent-{writer}.log").open("wb")
    return subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **submit.spark_submit_env(paths)}
    )


def test_concurrent_spark_writers_all_commit_through_the_server(paths, catalog):
    """Four jobs on four tables and two more on one shared table, all at once: every commit lands (Iceberg's
    optimistic concurrency retries the losers of a race on the shared table)."""
    catalog.create_namespace_if_not_exists(settings.ICEBERG_NAMESPACE)
    name = settings.CatalogSettings.current(paths).table
    shared = name("concurrent_shared")
    jobs = [(name(f"concurrent_{i}"), f"solo{i}") for i in range(4)] + [(shared, "left"), (shared, "right")]
    # The shared table exists before the race, so the race is on commits, not on CREATE.
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, LongType, NestedField, StringType

    catalog.create_table(
        f"{settings.ICEBERG_NAMESPACE}.concurrent_shared",
        schema=Schema(
            NestedField(1, "writer", StringType()),
            NestedField(2, "commit_no", IntegerType()),
            NestedField(3, "n", LongType()),
        ),
    )
    processes = [_submit(paths, table, writer, rows=500, commits=3) for table, writer in jobs]
    codes = [process.wait(timeout=900) for process in processes]
    assert codes == [0] * len(jobs), f"exit codes {codes}; logs in {paths.logs}"

    for index in range(4):
        table = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.concurrent_{index}")
        data = table.scan().to_arrow()
        assert data.num_rows == 1500 and set(data["writer"].to_pylist()) == {f"solo{index}"}
    shared_table = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.concurrent_shared")
    data = shared_table.scan().to_arrow()
    counts = {writer: data["writer"].to_pylist().count(writer) for writer in ("left", "right")}
    assert counts == {"left": 1500, "right": 1500}
    appends = [s for s in shared_table.snapshots() if s.summary and s.summary.operation.value == "append"]
    assert len(appends) == 6, "each of the six commits on the shared table is its own snapshot"


def test_two_vars_run_their_catalogs_side_by_side_with_nothing_set_by_hand(tmp_path, monkeypatch):
    """No ICEBERG_REST_PORT: each var/ gets a free port of its own at its first start, keeps it in var/catalog/port,
    and every later command of that var/ (the CLI here) reaches the same server."""
    pipeline = str(Path(sys.executable).parent / "pipeline")
    envs = {}
    for name in ("first", "second"):
        env = {k: v for k, v in os.environ.items() if k not in ("ICEBERG_REST_PORT", "PIPELINE_VAR_DIR")}
        envs[name] = {**env, "PIPELINE_VAR_DIR": str(tmp_path / name)}
    try:
        for env in envs.values():
            started = subprocess.run(
                [pipeline, "catalog", "start"], env=env, capture_output=True, text=True, timeout=180
            )
            assert started.returncode == 0, started.stdout + started.stderr
        ports = {name: int((tmp_path / name / "catalog" / "port").read_text()) for name in envs}
        assert ports["first"] != ports["second"]
        for name, env in envs.items():
            status = subprocess.run(
                [pipeline, "catalog", "status"], env=env, capture_output=True, text=True, timeout=60
            )
            assert status.returncode == 0 and f"127.0.0.1:{ports[name]}" in status.stdout, status.stdout
            assert catalog_server.is_healthy(f"http://127.0.0.1:{ports[name]}", timeout=5)
        monkeypatch.delenv("ICEBERG_REST_PORT")  # this process too reads each var/'s recorded port
        first = settings.pyiceberg_catalog(settings.CatalogSettings.current(settings.Paths(tmp_path / "first")))
        first.create_namespace("only_in_first")
        second = settings.pyiceberg_catalog(settings.CatalogSettings.current(settings.Paths(tmp_path / "second")))
        assert ("only_in_first",) not in second.list_namespaces(), "two var/s, two catalogs"
    finally:
        for env in envs.values():
            subprocess.run([pipeline, "catalog", "stop"], env=env, capture_output=True, timeout=60)
