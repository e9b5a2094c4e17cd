"""The lineage store's tables brought to the code's schema revision when a store is opened (Alembic, run from code:
no alembic.ini). The revisions are under ``migrations/versions/``; the version table is ``lineage_alembic_version``
(a store may share a PostgreSQL database with Airflow, whose own table is ``alembic_version``).

``LineageStore(url)`` calls :func:`open_at_head`:

- the fast path, almost every open: one query of the version table; at ``HEAD``, nothing else (Alembic is not even
  imported);
- otherwise :func:`upgrade_to_head`, under the migration lock (a file lock ``<db>.migrate.lock`` beside a SQLite
  file, ``pg_advisory_xact_lock`` on PostgreSQL) and in one transaction (SQLite's DDL too: ``BEGIN IMMEDIATE``). It
  reads the version again (another process may have upgraded the store meanwhile), then:

  - no lineage table: a new store, upgraded from nothing;
  - lineage tables but no version: a store of a release before migrations (``metadata.create_all``); its tables must
    be those of the first revision, it is stamped at it, then upgraded;
  - a known revision: upgraded;
  - a revision this code does not know: a newer release wrote the store; refused with a ``LineageError``.

A schema change: edit ``schema.py``; ``python -m include.lineage.store.migrations revision "what changed"`` writes the
next revision from the difference between ``schema.metadata`` and a scratch store at head (read it: Alembic cannot
guess a rename or a data change); set ``HEAD`` to it. ``tests/unit/test_store_migrations.py`` fails until both are
done.
"""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError, ProgrammingError

from include.lineage.errors import LineageError

HEAD = "0017"  # the newest revision under migrations/versions/ (the fast path compares with it, without Alembic)
FIRST = "0001"  # the tables ``metadata.create_all`` made before there were migrations
VERSION_TABLE = "lineage_alembic_version"
MIGRATIONS = Path(__file__).with_name("migrations")

_READ_VERSION = text(f"SELECT version_num FROM {VERSION_TABLE}")
_PG_LOCK_KEY = int.from_bytes(b"lineage", "big")  # one advisory lock key for the lineage store's migrations
log = logging.getLogger(__name__)


def open_at_head(engine: Engine) -> str | None:
    """Bring the store to ``HEAD``; what was done, or None when it already was (one query)."""
    if read_version(engine) == (HEAD,):
        return None
    return upgrade_to_head(engine)


def read_version(engine: Engine) -> tuple[str, ...] | None:
    """The store's revision(s), or None without a version table."""
    try:
        with engine.connect() as conn:
            return tuple(conn.execute(_READ_VERSION).scalars())
    except (OperationalError, ProgrammingError):
        return None  # no version table (or no database yet): the slow path looks closer, and reports a real error


def upgrade_to_head(engine: Engine) -> str | None:
    """The slow path: under the migration lock, recognise the store and upgrade it (see the module's description)."""
    from alembic import command
    from alembic.script import ScriptDirectory

    store = _shown(engine)
    with migration_lock(engine) as conn:
        config = alembic_config(conn)
        script = ScriptDirectory.from_config(config)
        if script.get_current_head() != HEAD:
            raise RuntimeError(f"{__file__}: HEAD is {HEAD} but the newest revision is {script.get_current_head()}")
        current = _versions(conn)
        if current == (HEAD,):
            return None  # another process upgraded it while this one waited for the lock
        known = {revision.revision for revision in script.walk_revisions()}
        if any(revision not in known for revision in current):
            raise LineageError(
                f"the lineage store {store} is at schema revision {', '.join(current)}, which this code does not know "
                f"(its newest is {HEAD}): a newer release wrote it; open it with that release, or use another store"
            )
        if current:
            done = f"upgraded from {', '.join(current)} to {HEAD}"
        elif tables := lineage_tables(conn):
            expected = tables_of_revision(FIRST)
            if tables != expected:
                raise LineageError(
                    f"the lineage store {store} has lineage tables but no {VERSION_TABLE} table, and they are not "
                    f"those of revision {FIRST} (what releases before migrations made): {_difference(expected, tables)}"
                    "; move it aside and ingest the events again"
                )
            command.stamp(config, FIRST)
            done = f"stamped at {FIRST} (made before migrations) and upgraded to {HEAD}"
        else:
            done = f"created at {HEAD}"
        command.upgrade(config, "head")
    log.info("lineage store %s: %s", store, done)
    return done


@contextmanager
def migration_lock(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction that only one process at a time holds for this store."""
    with _file_lock(_lock_file(engine)), engine.connect() as conn, conn.begin():
        if engine.dialect.name == "sqlite":
            # pysqlite begins a transaction only before INSERT/UPDATE/DELETE: begun here, the DDL is in it too (one
            # migration is all or nothing), with the write lock taken at once.
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})  # freed at commit
        yield conn


def alembic_config(conn: Connection, location: Path = MIGRATIONS):
    """Alembic's configuration, built here: the migrations package, and the connection ``env.py`` runs on."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(location).replace("%", "%%"))
    config.attributes["connection"] = conn
    return config


def lineage_tables(conn: Connection) -> dict[str, set[str]]:
    """The store's tables (``lineage_*``, the version table aside) and their columns' names."""
    inspector = inspect(conn)
    return {
        name: {column["name"] for column in inspector.get_columns(name)}
        for name in inspector.get_table_names()
        if name.startswith("lineage_") and name != VERSION_TABLE
    }


def tables_of_revision(revision: str) -> dict[str, set[str]]:
    """The tables and columns a store has at ``revision``: the revisions applied to a scratch in-memory SQLite."""
    from alembic import command

    with create_engine("sqlite://").connect() as conn, conn.begin():
        command.upgrade(alembic_config(conn), revision)
        return lineage_tables(conn)


def new_revision(message: str, location: Path = MIGRATIONS) -> Path:
    """Write the next revision (``0002_<message>.py``, ...) from what ``schema.metadata`` has that a scratch store at
    head has not (Alembic's autogenerate)."""
    from alembic import command
    from alembic.script import ScriptDirectory

    with create_engine("sqlite://").connect() as conn, conn.begin():
        config = alembic_config(conn, location)
        command.upgrade(config, "head")
        head = ScriptDirectory.from_config(config).get_current_head()
        written = command.revision(config, message=message, autogenerate=True, rev_id=f"{int(head or 0) + 1:04d}")
    return Path(written.path)


def _versions(conn: Connection) -> tuple[str, ...]:
    if not inspect(conn).has_table(VERSION_TABLE):
        return ()
    return tuple(conn.execute(_READ_VERSION).scalars())


def _lock_file(engine: Engine) -> Path | None:
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        return None  # PostgreSQL locks in the database; an in-memory SQLite belongs to one process
    return Path(f"{database}.migrate.lock")


@contextmanager
def _file_lock(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _difference(expected: dict[str, set[str]], found: dict[str, set[str]]) -> str:
    parts = [f"no table {name}" for name in sorted(expected.keys() - found.keys())]
    parts += [f"an unknown table {name}" for name in sorted(found.keys() - expected.keys())]
    for name in sorted(expected.keys() & found.keys()):
        parts += [f"no column {name}.{column}" for column in sorted(expected[name] - found[name])]
        parts += [f"an unknown column {name}.{column}" for column in sorted(found[name] - expected[name])]
    return ", ".join(parts)


def _shown(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)
