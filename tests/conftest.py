"""Shared fixtures. Every test session gets its own state folder, ``var/test-runs/<time>-<pid>/``, so tests never
touch the demo's state; the last three are kept for post-mortems."""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import pytest

_TEST_RUNS = Path(__file__).resolve().parent.parent / "var" / "test-runs"
# Under pytest-xdist (`make test` runs two workers) every worker is a session of its own, with its own var/, catalog
# server and Airflow home; the workers inherit the controller's environment, so the values it set here are dropped.
_SET_BY_THIS_FILE = ("PIPELINE_VAR_DIR", "ICEBERG_REST_PORT")
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("_PIPELINE_TEST_VAR") == os.environ.get("PIPELINE_VAR_DIR"):
    for _name in _SET_BY_THIS_FILE:
        os.environ.pop(_name, None)
_SESSION_VAR = _TEST_RUNS / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
_SESSION_VAR.mkdir(parents=True, exist_ok=True)


def _session_alive(folder: Path) -> bool:
    pid = folder.name.rsplit("-", 1)[-1]
    return pid.isdigit() and Path(f"/proc/{pid}").exists()


# Keep the last three finished runs' state for post-mortems; never touch a session that is still running.
for _old in [folder for folder in sorted(_TEST_RUNS.iterdir()) if not _session_alive(folder)][:-3]:
    shutil.rmtree(_old, ignore_errors=True)
os.environ.setdefault("PIPELINE_VAR_DIR", str(_SESSION_VAR))
os.environ["_PIPELINE_TEST_VAR"] = os.environ["PIPELINE_VAR_DIR"]
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


from tests.support import free_port  # noqa: E402

# The session's own catalog server (one per var/) on a port no other session or demo uses.
os.environ.setdefault("ICEBERG_REST_PORT", str(free_port()))

from include.core import settings  # noqa: E402  (import after PIPELINE_VAR_DIR is set)
from include.services import catalog_server  # noqa: E402

logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def paths() -> settings.Paths:
    return settings.Paths.current().ensure()


@pytest.fixture(scope="session")
def spark(paths, catalog_server_state):
    from spark_jobs.common.session import spark_session

    session = spark_session("pytest")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def catalog_server_state(paths):
    """This session's Iceberg REST catalog server (the default catalog), stopped when the session ends."""
    state = catalog_server.ensure_running(paths)
    yield state
    catalog_server.stop(paths)


@pytest.fixture(scope="session")
def catalog(paths, catalog_server_state):
    return settings.pyiceberg_catalog()


@pytest.fixture(scope="session")
def airflow_env(paths, catalog_server_state) -> dict[str, str]:
    """Environment for Airflow commands, with a migrated metadata DB in the session's own AIRFLOW_HOME."""
    from include.setup import bootstrap

    bootstrap.setup(paths)
    return {**os.environ, **settings.airflow_env(paths)}


@pytest.fixture(scope="session", autouse=True)
def _airflow_process_env(paths):
    """Make in-process Airflow imports (SparkSubmitHook, DagBag) see the project's airflow.cfg and connections.

    The file is written before anything imports Airflow: Airflow would otherwise write a default one there, which
    set-up then keeps as a user's edit."""
    from include.setup import bootstrap

    bootstrap.write_airflow_cfg(paths)
    os.environ.update({k: v for k, v in settings.airflow_env(paths).items() if k != "PATH"})
    os.environ["PATH"] = settings.airflow_env(paths)["PATH"]


def pytest_sessionfinish(session, exitstatus):
    """A server started outside the fixture (e.g. by a Spark task) must not outlive the session either."""
    catalog_server.stop(settings.Paths.current())


# Work shared through a session fixture stays in one worker: the DAG runs of `pipeline_run` (tests/integration) and of
# `user_runs` cost minutes, and a second worker asking for them would run them again. Every other module is a group
# of its own, so its module-scoped fixtures run once. `--dist loadgroup` reads these groups; without xdist they are
# inert. tryfirst: xdist reads the marks in its own hook of the same name.
_SHARED_SESSION_WORK = ("pipeline_run", "user_runs")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        shared = [name for name in _SHARED_SESSION_WORK if name in getattr(item, "fixturenames", ())]
        group = shared[0] if shared else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))
