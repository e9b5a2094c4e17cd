"""The store's multi-row writes by the driver (include/lineage/store/bulk.py), against SQLAlchemy's own
``Connection.execute(statement, rows)`` as the reference: the same statements and rows leave the same table and return
the same rows, on SQLite here and on PostgreSQL in tests/integration/test_store_bulk_postgres.py (``check_against``
is shared)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import (
    BigInteger,
    Column,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    create_engine,
    event,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from include.lineage.store.bulk import PAGE_ROWS, execute_many, plan
from include.lineage.store.pending import REFUSED_VALUE_ERRORS

METADATA = MetaData()
THINGS = Table(
    "things",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key", String(64), nullable=False, unique=True),
    Column("number", BigInteger),
    Column("blob", LargeBinary),
    Column("text", Text),
)


def _dialect_insert(dialect: str):
    return (sqlite if dialect == "sqlite" else postgresql).insert(THINGS)


def statements(dialect: str) -> dict:
    """The shapes of the store's multi-row writes: a plain insert, insert-or-skip returning what it inserted (the
    events), an upsert whose update is conditional (the links, the column edges), an update by key (runs, facets), and
    an upsert with a parameter outside its VALUES row (which goes row by row)."""
    skip = _dialect_insert(dialect).on_conflict_do_nothing(index_elements=["key"])
    upsert = _dialect_insert(dialect)
    upsert = upsert.on_conflict_do_update(
        index_elements=["key"],
        set_={"text": upsert.excluded.text, "number": upsert.excluded.number},
        where=THINGS.c.text.is_distinct_from(upsert.excluded.text),
    )
    outside = _dialect_insert(dialect)
    outside = outside.on_conflict_do_update(index_elements=["key"], set_={"text": bindparam("p_text")})
    return {
        "insert": THINGS.insert(),
        "insert_or_skip_returning": skip.returning(THINGS.c.id, THINGS.c.key),
        "upsert": upsert,
        "update": update(THINGS).where(THINGS.c.key == bindparam("p_key")).values(text=bindparam("p_text")),
        "update_by_id": update(THINGS)
        .where(THINGS.c.id == bindparam("p_id"))
        .values(number=bindparam("p_number"), blob=bindparam("p_blob"), text=bindparam("p_text")),
        "parameter_outside_values": outside,
        # one that cannot go as many VALUES rows and returns rows, which the driver's executemany would drop
        "parameter_outside_values_returning": outside.returning(THINGS.c.id, THINGS.c.key),
    }


def rows_for(name: str, rows: list[dict]) -> list[dict]:
    if name == "update":
        return [{"p_key": row["key"], "p_text": row["text"]} for row in rows]
    if name == "update_by_id":  # ids 1.. are the rows stored before; rows holding NULLs first
        return [
            {"p_id": index + 1, "p_number": row["number"], "p_blob": row["blob"], "p_text": row["text"]}
            for index, row in enumerate(sorted(rows, key=lambda row: row["number"] is not None))
        ]
    if name.startswith("parameter_outside_values"):
        return [{**row, "p_text": f"again {row['text']}"} for row in rows]
    return rows


def table_rows(conn) -> list[tuple]:
    return [tuple(row) for row in conn.execute(select(THINGS).order_by(THINGS.c.id))]


def check_against(engine_bulk, engine_reference, name: str, before: list[dict], rows: list[dict]) -> None:
    """``statement[name]`` for ``rows``, into a table holding ``before``, by ``execute_many`` and by SQLAlchemy: the
    same table after, the same rows returned."""
    outcomes = []
    for engine, run in (
        (engine_bulk, lambda conn, statement, values: execute_many(conn, statement, values)),
        (engine_reference, _sqlalchemy_execute),
    ):
        METADATA.drop_all(engine)
        METADATA.create_all(engine)
        with engine.begin() as conn:
            if before:
                conn.execute(THINGS.insert(), before)
            statement = statements(engine.dialect.name)[name]
            returned = run(conn, statement, rows_for(name, rows)) if rows else []
            outcomes.append((sorted(tuple(row) for row in returned), table_rows(conn)))
    assert outcomes[0] == outcomes[1]


def _sqlalchemy_execute(conn, statement, rows: list[dict]) -> list:
    result = conn.execute(statement, rows)
    return result.all() if result.returns_rows else []


@pytest.fixture
def engines(tmp_path):
    bulk, reference = (create_engine(f"sqlite:///{tmp_path / name}.db") for name in ("bulk", "reference"))
    yield bulk, reference
    bulk.dispose()
    reference.dispose()


def _row(index: int, text: str | None = None) -> dict:
    return {"key": f"k{index}", "number": index * 7, "blob": bytes([index % 256]) * 3, "text": text or f"t{index}"}


@pytest.mark.parametrize("name", list(statements("sqlite")))
@pytest.mark.parametrize("count", [1, PAGE_ROWS, PAGE_ROWS + 345])
def test_each_write_leaves_the_table_and_returns_the_rows_sqlalchemy_does(engines, name, count):
    # half the keys are stored already: the skip skips them, the upsert updates them (a third with the same text:
    # its WHERE leaves those alone)
    before = [_row(index, "same" if index % 3 else None) for index in range(0, 2 * count, 4) if name != "insert"]
    rows = [_row(index, "same" if index % 3 else f"new {index}") for index in range(0, 2 * count, 2)]
    check_against(*engines, name, before, rows)


TEXTS = st.one_of(st.none(), st.text(max_size=40))


ROWS = st.lists(
    st.tuples(
        st.text(min_size=1, max_size=20),
        st.one_of(st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1)),
        st.one_of(st.none(), st.binary(max_size=30)),
        TEXTS,
    ),
    max_size=30,
    unique_by=lambda row: row[0],
)
STORED = st.lists(st.integers(min_value=0, max_value=29), max_size=10, unique=True)
NAMES = st.sampled_from(["insert_or_skip_returning", "upsert", "update", "update_by_id", "parameter_outside_values"])


def check_any(engines, data: list[tuple], stored: list[int], name: str, allowed=lambda text: True) -> None:
    """Rows distinct in the conflict key as the store's are, some stored before (their text ``before``)."""
    rows = [{"key": key, "number": number, "blob": blob, "text": text} for key, number, blob, text in data]
    rows = [row for row in rows if _encodable(row) and allowed(row["key"]) and allowed(row["text"])]
    before = [rows[index] | {"text": "before"} for index in stored if index < len(rows)]
    check_against(*engines, name, before, rows)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=ROWS, stored=STORED, name=NAMES)
