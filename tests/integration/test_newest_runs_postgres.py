"""``queries.sql.newest_runs`` on a real PostgreSQL (a cluster of the test's own on loopback): the newest runs of some
jobs or job versions are those a sort of all their runs gives, with and without a floor, and they are read in a
statement per chunk of keys, not one per key (2,056 round trips for a hub's impact at 10^6 events, Trap 63), from the
index alone (a page of the table a run listed without the start's columns in it, Trap 66).

The expected answers come from the generated events themselves, as in tests/unit/test_newest_runs.py."""

from __future__ import annotations

import random
import uuid
from unittest import mock

import pytest
from sqlalchemy import create_engine, event, select

from include.lineage.queries import LineageQueries, impact
from include.lineage.queries.sql import fetch_rows, newest_runs
from include.lineage.store import LineageStore
from include.lineage.store.schema import job_versions_table, jobs_table, runs_table
from tests.support import throwaway_postgres
from tests.unit.test_impact_runs import _events as impact_events
from tests.unit.test_impact_runs import _time
from tests.unit.test_newest_runs import JOBS
from tests.unit.test_newest_runs import _events as dag_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def store(paths):
    folder = paths.var / "postgres-newest-runs"
    with throwaway_postgres(folder, "lineage", ("newest", "plans"), "newest_runs is checked on PostgreSQL") as made:
        with LineageStore(made[0]["newest"]) as opened, LineageStore(made[0]["plans"]) as other:
            opened.plans_store = other  # type: ignore[attr-defined]  # a database of its own for the plans' test
            yield opened


