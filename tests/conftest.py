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


from tests.support import MISSING_SYSTEM_PACKAGE, chromium, free_port  # noqa: E402

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


# Work shared through a session fixture stays in one worker: the DAG runs of `pipeline_run` (tests/integration), of
# `user_runs` and of `demo_run` cost minutes, and a second worker asking for them would run them again. Every other
# module is a group of its own, so its module-scoped fixtures run once. `--dist loadgroup` reads these groups; without
# xdist they are inert. tryfirst: xdist reads the marks in its own hook of the same name.
_SHARED_SESSION_WORK = ("pipeline_run", "user_runs", "demo_run")
# Whichever test of a shared group runs first pays, inside its own timeout, for the group's DAG runs (490 s on an idle
# machine, over 900 s when the machine was loaded by a demo run beside the suite): a budget for the whole set-up.
SHARED_WORK_TIMEOUT_SECONDS = 3600

# The groups' cost in seconds (each group's summed test durations in the suite on two cores with three workers,
# 24 November 2026), longest first: the workers take groups in this order (`--no-loadscope-reorder`), so the long
# ones start at once and short ones fill the end (longest-processing-time-first scheduling). `pipeline_run` goes
# first for a second reason: it must be the first group of its worker, on a var/ no other group has written to (its
# tests read the raw table's rows and the runs' lineage as theirs alone). A group missing here costs
# DEFAULT_INTEGRATION_COST (an integration module) or nothing (a unit module).
GROUP_COST = {
    "pipeline_run": 1350,
    "demo_run": 800,  # the demo, then the cluster's runs, compared with the demo's (526 worker-s on 25 November)
    "user_runs": 750,  # the UI modules' runs, then the scheduler's part of write-audit-publish goes on from them
    "tests/integration/test_fleet.py": 720,  # the one-machine reference, then the fleet's runs and its kill (12 min)
    "tests/integration/test_bad_input.py": 650,
    "tests/integration/test_tlc_backfill.py": 580,
    "tests/integration/test_unchanged_reload.py": 280,
    "tests/integration/test_s3_warehouse.py": 270,
    "tests/integration/test_tlc_eras.py": 250,
    "tests/integration/test_spark_events_never_lost.py": 220,
    "tests/integration/test_shared_catalog.py": 210,
    "tests/integration/test_kafka.py": 190,
    "tests/integration/test_load_kill.py": 180,
    "tests/integration/test_spark_start_up.py": 110,
    "tests/unit/test_blocked_on_page.py": 20,  # a browser, 11-12 s since its taps return nothing (Trap 39)
    "tests/integration/test_reliability.py": 100,
}
DEFAULT_INTEGRATION_COST = 120


def _group_cost(group: str) -> int:
    if group in GROUP_COST:
        return GROUP_COST[group]
    return DEFAULT_INTEGRATION_COST if group.startswith("tests/integration/") else 0


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    groups = {}
    for item in items:
        shared = [name for name in _SHARED_SESSION_WORK if name in getattr(item, "fixturenames", ())]
        groups[item.nodeid] = group = shared[0] if shared else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))
        if shared and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SHARED_WORK_TIMEOUT_SECONDS))
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)  # a real Chromium: seconds per test, left out of `make test-fast`
    first_seen = {}
    for item in items:
        first_seen.setdefault(groups[item.nodeid], len(first_seen))
    # stable: inside a group, and among groups of one cost, the collection's own order
    items.sort(key=lambda item: (-_group_cost(groups[item.nodeid]), first_seen[groups[item.nodeid]]))


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium through playwright, for a module's page tests (where it is not installed: a failure
    under CI, a skip listed in the session's summary elsewhere; tests/support.py require_system_tool)."""
    executable = chromium("the module's page tests drive it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield launched
        finally:
            launched.close()


def missing_system_package_skips(skipped_reports) -> list[tuple[str, str]]:
    """(test id, reason) of each skip that ``require_system_tool`` made: the tests a missing system package left out."""
    found = []
    for report in skipped_reports:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        if MISSING_SYSTEM_PACKAGE in reason:
            found.append((report.nodeid, reason.split(MISSING_SYSTEM_PACKAGE, 1)[1]))
    return found


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Every test left out because a system package is missing, named at the end (under CI they failed instead)."""
    missing = missing_system_package_skips(terminalreporter.stats.get("skipped", []))
    if missing:
        terminalreporter.section("skipped for a missing system package", sep="-", yellow=True)
        for nodeid, reason in missing:
            terminalreporter.line(f"{MISSING_SYSTEM_PACKAGE}{nodeid}: {reason}")
