"""``bench/store_scale.py``'s PostgreSQL cluster (Debian's server, started on loopback): a kept one (``--keep``, for
the 10^7-event store built over several runs) keeps its databases and its role's password from one run to the next;
a throwaway one is deleted."""

from __future__ import annotations

import shutil
import stat

import pytest
from sqlalchemy import create_engine, text

from bench import store_scale
from tests.support import postgresql

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _rows(url: str) -> list[int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text("SELECT n FROM kept ORDER BY n")).scalars())
    finally:
        engine.dispose()


@pytest.fixture
def under_var(paths):
    """A folder under var/ (the postgres user, which runs the server when the suite runs as root, cannot reach
    pytest's temporary folders), emptied after the test."""
    folder = paths.var / "bench-store-scale-clusters"
    shutil.rmtree(folder, ignore_errors=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_kept_cluster_keeps_its_databases_and_password_across_runs_and_a_throwaway_one_goes(under_var):
    postgresql()
    folder = under_var / "kept" / "postgres"
    with store_scale.postgres_server(folder, keep=True) as database:
        url = database("lineage_7")
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE kept (n int)"))
            conn.execute(text("INSERT INTO kept VALUES (1), (2)"))
        engine.dispose()
    password = folder.with_name("postgres.password")
    assert stat.S_IMODE(password.stat().st_mode) == 0o600 and password.read_text() in url

    with store_scale.postgres_server(folder, keep=True) as database:
        assert _rows(database("lineage_7", fresh=False)) == [1, 2], "the next run finds the store as it was left"
        fresh = database("lineage_7")  # made afresh: dropped first
        engine = create_engine(fresh)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT to_regclass('kept')")).scalar() is None
        engine.dispose()
        database.drop("lineage_7")  # a spent store's disk given back
        assert ("lineage_7",) not in database.cluster.sql("SELECT datname FROM pg_database")

    throwaway = under_var / "throwaway"
    with store_scale.postgres_server(throwaway) as database:
        database("lineage_5")
        assert throwaway.exists()
    assert not throwaway.exists()