def _hub_reads(rng: random.Random, readers: list[str], sides: int, count: int, started: float) -> list[dict]:
    """Runs of ``readers`` that read a hub, half of them a side table too (a new job version each time the inputs
    change), over 40 hours; ``started``: the share with a START event."""
    return [
        {
            "job": rng.choice(readers),
            "inputs": {"/hub"} | ({f"/side/{rng.randrange(sides)}"} if rng.random() < 0.5 else set()),
            "start_inputs": set(),
            "outputs": set(),
            "hour": rng.randrange(0, 40),
            "started": rng.random() < started,
            "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        }
        for _ in range(count)
    ]


def _statements_on_runs(store, call) -> tuple[object, list[str]]:
    """``call()`` and the statements it ran on ``lineage_runs``: SQLAlchemy's and those through the driver's cursor
    (``fetch_rows``, which SQLAlchemy's events do not see)."""
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if "FROM lineage_runs" in statement:
            seen.append(statement)

    def fetched(conn, sql, params):
        record(conn, None, sql, params, None, False)
        return fetch_rows(conn, sql, params)

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        with mock.patch.object(impact, "fetch_rows", fetched):  # the real one, its statements recorded
            return call(), seen
    finally:
        event.remove(store.engine, "before_cursor_execute", record)


def test_the_newest_runs_of_jobs_and_of_a_hubs_readers_are_a_sorts_and_read_a_statement_per_chunk(store):
    rng = random.Random(63)
    runs = [
        {
            "job": rng.choice(sorted(JOBS)),
            "hour": rng.randrange(0, 30),  # several runs of one start: ordered by id
            "started": rng.random() < 0.7,
            "child": rng.random() < 0.3,
            "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        }
        for _ in range(60)
    ]
    # a hub read by every reader, each reader's inputs changing over time (a new job version each time)
    readers = [f"dag.reader{i}" for i in range(8)]
    reads = _hub_reads(rng, readers, sides=3, count=80, started=1.0)
    store.ingest(dag_events(runs) + impact_events(reads))
    with store.engine.connect() as conn:
        ids = dict(conn.execute(select(jobs_table.c.name, jobs_table.c.id)).all())
        jobs = [ids[job] for job in JOBS]
        jv, j = job_versions_table.c, jobs_table.c
        versions = list(  # the readers' versions: every one reads the hub
            conn.execute(select(jv.id).join(jobs_table, j.id == jv.job_id).where(j.name.in_(readers))).scalars()
        )
        expected = sorted(((_time(run["hour"]), run["id"]) for run in runs), reverse=True)
        roots = [run_id for _, run_id in expected if not next(r for r in runs if r["id"] == run_id)["child"]]
        for limit in (1, 2, 3, 4, 5, 40):  # 4 jobs: a floor up to 4, each job's own runs above it
            every, statements = _statements_on_runs(
                store, lambda n=limit: newest_runs(conn, runs_table.c.job_id, jobs, n)
            )
            assert [run.id for run in every] == [run_id for _, run_id in expected[:limit]]
            assert len(statements) == 2, statements  # each job's newest start; the runs (above a floor or all)
            top = newest_runs(conn, runs_table.c.job_id, jobs, limit, [runs_table.c.parent_run_id.is_(None)])
            assert [run.id for run in top] == roots[:limit]
    assert len(versions) > 5  # more keys than some answers list
    queries = LineageQueries(store)
    hub_reads = sorted(((_time(read["hour"]), read["id"]) for read in reads), reverse=True)
    for listed in (1, 5, 100):
        answer, statements = _statements_on_runs(store, lambda n=listed: queries.impact("file:/hub", runs=n))
        assert [run["id"] for run in answer["runs"]] == [run_id for _, run_id in hub_reads[:listed]]
        assert answer["runsTotal"] == len(reads)
        # each version's newest start and count of runs, then the runs (above the floor, or with fewer versions than
        # runs listed all of theirs, sorted by the database) with what the answer shows of them (revision 0018)
        assert len(statements) == 2, statements
    # a window most versions have no run in: those are not asked one by one (a hub's thousands of versions, few of
    # them run since the date asked)
    since = _time(36)
    recent = sorted(((_time(read["hour"]), read["id"]) for read in reads if _time(read["hour"]) >= since), reverse=True)
    answer, statements = _statements_on_runs(store, lambda: queries.impact("file:/hub", since=since))
    assert [run["id"] for run in answer["runs"]] == [run_id for _, run_id in recent]
    assert 0 < len(recent) < len(versions) and len(statements) == 2, statements


def _plan_nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from _plan_nodes(child)


def test_an_impacts_runs_are_counted_paged_and_sorted_from_the_version_index_alone(store):
    """Every statement of an impact that reads runs by their start (the count, each version's newest start, the runs
    above a floor or the pages of a few versions, with and without a window) reads ``lineage_runs`` by an index-only
    scan of ``ix_lineage_runs_version_start``: the start is an expression of three columns, which PostgreSQL computes
    from the index only when they are in it (Trap 66). Planned as the statements ran, after a vacuum (an index-only
    scan needs the pages marked visible), with bitmap and sequential scans priced out and the runs' other indexes
    dropped in a transaction rolled back (in a test's table of a few pages any index costs as much as another)."""
    plans_store = store.plans_store
    rng = random.Random(66)
    reads = _hub_reads(rng, [f"dag.reader{i}" for i in range(6)], sides=4, count=120, started=0.8)
    plans_store.ingest(impact_events(reads))
    queries = LineageQueries(plans_store)
    executed: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        executed.append((statement, parameters))

    event.listen(plans_store.engine, "before_cursor_execute", record)
    try:
        answers = [
            queries.impact("file:/hub", runs=listed, since=since) for listed in (1, 100) for since in (None, _time(30))
        ]
    finally:
        event.remove(plans_store.engine, "before_cursor_execute", record)
    assert all(answer["runs"] for answer in answers)
    by_start = [(sql, params) for sql, params in executed if "FROM lineage_runs" in sql and "coalesce(" in sql]
    counts = [(sql, params) for sql, params in executed if "count(*)" in sql and "FROM lineage_runs" in sql]
    # newest starts and runs, four answers; each answer's count in the statement of its versions' newest starts
    assert len(by_start) >= 8 and len(counts) == 4 and all(count in by_start for count in counts), executed
    engine = create_engine(plans_store.url, isolation_level="AUTOCOMMIT")  # VACUUM runs outside a transaction
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("VACUUM ANALYZE lineage_runs")
    finally:
        engine.dispose()
    with plans_store.engine.connect() as conn:  # a transaction, rolled back: the indexes dropped in it come back
        cursor = conn.connection.dbapi_connection.cursor()
        # a test's table is a few pages, where any index is as cheap as another: the runs' other indexes dropped
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'lineage_runs' AND indexname NOT IN "
            "('lineage_runs_pkey', 'ix_lineage_runs_version_start')"
        )
        others = [name for (name,) in cursor.fetchall()]
        assert "ix_lineage_runs_job_start" in others, others
        for name in others:
            cursor.execute(f"DROP INDEX {name}")
        cursor.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off")
        try:
            for sql, params in by_start:
                cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
                reads = [
                    (node["Node Type"], node.get("Index Name"))
                    for node in _plan_nodes(cursor.fetchone()[0][0]["Plan"])
                    if node.get("Relation Name") == "lineage_runs"
                ]
                # one read by the start, or two where a version's count sits beside its newest start; the runs
                # listed then read by their key, once the newest are known (``sql._with_listed``)
                listed = ("Index Scan", "lineage_runs_pkey")
                by_start = [read for read in reads if read != listed]
                assert by_start and set(by_start) == {("Index Only Scan", "ix_lineage_runs_version_start")}, (
                    sql,
                    reads,
                )
                assert len(by_start) == (2 if "count(*)" in sql else 1), (sql, reads)
                assert reads.count(listed) == (0 if "count(*)" in sql else 1), (sql, reads)
        finally:
            conn.rollback()
