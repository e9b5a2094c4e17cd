"""pytest plugin of the ANSI check: the project's unit tests of the transforms under Spark 4, in the spike venv.

run_spike.sh runs them with ``--noconftest -p ansi_plugin``: the project's tests/conftest.py would create (and prune)
folders under var/test-runs/ that other test sessions use, and write an Airflow config; this plugin gives the
tests the one fixture they need, ``spark``, built by the project's own ``spark_session`` with the spike's jars
(``SPIKE_JARS``, ``os.pathsep``-separated) in place of the project's Spark 3.5 jars.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


@pytest.fixture(scope="session")
def spark():
    from spark_jobs.common.session import spark_session

    jars = [jar for jar in os.environ["SPIKE_JARS"].split(os.pathsep) if jar]
    session = spark_session(
        "spark4_ansi_check",
        extra_conf={
            "spark.jars": ",".join(jars),
            "spark.driver.extraClassPath": os.pathsep.join(jars),
            "spark.executor.extraClassPath": os.pathsep.join(jars),
        },
    )
    yield session
    session.stop()
