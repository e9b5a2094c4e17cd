"""PostgreSQL's prepared statements for the store's repeated reads, one set per connection.

PostgreSQL plans a statement each time it is sent as text, and the store's questions are short index walks written
as a few joins: planning is most of their time (Trap 69; run provenance at 10^5 events: 4.3 ms of planning for
1.6 ms of execution; prepared, the whole round trip took 1.3 ms against 6.8). A read the store sends again on a
connection is prepared there (``PREPARE``) and then executed by name; PostgreSQL itself plans the first five
executions for their values, then keeps a generic plan if it costs no more (``plan_cache_mode``). psycopg2, unlike
psycopg 3, never prepares anything itself: SQLAlchemy's reads are prepared at the driver's call (``do_execute``,
after every ``before_cursor_execute`` listener has seen the statement as written), ``queries.sql.fetch_rows``' by
its own call.

A connection's prepared statements live as long as it does and survive a rolled-back transaction; the least recently
used go (``DEALLOCATE``) past ``MOST_PREPARED``. A PREPARE that PostgreSQL refuses (a parameter whose type it cannot
infer) is undone by a savepoint and the text runs as plain text, never asked again on that connection: never an
aborted transaction. A session that lost them (``DEALLOCATE ALL``, ``DISCARD ALL``) fails the one question that
finds out, and its connection counts and prepares again. Behind a PgBouncer in transaction mode a connection's
statements do not follow its client: ``LINEAGE_STORE_PREPARE=off``.
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict

import psycopg2
import psycopg2.errors
from sqlalchemy import event
from sqlalchemy.engine import Engine

from include.core import settings

INFO_KEY = "lineage.prepared"  # in a pooled connection's ``info``: its ``PreparedStatements``, where enabled
PREPARE_AFTER = 2  # a text's uses on one connection before it is prepared there: a text used once never is
MOST_PREPARED = 256  # statements one connection keeps (an ``IN`` list of each length is a text of its own)
MOST_COUNTED = 4096  # texts counted towards ``PREPARE_AFTER`` before the count starts again

_PYFORMAT_PARAMETER = re.compile(r"%\((\w+)\)s|%%")  # psycopg2's ``%(name)s``, and a literal ``%`` doubled


def positional(sql: str) -> tuple[str, tuple[str, ...]]:
    """A statement in psycopg2's parameter style (``%(name)s``, ``%%``) as PREPARE takes it (``$1``, ``$2``…, a
    name used twice one number; ``%``), and the parameters' names in the numbers' order."""
    order: dict[str, int] = {}

    def number(match: re.Match) -> str:
        if match.group(1) is None:
            return "%"
        return f"${order.setdefault(match.group(1), len(order) + 1)}"

    return _PYFORMAT_PARAMETER.sub(number, sql), tuple(order)


class PreparedStatements:
    """The statements prepared on one PostgreSQL connection, by text (psycopg2's style): their names and parameters
    in order, or None for a text PostgreSQL would not prepare; how often each other text was used."""

    def __init__(self) -> None:
        self.prepared: OrderedDict[str, tuple[str, tuple[str, ...]] | None] = OrderedDict()
        self.uses: Counter[str] = Counter()
        self.made = 0  # statements prepared so far: each name is new, one evicted is never reused

    def run(self, cursor, sql: str, params: dict) -> bool:
        """Execute ``sql`` (psycopg2's style) with ``params`` by its prepared statement when it has one, or once it
        has been used ``PREPARE_AFTER`` times; False (nothing executed) otherwise: the caller runs it as text."""
        if sql in self.prepared:
            self.prepared.move_to_end(sql)
            entry = self.prepared[sql]
        else:
            self.uses[sql] += 1
            if self.uses[sql] < PREPARE_AFTER:
                if len(self.uses) > MOST_COUNTED:
                    self.uses.clear()
                return False
            del self.uses[sql]
            entry = self.prepared[sql] = self._prepare(cursor, sql)
            if len(self.prepared) > MOST_PREPARED:
                _, evicted = self.prepared.popitem(last=False)
                if evicted is not None:
                    cursor.execute(f"DEALLOCATE {evicted[0]}")
        if entry is None:
            return False
        name, names = entry
        arguments = f"({', '.join(['%s'] * len(names))})" if names else ""
        try:
            cursor.execute(f"EXECUTE {name}{arguments}", [params[parameter] for parameter in names])
        except psycopg2.errors.InvalidSqlStatementName:  # the session lost them (``DEALLOCATE ALL``, ``DISCARD``)
            self.prepared.clear()  # this statement fails; the next ones are counted and prepared again
            self.uses.clear()
            raise
        return True

    def _prepare(self, cursor, sql: str) -> tuple[str, tuple[str, ...]] | None:
        """PREPARE ``sql`` under a new name; None when PostgreSQL refuses it (undone, the transaction intact)."""
        self.made += 1
        name = f"lineage_q{self.made}"
        text, names = positional(sql)
        guarded = not cursor.connection.autocommit  # a savepoint needs a transaction: psycopg2 has one open
        if guarded:
            cursor.execute("SAVEPOINT lineage_prepare")
        try:
            cursor.execute(f"PREPARE {name} AS {text}")  # no parameters: psycopg2 leaves its ``%`` alone
        except psycopg2.Error:  # refused (a parameter's type it cannot infer, say): run as text
            if guarded:
                cursor.execute("ROLLBACK TO SAVEPOINT lineage_prepare")
            return None
        if guarded:
            cursor.execute("RELEASE SAVEPOINT lineage_prepare")
        return name, names


_READ = re.compile(r"\s*(SELECT|WITH)\b", re.IGNORECASE)  # what is prepared of SQLAlchemy's statements


def enable(engine: Engine) -> None:
    """Give each new PostgreSQL connection of ``engine`` its prepared statements, and run the reads SQLAlchemy
    executes on it through them, unless ``LINEAGE_STORE_PREPARE`` says ``off`` (a SettingError naming it for anything
    but ``on`` and ``off``)."""
    if settings.LINEAGE_STORE_PREPARE.choice(("on", "off")) == "off":
        return

    @event.listens_for(engine, "connect")
    def _on_connect(_dbapi_connection, record) -> None:
        record.info[INFO_KEY] = PreparedStatements()

    @event.listens_for(engine, "do_execute")
    def _do_execute(cursor, statement, parameters, context) -> bool:
        if not isinstance(parameters, dict) or not _READ.match(statement):
            return False  # SQLAlchemy executes it as written
        try:
            statements = context.root_connection.connection.info.get(INFO_KEY)
        except NotImplementedError:  # the dialect's first look at a connection: no pool entry (Trap 70)
            return False
        return statements is not None and statements.run(cursor, statement, parameters)
