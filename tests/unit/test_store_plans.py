"""Every read and write of the ingest path (``include/lineage/store/statements.py``, built once and run per event or
per node) finds its rows by an index: a scan of a table costs more with every event of history, so a statement that
scans makes ingest slower the longer the store lives (a node's aliases were read by a scan of every alias until
2026-11-29: 3.6 ms each two days into a 10^7-event year, most of a day file's time in statements). SQLite's plans
here; PostgreSQL's for the same statements in ``tests/integration/test_lineage_store_postgres.py``."""

from __future__ import annotations

import pytest
from sqlalchemy.sql.base import Executable

from include.lineage.store import LineageStore, statements


def ingest_statements(dialect: str) -> dict[str, Executable]:
    """The ingest path's statements by name: those ``statements.py`` builds once, and those built per dialect."""
    named = {name: value for name, value in vars(statements).items() if isinstance(value, Executable)}
    built = statements.dialect_statements(dialect)
    named.update({f"dialect {name}": value for name, value in built.items() if isinstance(value, Executable)})
    return named


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with LineageStore(f"sqlite:///{tmp_path_factory.mktemp('plans') / 'store.db'}") as opened:
        yield opened


def _plan(store: LineageStore, statement: Executable) -> list[str]:
    sql = str(statement.compile(dialect=store.engine.dialect))
    connection = store.engine.raw_connection()
    try:
        rows = connection.cursor().execute(f"EXPLAIN QUERY PLAN {sql}", [None] * sql.count("?")).fetchall()
    finally:
        connection.close()
    return [row[-1] for row in rows]


def test_the_ingest_path_has_statements_to_check():
    names = ingest_statements("sqlite")
    assert {"SELECT_ALIASES", "RUN_USING_VERSION", "SELECT_JOB", "dialect extend_closure"} <= set(names)


@pytest.mark.parametrize("name", sorted(ingest_statements("sqlite")))
def test_an_ingest_statement_seeks_by_an_index_and_never_scans_a_table(store, name):
    plan = _plan(store, ingest_statements("sqlite")[name])
    scans = [step for step in plan if step.startswith("SCAN")]
    assert not scans, f"{name} scans: {plan}"
