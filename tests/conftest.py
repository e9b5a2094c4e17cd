"""Shared fixtures. Every test session gets its own ``var/`` so tests never touch the demo's state."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import logging

import pytest

_SESSION_VAR = Path(tempfile.mkdtemp(prefix="pipeline-test-var-"))
os.environ.setdefault("PIPELINE_VAR_DIR", str(_SESSION_VAR))
os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")

from include import config  # noqa: E402  (import after PIPELINE_VAR_DIR is set)

logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def paths() -> config.Paths:
    return config.Paths.current().ensure()


@pytest.fixture(scope="session")
def spark(paths):
    from spark_jobs.common.session import spark_session

    session = spark_session("pytest")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def catalog(paths):
    return config.pyiceberg_catalog()


@pytest.fixture(scope="session")
def airflow_env(paths) -> dict[str, str]:
    """Environment for Airflow commands, with a migrated metadata DB in the session's own AIRFLOW_HOME."""
    from include import bootstrap

    bootstrap.setup(paths)
    return {**os.environ, **config.airflow_env(paths)}


@pytest.fixture(scope="session", autouse=True)
def _airflow_process_env(paths):
    """Make in-process Airflow imports (SparkSubmitHook, DagBag) see the project's connections."""
    os.environ.update({k: v for k, v in config.airflow_env(paths).items() if k != "PATH"})
    os.environ["PATH"] = config.airflow_env(paths)["PATH"]
