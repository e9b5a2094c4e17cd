"""How the questions read the store: SQL text through the driver's cursor, the closure table, and the recursive
CTE every baseline is built from.

The bottom of the package: every other module of ``include.lineage.queries`` may use these, they use none of it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from include.lineage.store import ancestry, prepared
from include.lineage.store.schema import RUN_START_COLUMNS, job_versions_table, jobs_table, runs_table

DEFAULT_DEPTH = 20  # Marquez's default
CHUNK = 500


_NAMED_PARAMETER = re.compile(r"(?<![:\w]):(\w+)")  # ``:name``, never a ``::type`` cast


@functools.lru_cache(maxsize=64)
def _pyformat(sql: str) -> str:
    """``:name`` parameters as ``%(name)s`` (psycopg2's paramstyle), a literal ``%`` doubled."""
    return _NAMED_PARAMETER.sub(r"%(\1)s", sql.replace("%", "%%"))


def fetch_rows(conn: Connection, sql: str, params: dict) -> list[tuple]:
    """The rows of a read-only SQL text with ``:name`` parameters, as plain tuples from the driver's cursor.

    For answers of thousands of rows SQLAlchemy's result rows cost more than the query itself (2,220 ancestors: 1.5 ms
    through ``Connection.execute``, 0.85 ms here). Used alike by the closure table's queries and the recursive CTEs
    they are compared with, so the comparison is of the queries."""
    cursor = conn.connection.cursor()
    try:
        if conn.dialect.name == "sqlite":
            cursor.execute(sql, params)  # sqlite3 takes :name
        else:  # prepared once used again on the connection (store/prepared.py), where it may be
            text = _pyformat(sql)
            statements = conn.connection.info.get(prepared.INFO_KEY)
            if statements is None or not statements.run(cursor, text, params):
                cursor.execute(text, params)
        return cursor.fetchall()
    finally:
        cursor.close()


def in_list(values: list) -> tuple[str, dict]:
    """``values`` as the parameters of an ``IN (...)`` of ``fetch_rows``' SQL text: the placeholders' text and the
    parameters by name."""
    return ", ".join(f":v{index}" for index in range(len(values))), {f"v{i}": value for i, value in enumerate(values)}


def chunks(values: Iterable, size: int = CHUNK) -> Iterator[list]:
    """``values`` in lists of at most ``size``: how many ids one ``IN (...)`` is given."""
    values = list(values)
    for start in range(0, len(values), size):
        yield values[start : start + size]


def run_start():
    """When a run started: its START event, else its earliest event (``first_event_time``, where the store keeps
    it), else its latest state change."""
    r = runs_table
    return func.coalesce(*(r.c[name] for name in RUN_START_COLUMNS if name in r.c))


class ListedRun(NamedTuple):
    """A run as a list of runs shows it (``newest_runs``): ordered by its start (``run_start``, "" when unknown)
    then its id, unique; then what the list shows of it (``_LISTED``)."""

    start: str
    id: str
    job_id: int
    state: str | None
    started_at: str | None
    ended_at: str | None


def newest_runs(conn: Connection, column, keys: Iterable, limit: int, where: Iterable = ()) -> list[ListedRun]:
    """The newest ``limit`` runs whose ``column`` is one of ``keys``, newest first by ``run_start`` then id;
    ``where``: conditions on each run (``newest_runs_counted``)."""
    return _newest(conn, column, keys, limit, where, counted=False)[0]


def newest_runs_counted(
    conn: Connection, column, keys: Iterable, limit: int, where: Iterable = ()
) -> tuple[list[ListedRun], int]:
    """``newest_runs`` and how many runs the keys have under ``where`` in all, counted in the statement that finds
    each key's newest start (a count of each key's entries of the same index beside its newest one: a statement of
    its own was one more round trip of every impact, ≈ 1 ms of PostgreSQL's)."""
    newest, total = _newest(conn, column, keys, limit, where, counted=True)
    return newest, total or 0


def _newest(conn: Connection, column, keys: Iterable, limit: int, where: Iterable, counted: bool):
    """The newest runs and (``counted``) their keys' count of runs. ``column`` is ``job_id`` or ``job_version_id``,
    each indexed with the run's start (``ix_lineage_runs_job_start``, ``ix_lineage_runs_version_start``).

    First each key's newest start, one probe of the index per key, a statement per chunk of keys. The ``limit``-th
    newest of those is a floor: that many keys each have a run at or above it, so every run of the answer is at or
    above it, and only the runs at or above it of the keys that reach it are read, newest first, a statement per
    chunk. Fewer keys than ``limit`` with runs: each key's newest ``limit`` runs in the index's order, the keys'
    pages joined in one statement (``_pages_of_keys``; a statement a key was twenty round trips for a dataset read by
    twenty versions, Trap 66), never every run of the keys: a job version that does not change is run every day for
    years. The runs of many keys sorted together read every run's row for its start (SQLite before 3.41 takes no
    expression's value from its index, Trap 60): a million rows for a hub of a year's store, hence the floor; a
    statement per key was 2,056 round trips of PostgreSQL's for the same hub at 10^6 events (Trap 63)."""
    keys = list(keys)
    where = list(where)
    newest_of_key, total = _newest_start_of_each(conn, column, keys, where, counted)
    if limit == 0:
        return [], total
    ranked = sorted((start for start in newest_of_key.values() if start is not None), reverse=True)
    r, start = runs_table, run_start()
    newest_first = (start.desc(), r.c.id.desc())
    of_keys = select(r.c.id, start.label("start")).where(*where).order_by(*newest_first).limit(limit)
    # a key without a newest start has no run under ``where`` (every run has a start: its first event's time), and
    # is not asked again: with ``--since``, most of a hub's thousands of versions have none
    if len(ranked) < limit:  # too few keys for a floor: each key's own newest runs, at most ``limit`` a key
        having_runs = sorted(key for key, newest in newest_of_key.items() if newest is not None)
        pages = (_pages_of_keys(conn, of_keys, column, chunk, limit) for chunk in chunks(having_runs, _PAGED_KEYS))
    else:
        floor = ranked[limit - 1]
        reaching = sorted(key for key, newest in newest_of_key.items() if newest is not None and newest >= floor)
        pages = (
            conn.execute(_with_listed(of_keys.where(column.in_(chunk), start >= floor).subquery())).all()
            for chunk in chunks(reaching)
        )
    newest: list[ListedRun] = []
    for rows in pages:
        page = [ListedRun(run_start or "", run_id, *shown) for run_id, run_start, *shown in rows]
        newest = sorted(newest + page, reverse=True)[:limit]
    return newest, total


_PAGED_KEYS = 100  # keys' pages joined in one statement (SQLite allows 500 terms in a compound SELECT)
_LISTED = ("job_id", "state", "started_at", "ended_at")  # ``ListedRun``'s columns after its start and id


def _with_listed(newest):
    """``newest`` (a run's id and start, the newest of some runs, at most a page) with what is listed of each run:
    read from the runs' rows by their key once the newest are known, in the same statement (a statement of its own
    was a round trip more of every impact). Not in the pages: SQLite 3.40 merged 20 pages of 100 in 2–3 ms with a
    run's id and start in them, 8.4 with its job too, though one page alone took the same either way (Trap 68)."""
    r = runs_table
    return select(newest.c.id, newest.c.start, *(r.c[name] for name in _LISTED)).join(r, r.c.id == newest.c.id)


_WITH_LISTED_SQL = (
    f"SELECT newest.id, newest.start, {', '.join(f'r.{name}' for name in _LISTED)} FROM ({{}}) AS newest"
    " JOIN lineage_runs r ON r.id = newest.id"
)


def _pages_of_keys(conn: Connection, of_keys, column, keys: list, limit: int) -> list[tuple]:
    """The newest ``limit`` runs of ``keys`` (each run's id, start and what is listed of it, ``_with_listed``):
    each key's own page (``of_keys``, its newest
    ``limit`` in the index's order), the pages sorted together, in one statement. On PostgreSQL a ``LATERAL`` page per
    element of an array of the keys: planned once (the pages of 22 keys joined by ``UNION ALL`` took it 3.3 ms to plan
    and 1.2 to run); SQLite has no ``LATERAL``, and joins the pages by ``UNION ALL`` (it merges them). Written as text
    around the one page compiled once: SQLAlchemy's union of as many selects cost 10 ms to build and to key for its
    cache, more than the database took to answer it."""
    page = of_keys.where(column == bindparam("page_key")).compile(dialect=_named_parameters(type(conn.dialect)))
    page_sql, params = str(page), dict(page.params)
    params["pages_limit"] = limit
    if conn.dialect.name == "postgresql":
        sql = (
            f"SELECT pages.id, pages.start FROM unnest(CAST(:page_keys AS integer[])) AS keys(key) CROSS JOIN LATERAL"
            f" ({_PAGE_KEY.sub('keys.key', page_sql)}) AS pages ORDER BY pages.start DESC, pages.id DESC"
            " LIMIT :pages_limit"
        )
        return conn.exec_driver_sql(_pyformat(_WITH_LISTED_SQL.format(sql)), {**params, "page_keys": list(keys)}).all()
    parts = []
    for index, key in enumerate(keys):
        parts.append(f"SELECT * FROM ({_PAGE_KEY.sub(f':page_key_{index}', page_sql)}) AS page_{index}")
        params[f"page_key_{index}"] = key
    union = " UNION ALL ".join(parts)
    sql = f"SELECT id, start FROM ({union}) AS pages ORDER BY start DESC, id DESC LIMIT :pages_limit"
    return conn.exec_driver_sql(_WITH_LISTED_SQL.format(sql), params).all()


_PAGE_KEY = re.compile(r":page_key\b")


@functools.lru_cache(maxsize=8)
def _named_parameters(dialect_class: type) -> object:
    """A dialect of the connection's kind that writes ``:name`` parameters, the text's own around the page (sqlite3
    takes them; ``_pyformat`` spells them for psycopg2)."""
    return dialect_class(paramstyle="named")


def _newest_start_of_each(conn: Connection, column, keys: list, where: list, counted: bool) -> tuple[dict, int | None]:
    """Each key's newest run start under ``where`` (None: no such run), from the row naming the key (the job's, the
    job version's): a scalar subquery per key, which reads one entry of the index in its order; and (``counted``)
    how many runs all the keys have under ``where``: beside each newest start its key's count of entries of the same
    index (PostgreSQL counts them from the index alone, ``ix_lineage_runs_version_start`` includes a start's columns,
    Trap 66)."""
    owner = _KEY_OWNERS[column.name]
    of_key = (column == owner, *where)
    newest = select(run_start()).where(*of_key).order_by(run_start().desc()).limit(1)
    columns = [owner, newest.correlate_except(runs_table).scalar_subquery()]
    if counted:
        count = select(func.count()).select_from(runs_table).where(*of_key)
        columns.append(count.correlate_except(runs_table).scalar_subquery())
    found: dict = {}
    total = 0 if counted else None
    for chunk in chunks(keys):
        for key, start, *count_of_key in conn.execute(select(*columns).where(owner.in_(chunk))):
            found[key] = start
            if counted:
                total += count_of_key[0]
    return found, total


_KEY_OWNERS = {"job_id": jobs_table.c.id, "job_version_id": job_versions_table.c.id}


# ------------------------------------------------------------------------- the closure table
_PACKED_ANCESTRY_SQL = "SELECT packed FROM lineage_ancestry WHERE descendant = :node"
_CLOSURE_SQL = {
    "upstream": "SELECT ancestor, depth FROM lineage_closure WHERE descendant = :node AND depth <= :depth",
    "downstream": "SELECT descendant, depth FROM lineage_closure WHERE ancestor = :node AND depth <= :depth",
}


def closure_upstream(conn: Connection, node_id: int, depth: int = DEFAULT_DEPTH) -> list[tuple[int, int]]:
    """(ancestor, distance) of every ancestor within ``depth`` edges, the node itself at 0: one indexed row, the
    node's closure packed (include/lineage/store/ancestry.py); an unknown node has none."""
    rows = fetch_rows(conn, _PACKED_ANCESTRY_SQL, {"node": node_id})
    return ancestry.unpack(rows[0][0], depth) if rows else []


def closure_upstream_rows(conn: Connection, node_id: int, depth: int = DEFAULT_DEPTH) -> list[tuple[int, int]]:
    """The same answer from the closure table's rows, one per ancestor (what the packed row is made from)."""
    return fetch_rows(conn, _CLOSURE_SQL["upstream"], {"node": node_id, "depth": depth})


def closure_downstream(conn: Connection, node_id: int, depth: int = DEFAULT_DEPTH) -> list[tuple[int, int]]:
    return fetch_rows(conn, _CLOSURE_SQL["downstream"], {"node": node_id, "depth": depth})


# ------------------------------------------------------------------------- the recursive walk, the baselines' shape
def recursive_walk_sql(
    step: str,
    start: str = "CAST(:start AS INTEGER)",
    answer: str = "SELECT node, MIN(depth) FROM walk GROUP BY node",
) -> str:
    """A recursive CTE ``walk(node, depth)`` from ``start`` at 0, adding the rows ``step`` selects as ``(node,
    depth)`` from each row ``w`` of the walk (``w.depth < :max_depth``); ``answer`` reads the walk (by default each
    node at its shortest depth).

    How a store without a closure table walks lineage (Marquez's ``LineageDao`` is one such walk): the one shape of
    every baseline the closure table and the store's other walks are measured against (``bench/explorer.py``)."""
    return f"WITH RECURSIVE walk(node, depth) AS (SELECT {start}, 0 UNION {step}) {answer}"


CTE_WALK_SQL = {
    "upstream": recursive_walk_sql(
        "SELECT e.source, w.depth + 1 FROM lineage_edges e JOIN walk w ON e.target = w.node WHERE w.depth < :max_depth"
    ),
    "downstream": recursive_walk_sql(
        "SELECT e.target, w.depth + 1 FROM lineage_edges e JOIN walk w ON e.source = w.node WHERE w.depth < :max_depth"
    ),
}


def cte_walk(conn: Connection, node_id: int, direction: str, depth: int = DEFAULT_DEPTH) -> list[tuple[int, int]]:
    """The same answer as the closure table, from a recursive CTE over the edge table (how Marquez walks lineage)."""
    return fetch_rows(conn, CTE_WALK_SQL[direction], {"start": node_id, "max_depth": depth})
