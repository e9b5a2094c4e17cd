"""One real run of the whole chain on small generated data, shared by the integration and lineage tests.

Every DAG runs through ``airflow dags test`` in the session's own AIRFLOW_HOME, with its Spark tasks submitted by
spark-submit in local mode against the session's own Iceberg catalog; sources are served over loopback HTTP.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from include.airflow import runs
from include.core import settings
from include.services import kafka_broker
from include.sources import sample_server
from tests.support import RawState, free_port, raw_state, start_lineage_serve

MONTH = (2025, 1)
ROWS = 20_000
INGEST_DATE = "2025-02-01"
REINGEST_DATE = "2025-02-01T00:05:00+00:00"  # January again (the data interval of any moment of Feb 1)
# The extractor gives a task 5 s for its facets, then emits identities only. The lineage tests assert the facets,
# so their DAG runs wait longer: on a shared 2-core machine under load, reading them once took more than 5 s.
os.environ.setdefault("LINEAGE_FACETS_BUDGET_SECONDS", "45")  # under [openlineage] execution_timeout (60 s)


@dataclass
class PipelineRun:
    paths: settings.Paths
    results: dict[str, runs.DagTestResult] = field(default_factory=dict)
    raw_after_first_ingest: RawState | None = None
    raw_after_reingest: RawState | None = None
    source_env: dict = field(default_factory=dict)
    # When the five runs had ended. Later modules run more DAGs into the same var/ (bad input, reruns), and a lineage
    # query of the current graph follows each job's newest version, as Marquez does: tests of this run ask --as-of it.
    finished_at: str = ""
    # (started, ended) of each DAG run by its key, UTC ISO-8601: `--as-of` a time between two of them
    times: dict[str, tuple[str, str]] = field(default_factory=dict)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _run(run: PipelineRun, key: str, dag_id: str, logical_date: str, conf: dict, env: dict) -> None:
    started = _now()
    result = runs.dags_test(dag_id, logical_date, conf, env=env, log_file=run.paths.var / "test-logs" / f"{key}.log")
    run.times[key] = (started, _now())
    run.results[key] = result
    assert result.succeeded, (
        f"{dag_id} ended {result.state} (rc {result.returncode}); log: {run.paths.var / 'test-logs' / key}.log"
    )


@pytest.fixture(scope="session")
def pipeline_run(paths, airflow_env, catalog) -> PipelineRun:
    run = PipelineRun(paths)
    source_root = paths.var / "source"
    sample_server.publish_months(source_root, [MONTH], ROWS)
    with sample_server.serve(source_root) as env:
        run.source_env = env
        _run(run, "taxi", "ingest_yellow_taxi_data", INGEST_DATE, {}, env)
        run.raw_after_first_ingest = raw_state(catalog)
        _run(run, "weather", "ingest_weather_data", INGEST_DATE, {}, env)
        _run(
            run,
            "forecast_naive",
            "forecast_yellow_rides",
            "2025-02-01T01:00:00+00:00",
            {"model": "seasonal_naive"},
            env,
        )
        # January again, forced, between the two forecasts (test_run_answers: the second forecast's provenance
        # reaches the re-ingest, the first's the first ingest). A logical date of its own: the provider derives a
        # DAG run's OpenLineage run id from the DAG, logical date and clear number, so the same date would merge the
        # two ingests into one run.
        _run(run, "taxi_again", "ingest_yellow_taxi_data", REINGEST_DATE, {"force": True}, env)
        run.raw_after_reingest = raw_state(catalog)
        _run(run, "forecast_weather", "forecast_yellow_rides", "2025-02-01T02:00:00+00:00", {"model": "weather"}, env)
    run.finished_at = _now()
    return run


@pytest.fixture(scope="session")
def demo_run(paths):
    """One `make demo` per session, in a var/ of its own (tests/integration/demo_run.py): the demo's tests read it, and
    so do the cluster tests, as the local-mode run of the month they run on a cluster."""
    from tests.integration.demo_run import Demo

    ran = Demo(paths.var / "demo").run()
    try:
        yield ran
    finally:
        ran.var.stop()


@pytest.fixture(scope="session")
def source_folder(paths, airflow_env):
    """The month's generated TLC and NOAA files in the layout of the real sites, for modules that run their own DAGs
    and need no earlier run (so they need not wait for, or share a worker with, `pipeline_run`)."""
    folder = paths.var / "own-source"
    sample_server.publish_months(folder, [MONTH], ROWS)
    return folder


# What `user_runs` keeps running (Airflow, the alert receivers), closed by the fixture's teardown or earlier, by
# pytest_runtest_teardown below, once the last test of its group has run.
_user_runs_servers = contextlib.ExitStack()


@pytest.fixture(scope="session")
def user_runs():
    """`make airflow SAMPLE_DATA=1` in a var/ of its own, and the runs a user starts there (see running_airflow).

    Its alert connections point at a webhook receiver and an SMTP server on loopback, so that the scheduler's part of
    write-audit-publish (test_write_audit_publish) goes on from these runs instead of starting an Airflow of its own."""
    from tests.alert_receivers import alert_connections_env, smtp_server, webhook_receiver
    from tests.integration.running_airflow import RunningAirflow, run_as_a_user

    with _user_runs_servers as servers:
        url, hooks = servers.enter_context(webhook_receiver())
        port, mails = servers.enter_context(smtp_server())
        airflow = RunningAirflow(
            settings.Paths.current().var / "airflow-ui", extra_env=alert_connections_env(url, port)
        )
        servers.callback(airflow.assert_stopped_like_ctrl_c_should)  # runs after the stop below (last in, first out)
        servers.callback(airflow.stop)  # a start that fails half-way stops what it started too
        airflow.start()
        yield run_as_a_user(airflow, alerts=(hooks, mails))


def pytest_runtest_teardown(item, nextitem):
    """Stop `user_runs`' Airflow as soon as its group's last test has run, not when the worker's session ends.

    An idle `airflow standalone` is not idle: the DAG processor parses the DAG files again every 30 s and the
    scheduler and triggerer loop; left up, it took CPU from every test its worker ran afterwards, for the rest of the
    suite. Tests of the group are contiguous (tests/conftest.py sorts by group), so no later test asks for it."""
    if "user_runs" in item.fixturenames and (nextitem is None or "user_runs" not in nextitem.fixturenames):
        _user_runs_servers.close()


@pytest.fixture(scope="module")
def broker(paths):
    """A Kafka broker for the module (include/services/kafka_broker.py) on a free loopback port, stopped after it."""
    saved = os.environ.get("KAFKA_PORT")
    os.environ["KAFKA_PORT"] = str(free_port())
    try:
        state = kafka_broker.ensure_running(paths)
        yield state
    finally:
        kafka_broker.stop(paths)
        if saved is None:
            os.environ.pop("KAFKA_PORT", None)
        else:
            os.environ["KAFKA_PORT"] = saved


@pytest.fixture
def lineage_server(tmp_path):
    """`lineage serve` on a store of its own in tmp_path, without tokens (they are tests/unit/test_lineage_serve_auth)."""
    store = f"sqlite:///{tmp_path / 'served.db'}"
    process, url = start_lineage_serve(["--store", store, "--no-auth"])
    yield {"url": url, "store": store}
    process.terminate()
    process.wait(timeout=30)
