"""Many rows of one statement, handed to the database driver as they are: the store's multi-row writes (a
transaction's events, runs, links, facets and edges: ``pending.py``, ``store.py``).

``Connection.execute(statement, rows)`` builds each row's parameters again through the compiled statement (names,
type processors, then the ``insertmanyvalues`` rendering): profiled on the 10^7 year's build (py-spy over ``lineage
ingest`` into SQLite), that per-row work was ≈ 10 % of the command's time, as much as SQLite spent inserting the
rows. Here a statement is compiled once per dialect and set of columns, with positional parameters; each row becomes
a tuple in that order, and

- on PostgreSQL, an INSERT whose parameters are all in its one ``VALUES`` row (with its ``ON CONFLICT`` and
  ``RETURNING``) is sent as one statement of many ``VALUES`` rows a page. SQLAlchemy does not do that for an upsert
  (``ON CONFLICT DO UPDATE``), which it sent a statement a row (``execute_batch``): PostgreSQL refuses a statement
  that updates one row twice, so **the rows of an upsert must differ in its conflict key** (the store's come from
  dicts keyed by it);
- on SQLite, only an INSERT that returns rows goes as many ``VALUES`` rows (``executemany`` cannot return them);
  the rest go to ``executemany``, which runs one prepared statement over the rows in C;
- any other statement (an UPDATE) goes to the driver's ``executemany`` (psycopg2's ``execute_batch`` on PostgreSQL,
  through the dialect), but one that returns rows and cannot go as many ``VALUES`` rows: ``executemany`` would drop
  what it returns, so SQLAlchemy's own ``execute`` runs it.

Both go through ``Connection.exec_driver_sql``, so the driver's errors come back as SQLAlchemy's (``DataError``, …),
as from ``execute``. A type's bind processor is still applied where a column has one.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy.engine import Connection, Dialect, Row
from sqlalchemy.sql import ClauseElement

# Rows in one multi-row INSERT: 1,000 is SQLAlchemy's own page; SQLite allows 32,766 parameters a statement (3.32+),
# psycopg2 writes the values into the text client-side.
PAGE_ROWS = 1_000
_MAX_PARAMETERS = {"sqlite": 32_766, "postgresql": 1_000_000}
_POSITIONAL_STYLE = {"sqlite": "qmark", "postgresql": "format"}


class Plan(NamedTuple):
    """A statement compiled for the driver: ``names`` of its parameters in order, their bind processors (None for
    none), and for a multi-row INSERT the text before and after its one ``VALUES`` row and that row's text."""

    sql: str
    names: tuple[str, ...]
    processors: tuple
    values_row: str | None
    head: str
    tail: str
    returns: bool = False  # it returns rows (``RETURNING``), which the driver's ``executemany`` would drop


@functools.lru_cache(maxsize=256)
def plan(statement: ClauseElement, dialect: Dialect, keys: tuple[str, ...]) -> Plan:
    """``statement`` compiled for ``dialect`` with positional parameters, for rows holding ``keys``."""
    positional = copy.copy(dialect)
    positional.paramstyle = _POSITIONAL_STYLE[dialect.name]
    positional.positional = True
    compiled = statement.compile(dialect=positional, column_keys=list(keys), for_executemany=True)
    names = tuple(compiled.positiontup or ())
    missing = sorted(set(names) - set(keys))
    if missing:  # a column default or a parameter the rows do not carry: a programming error, said at once
        raise ValueError(f"rows for {compiled.string[:80]!r} lack {', '.join(missing)}")
    processors = tuple(compiled._bind_processors.get(name) for name in names)
    sql = compiled.string
    mark = placeholder(dialect)
    values_row = f"({', '.join([mark] * len(names))})"
    # SQLite runs ``executemany`` in C over one prepared statement, faster than parsing a thousand-row text each page
    # (measured side by side): there only what returns rows, which ``executemany`` cannot give, goes as many rows
    returns = bool(compiled.effective_returning)
    many_rows = dialect.name != "sqlite" or returns
    clause = f"VALUES {values_row}"
    if many_rows and statement.is_insert and sql.count(mark) == len(names) and sql.count(clause) == 1:
        head, _, tail = sql.partition(clause)  # every parameter is in the one VALUES row
        return Plan(sql, names, processors, values_row, f"{head}VALUES ", tail, returns)
    return Plan(sql, names, processors, None, sql, "", returns)


def placeholder(dialect: Dialect) -> str:
    return "?" if dialect.name == "sqlite" else "%s"


def execute_many(conn: Connection, statement: ClauseElement, rows: Sequence[dict]) -> list[Row]:
    """``statement`` for each of ``rows`` (dicts with the same keys); the rows it returns (``RETURNING``), in no
    particular order, as ``Connection.execute`` gives them for many rows."""
    if not rows:
        return []
    dialect = conn.dialect
    compiled = plan(statement, dialect, tuple(rows[0]))
    if compiled.values_row is None and compiled.returns:  # only SQLAlchemy's own execution gives every row back
        return conn.execute(statement, list(rows)).all()
    if compiled.values_row is None:
        conn.exec_driver_sql(compiled.sql, _tuples(compiled, rows))
        return []
    values = _tuples(compiled, rows)
    returned: list[Row] = []
    page = min(PAGE_ROWS, _MAX_PARAMETERS[dialect.name] // len(compiled.names))
    for start in range(0, len(values), page):
        chunk = values[start : start + page]
        sql = compiled.head + ", ".join([compiled.values_row] * len(chunk)) + compiled.tail
        result = conn.exec_driver_sql(sql, tuple(value for row in chunk for value in row))
        if result.returns_rows:
            returned.extend(result.all())
    return returned


def _tuples(compiled: Plan, rows: Sequence[dict]) -> list[tuple]:
    names = compiled.names
    if not any(compiled.processors):
        return [tuple([row[name] for name in names]) for row in rows]
    pairs = tuple(zip(names, compiled.processors, strict=True))
    return [tuple([process(row[name]) if process else row[name] for name, process in pairs]) for row in rows]
