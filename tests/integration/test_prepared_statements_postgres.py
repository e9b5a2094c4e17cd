"""``store/prepared.py`` on a real PostgreSQL (a cluster of the test's own on loopback): a read the store sends again
on a connection is prepared there and executed by name, with the answers it had as text; what PostgreSQL refuses to
prepare runs as text without breaking the transaction; a connection keeps at most ``MOST_PREPARED``; a session
that lost its statements fails one question, not every later one; and ``LINEAGE_STORE_PREPARE=off`` prepares
nothing. What PostgreSQL holds is read from ``pg_prepared_statements``."""

from __future__ import annotations

import psycopg2.errors
import pytest
from sqlalchemy import event, func, select

from include.lineage.queries.sql import _pyformat, fetch_rows
from include.lineage.store import LineageStore, prepared
from include.lineage.store.schema import nodes_table
from tests.support import throwaway_postgres
from tests.unit.test_impact_runs import _events as impact_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# A text with parameters of several types, one used twice, and a literal ``%``: compared as text and prepared.
_NODES_LIKE = (
    "SELECT n.id, n.kind, n.name, CAST(:tag AS TEXT) FROM lineage_nodes n"
    " WHERE n.name LIKE '%' || :part || '%' AND (n.id > :least OR :least IS NULL)"
    " AND n.id <> ALL(CAST(:skipped AS integer[])) AND n.kind = :kind ORDER BY n.id"
)


def _prepared_texts(conn) -> list[str]:
    """The statements prepared on ``conn``'s session, as PostgreSQL holds them (``PREPARE <name> AS`` cut), asked
    through the driver's own cursor: a question asked twice through the store would be prepared itself."""
    cursor = conn.connection.cursor()
    cursor.execute("SELECT statement FROM pg_prepared_statements ORDER BY prepare_time, name")
    return [text.split(" AS ", 1)[1] for (text,) in cursor.fetchall()]


@pytest.fixture(scope="module")
def url(paths):
    folder = paths.var / "postgres-prepared"
    with throwaway_postgres(folder, "lineage", ("prepared",), "prepared statements are checked on PostgreSQL") as made:
        runs = [
            {
                "job": f"dag.reader{index}",
                "inputs": {"/d/hub"},
                "start_inputs": set(),
                "outputs": {f"/d/out{index}"},
                "hour": index,
                "started": True,
                "id": f"0000000{index}-0000-4000-8000-000000000000",
            }
            for index in range(3)
        ]
        with LineageStore(made[0]["prepared"]) as store:
            store.ingest(impact_events(runs))
        yield made[0]["prepared"]


def test_a_read_used_again_is_prepared_and_answers_as_the_text_did(url):
    params = [
        {"tag": "t", "part": "d", "least": None, "skipped": [], "kind": "dataset"},
        {"tag": "50%", "part": "/", "least": 1, "skipped": [2, 3], "kind": "dataset"},
        {"tag": "x", "part": "dag", "least": 0, "skipped": [], "kind": "job"},
    ]
    with LineageStore(url) as store, store.engine.connect() as conn:
        cursor = conn.connection.cursor()  # the driver's own, never prepared: the answers as text
        as_text = []
        for each in params:
            cursor.execute(_pyformat(_NODES_LIKE), each)
            as_text.append(cursor.fetchall())
        assert all(as_text) and as_text[0] != as_text[1], as_text
        first = fetch_rows(conn, _NODES_LIKE, params[0])
        assert _prepared_texts(conn) == []  # used once: as text
        answers = [first] + [fetch_rows(conn, _NODES_LIKE, each) for each in params[1:] + params]
        assert answers == as_text + as_text, answers
        texts = _prepared_texts(conn)
        assert len(texts) == 1 and "$1" in texts[0] and "'%'" in texts[0] and "$3 IS NULL" in texts[0], texts
        # SQLAlchemy's reads too, prepared where the driver is called: listeners see the statement as written
        seen: list[str] = []
        event.listen(store.engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
        counts = [conn.execute(select(func.count()).where(nodes_table.c.id > least)).scalar() for least in (0, 1, 2)]
        assert counts == sorted(counts, reverse=True) and counts[0] > 0
        assert len(seen) == 3 and all(statement.startswith("SELECT count(*)") for statement in seen), seen
        assert len(_prepared_texts(conn)) == 2  # the count, from its second use


def test_a_read_postgresql_will_not_prepare_runs_as_text_and_the_transaction_goes_on(url):
    refused = "SELECT :x IS NULL, 1"  # a parameter of no type PostgreSQL can infer: as text, a literal of any
    with LineageStore(url) as store, store.engine.connect() as conn:
        conn.begin()
        for value in ("1", None, "3"):
            assert fetch_rows(conn, refused, {"x": value}) == [(value is None, 1)]
        assert _prepared_texts(conn) == []
        statements = conn.connection.info[prepared.INFO_KEY]
        assert statements.prepared == {refused.replace(":x", "%(x)s"): None}  # never asked again
        assert fetch_rows(conn, "SELECT 1", {}) == [(1,)]  # the transaction is whole
        conn.rollback()


def test_a_connection_keeps_the_most_recently_used_and_survives_a_rollback(url, monkeypatch):
    monkeypatch.setattr(prepared, "MOST_PREPARED", 2)
    texts = [f"SELECT {n} + CAST(:v AS integer)" for n in range(4)]
    with LineageStore(url) as store, store.engine.connect() as conn:
        for sql in texts:
            for value in (1, 2):
                assert fetch_rows(conn, sql, {"v": value}) == [(texts.index(sql) + value,)]
        held = _prepared_texts(conn)
        assert held == ["SELECT 2 + CAST($1 AS integer)", "SELECT 3 + CAST($1 AS integer)"], held
        conn.connection.rollback()  # the driver's own: prepared statements are not undone by a rollback
        assert fetch_rows(conn, texts[3], {"v": 5}) == [(8,)]
        assert fetch_rows(conn, texts[0], {"v": 5}) == [(5,)]  # evicted: counted again, as text
        assert _prepared_texts(conn) == held


def test_a_session_that_lost_its_statements_fails_one_question_and_prepares_them_again(url):
    sql = "SELECT CAST(:v AS integer) * 2"
    with LineageStore(url) as store, store.engine.connect() as conn:
        for value in (1, 2):
            assert fetch_rows(conn, sql, {"v": value}) == [(value * 2,)]
        assert _prepared_texts(conn) == ["SELECT CAST($1 AS integer) * 2"]
        conn.connection.cursor().execute("DEALLOCATE ALL")  # what a pooler's reset or a DISCARD ALL does
        with pytest.raises(psycopg2.errors.InvalidSqlStatementName):
            fetch_rows(conn, sql, {"v": 3})
        conn.connection.rollback()  # the driver's own: its cursor's transaction, which SQLAlchemy did not begin
        for value in (4, 5, 6):  # counted again as text, then prepared again
            assert fetch_rows(conn, sql, {"v": value}) == [(value * 2,)]
        assert _prepared_texts(conn) == ["SELECT CAST($1 AS integer) * 2"]


def test_nothing_is_prepared_when_the_setting_says_off(url, monkeypatch):
    monkeypatch.setenv("LINEAGE_STORE_PREPARE", "off")
    with LineageStore(url) as store, store.engine.connect() as conn:
        for _ in range(4):
            fetch_rows(conn, "SELECT CAST(:v AS integer)", {"v": 1})
            conn.execute(select(func.count()).select_from(nodes_table)).scalar()
        assert prepared.INFO_KEY not in conn.connection.info
        assert _prepared_texts(conn) == []