def test_any_rows_any_values_the_same_as_sqlalchemy(engines, data, stored, name):
    """Every value SQLite keeps: any text (lone surrogates aside: the driver refuses them either way), any 64-bit
    integer, bytes, NULL."""
    check_any(engines, data, stored, name)


def _encodable(row: dict) -> bool:
    try:
        for value in (row["key"], row["text"]):
            if value is not None:
                value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_a_thousand_rows_a_statement_and_the_rows_of_every_page_returned(engines):
    engine = engines[0]
    METADATA.create_all(engine)
    sent: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: sent.append(args[2]))
    rows = [_row(index) for index in range(2 * PAGE_ROWS + 1)]
    with engine.begin() as conn:
        returned = execute_many(conn, statements("sqlite")["insert_or_skip_returning"], rows)
    assert sorted(key for _, key in returned) == sorted(row["key"] for row in rows)
    assert [sql.count("(?, ?, ?, ?)") for sql in sent] == [PAGE_ROWS, PAGE_ROWS, 1]


def test_rows_without_a_parameter_of_the_statement_are_refused_at_once_naming_it(engines):
    with engines[0].begin() as conn, pytest.raises(ValueError, match="lack p_text"):
        METADATA.create_all(conn)
        execute_many(conn, statements("sqlite")["update"], [{"p_key": "k1"}])


def test_a_value_sqlite_cannot_keep_is_refused_as_the_store_expects(engines):
    METADATA.create_all(engines[0])
    with engines[0].begin() as conn, pytest.raises(REFUSED_VALUE_ERRORS):
        execute_many(conn, THINGS.insert(), [_row(1), {**_row(2), "number": 2**64}])


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.psycopg2.dialect()], ids=["sqlite", "postgresql"])
def test_only_an_insert_whose_parameters_are_all_in_its_values_row_is_sent_as_many_rows(dialect):
    names = statements(dialect.name)
    keys = ("key", "number", "blob", "text")
    many = {name for name in names if plan(names[name], dialect, tuple(rows_for(name, [_row(1)])[0])).values_row}
    # SQLite's executemany runs one prepared statement in C: there only what returns rows goes as many VALUES rows
    on_postgresql = {"insert", "insert_or_skip_returning", "upsert"}
    assert many == ({"insert_or_skip_returning"} if dialect.name == "sqlite" else on_postgresql)
    assert plan(names["insert"], dialect, keys).names == keys
