"""The store's multi-row writes by the driver (include/lineage/store/bulk.py) on a real PostgreSQL cluster started on
loopback, against SQLAlchemy's own ``Connection.execute(statement, rows)`` (the rules of
tests/unit/test_store_bulk.py), and what PostgreSQL alone refuses."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from sqlalchemy import bindparam, create_engine, event, update

from include.lineage.store.bulk import PAGE_ROWS, execute_many
from include.lineage.store.pending import REFUSED_VALUE_ERRORS
from tests.support import throwaway_postgres
from tests.unit.test_store_bulk import METADATA, NAMES, ROWS, STORED, THINGS, _row, check_against, check_any, statements

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def cluster(paths):
    databases = ("bulk", "reference")
    folder = paths.var / "postgres-bulk-writes"
    with throwaway_postgres(folder, "bulk", databases, "the multi-row writes are checked on PostgreSQL") as made:
        yield made[0]


@pytest.fixture
def engines(cluster):
    # as the store makes its engine (store.LineageStore): SQLAlchemy's multi-row modes on, the reference at its best
    made = [create_engine(cluster[name], executemany_mode="values_plus_batch") for name in ("bulk", "reference")]
    yield made
    for engine in made:
        engine.dispose()


@pytest.mark.parametrize("name", list(statements("postgresql")))
@pytest.mark.parametrize("count", [1, PAGE_ROWS + 345])
def test_each_write_leaves_the_table_and_returns_the_rows_sqlalchemy_does(engines, name, count):
    before = [_row(index, "same" if index % 3 else None) for index in range(0, 2 * count, 4) if name != "insert"]
    rows = [_row(index, "same" if index % 3 else f"new {index}") for index in range(0, 2 * count, 2)]
    rows[0] |= {"number": None, "blob": None}  # NULLs in the first of many VALUES rows
    check_against(*engines, name, before, rows)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=ROWS, stored=STORED, name=NAMES)
def test_any_rows_any_values_the_same_as_sqlalchemy(engines, data, stored, name):
    """The rule of the SQLite property, on PostgreSQL: texts without NUL, which PostgreSQL refuses either way."""
    check_any(engines, data, stored, name, allowed=lambda text: text is None or "\x00" not in text)


def test_an_upsert_is_one_statement_a_thousand_rows_where_sqlalchemy_sent_a_statement_a_row(engines):
    """SQLAlchemy leaves an ``ON CONFLICT DO UPDATE`` out of its multi-row ``VALUES`` (its #13130: PostgreSQL refuses
    a statement that updates one row twice) and psycopg2's ``execute_batch`` sends each row as its own statement;
    the store's rows differ in the key, so they go as one."""
    sent: dict[int, list[tuple[str, bool]]] = {}
    rows = [_row(index) for index in range(2 * PAGE_ROWS + 1)]
    for number, engine in enumerate(engines):
        METADATA.drop_all(engine)
        METADATA.create_all(engine)
        sent[number] = []

        def seen(conn, cursor, statement, parameters, context, executemany, into=sent[number]):
            into.append((statement, executemany))

        event.listen(engine, "before_cursor_execute", seen)
        with engine.begin() as conn:
            if number == 0:
                execute_many(conn, statements("postgresql")["upsert"], rows)
            else:
                conn.execute(statements("postgresql")["upsert"], rows)
    # the bulk path: three statements of 1,000, 1,000 and 1 VALUES rows
    assert [(sql.count("), ("), many) for sql, many in sent[0]] == [
        (PAGE_ROWS - 1, False),
        (PAGE_ROWS - 1, False),
        (0, False),
    ]
    # the reference: the one-row statement handed to executemany (psycopg2's execute_batch: a statement a row)
    [(statement, many)] = sent[1]
    assert many and statement.count("ON CONFLICT") == 1 and "), (" not in statement


@pytest.mark.parametrize(
    "bad",
    [{"text": "a\x00b"}, {"key": "k\x00"}, {"number": 2**63}, {"key": "k" * 65}],
    ids=["NUL in a text", "NUL in a key", "integer past 64 bits", "text past its column"],
)
def test_a_value_postgresql_refuses_is_refused_as_the_store_expects_and_writes_nothing(engines, bad):
    engine = engines[0]
    METADATA.drop_all(engine)
    METADATA.create_all(engine)
    with pytest.raises(REFUSED_VALUE_ERRORS):
        with engine.begin() as conn:
            execute_many(conn, statements("postgresql")["upsert"], [_row(1), {**_row(2), **bad}, _row(3)])
    with engine.connect() as conn:
        assert conn.execute(THINGS.select()).all() == []


def test_an_update_refuses_a_text_too_long_for_its_column_never_cuts_it(engines):
    """A text longer than its column is refused, the rows before it in the same call undone, and one that fits kept
    whole."""
    engine = engines[0]
    METADATA.drop_all(engine)
    METADATA.create_all(engine)
    with engine.begin() as conn:
        conn.execute(THINGS.insert(), [_row(1), _row(2)])
    rename = update(THINGS).where(THINGS.c.id == bindparam("p_id")).values(key=bindparam("p_key"))
    with pytest.raises(REFUSED_VALUE_ERRORS, match="too long"):
        with engine.begin() as conn:
            execute_many(conn, rename, [{"p_id": 1, "p_key": "short"}, {"p_id": 2, "p_key": "k" * 65}])
    with engine.connect() as conn:
        assert [key for _, key, *_ in conn.execute(THINGS.select().order_by(THINGS.c.id))] == ["k1", "k2"]
    with engine.begin() as conn:
        execute_many(conn, rename, [{"p_id": 1, "p_key": "short"}, {"p_id": 2, "p_key": "k" * 64}])
        assert conn.execute(THINGS.select().order_by(THINGS.c.id)).all()[1].key == "k" * 64
