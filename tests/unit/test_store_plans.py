"""Every read and write of the ingest path (``include/lineage/store/statements.py``, built once and run per event or
per node) finds its rows by an index: a scan of a table costs more with every event of history, so a statement that
scans makes ingest slower the longer the store lives (a node's aliases were read by a scan of every alias until
2026-11-29: 3.6 ms each two days into a 10^7-event year, most of a day file's time in statements). SQLite's plans
here; PostgreSQL's for the same statements in ``tests/integration/test_lineage_store_postgres.py``."""

from __future__ import annotations

import pytest
from sqlalchemy import select
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


def _dag_runs(count: int) -> list[dict]:
    """The events of ``count`` hourly runs of one DAG-level job, ``dag_a``: what the page's picker offers."""
    from tests.unit.test_newest_runs import _events

    runs = [
        {"job": "dag_a", "hour": hour, "started": True, "child": False, "id": f"{hour:08d}-0000-4000-8000-000000000000"}
        for hour in range(count)
    ]
    return _events(runs)


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


def _explained_while(store: LineageStore, table: str, call) -> list[tuple[str, list[str]]]:
    """(statement, its plan) of each SELECT from ``table`` that ``call`` runs, explained with its own parameters."""
    from sqlalchemy import event

    seen: list[tuple[str, tuple]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().startswith("SELECT") and f"FROM {table}" in statement:
            seen.append((statement, parameters if isinstance(parameters, dict) else tuple(parameters or ())))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        call()
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    connection = store.engine.raw_connection()
    try:
        cursor = connection.cursor()
        return [(sql, [row[-1] for row in cursor.execute(f"EXPLAIN QUERY PLAN {sql}", args)]) for sql, args in seen]
    finally:
        connection.close()


_RUNS_KEY = "sqlite_autoindex_lineage_runs_1"  # the runs' primary key (a text id: an index of its own)


def _assert_pages_in_index_order(plan: list[str], index: str, keys: int) -> None:
    """``queries.sql.newest_runs``' pages joined in one statement: each key's page a search of ``index`` in its order
    (no sort of all the key's runs: the page's LIMIT stops the read); what is sorted is a page's rows once read (SQLite
    merges the pages: ``SCAN page_<i>`` then a sort), never a key's runs as the search finds them; then the runs
    listed, each read from its row by its key (``sql._with_listed``)."""
    reads = [step for step in plan if "lineage_runs" in step]
    assert len(reads) == keys + 1, plan
    assert all(step.startswith(f"SEARCH lineage_runs USING INDEX {index}") for step in reads[:-1]), plan
    assert reads[-1] == f"SEARCH r USING INDEX {_RUNS_KEY} (id=?)", plan
    sorts = [at for at, step in enumerate(plan) if "TEMP B-TREE" in step]
    assert sorts and all(plan[at - 1].startswith("SCAN page_") for at in sorts), plan


def test_the_year_answers_read_runs_by_their_indexes_never_every_run(tmp_path):
    """An impact's runs come from ``ix_lineage_runs_version_start`` alone (a hub of a year's store was read by a
    million runs) and the page's audits from ``lineage_run_audits``' indexes: the blocked ones, then their tables' (the
    first draw read every run's facets: 34 s at 6.4 x 10^6 events)."""
    from include.lineage.api import audits
    from include.lineage.queries import LineageQueries
    from tests.unit.test_blocked_on_page import BASE, BLOCKED
    from tests.unit.test_impact_runs import _events

    runs = [
        {"job": "dag.a", "inputs": {"/d/0"}, "start_inputs": set(), "outputs": {"/d/1"}, "hour": 1, "started": True},
        {"job": "dag.b", "inputs": {"/d/1"}, "start_inputs": {"/d/0"}, "outputs": set(), "hour": 2, "started": False},
    ]
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest(_events([{**run, "id": f"0000000{i}-0000-4000-8000-000000000000"} for i, run in enumerate(runs)]))
        queries = LineageQueries(store)
        for since in (None, "2025-03-01T00:00:00+00:00"):
            explained = _explained_while(store, "lineage_runs", lambda s=since: queries.impact("/d/0", since=s))
            newest_and_counts = [plan for sql, plan in explained if "count(*)" in sql]
            pages = [plan for sql, plan in explained if "AS page_0" in sql]
            # each version's newest start and its count of runs in one statement (the count a statement of its own was
            # one more round trip), then the two versions' pages of newest runs joined in one statement (a statement
            # a version was twenty round trips for a dataset read by twenty versions, Trap 66)
            assert len(newest_and_counts) == 1 and len(pages) == 1, explained
            assert not [sql for sql, _ in explained if "job_version_id = ?" in sql], explained
            _assert_pages_in_index_order(pages[0], "ix_lineage_runs_version_start", keys=2)
            newest_and_count = newest_and_counts[0]
            assert newest_and_count.index("CORRELATED SCALAR SUBQUERY 2") == len(newest_and_count) - 2, newest_and_count
            counted = newest_and_count[-1]  # the count's plan, after the newest start's
            if since is None:  # from the index alone
                assert counted == (
                    "SEARCH lineage_runs USING COVERING INDEX ix_lineage_runs_version_start (job_version_id=?)"
                ), newest_and_count
            else:  # the index's range of the window (SQLite before 3.41 reads each match's row for its start)
                assert counted == (
                    "SEARCH lineage_runs USING INDEX ix_lineage_runs_version_start (job_version_id=? AND <expr>>?)"
                ), newest_and_count
            assert not [plan for _, plan in explained if any(step.startswith("SCAN lineage_runs") for step in plan)]
        # as many versions as runs listed: each version's newest start, then the runs above their floor, both read in
        # the index's order (a statement per version was 2,056 round trips of PostgreSQL's for a hub at 10^6 events)
        from include.lineage.queries.sql import newest_runs
        from include.lineage.store.schema import job_versions_table, runs_table

        with store.engine.connect() as conn:
            versions = list(conn.execute(select(job_versions_table.c.id)).scalars())
            explained = _explained_while(
                store, "lineage_runs", lambda: newest_runs(conn, runs_table.c.job_version_id, versions, 1)
            )
        assert len(versions) >= 2 and len(explained) == 2, explained  # each version's newest, then the floor's runs
        (newest_sql, newest_plan), (_, floor_plan) = explained
        assert "ORDER BY" in newest_sql and "LIMIT" in newest_sql, newest_sql
        assert any(
            "SEARCH lineage_runs USING INDEX ix_lineage_runs_version_start (job_version_id=?)" in step
            for step in newest_plan
        ), newest_plan
        # the runs above the floor in the index's order (no sort), then the listed ones' rows by their key
        assert floor_plan == [
            "MATERIALIZE anon_1",
            "SEARCH lineage_runs USING INDEX ix_lineage_runs_version_start (job_version_id=? AND <expr>>?)",
            "SCAN anon_1",
            f"SEARCH lineage_runs USING INDEX {_RUNS_KEY} (id=?)",
        ], floor_plan
        for plan in (newest_plan, floor_plan):
            assert not [step for step in plan if step.startswith("SCAN lineage_runs")], plan
    with LineageStore(f"sqlite:///{tmp_path / 'audits.db'}") as store:
        store.ingest(BASE + BLOCKED)
        # the page's "as of a run" picker: each DAG-level job's newest runs in the index's order
        from include.lineage.api import data

        store.ingest(_dag_runs(3))
        explained = _explained_while(store, "lineage_runs", lambda: data.graph(LineageQueries(store)))
        pages = [plan for sql, plan in explained if "AS page_0" in sql]
        assert len(pages) == 1, explained
        _assert_pages_in_index_order(pages[0], "ix_lineage_runs_job_start", keys=1)
        explained = _explained_while(store, "lineage_run_audits", lambda: audits.blocked_spans(store))
        assert len(explained) == 2, explained  # the tables with a blocked audit, then those tables' audits
        (_, blocked), (_, of_tables) = explained
        assert blocked[0] == "SEARCH lineage_run_audits USING INDEX ix_lineage_run_audits_published_table (published=?)"
        assert of_tables[0].startswith("SEARCH lineage_run_audits USING INDEX ix_lineage_run_audits_table")
        for _, plan in explained:
            assert not [step for step in plan if step.startswith("SCAN")], plan


def test_a_runs_provenance_finds_each_latest_write_as_one_index_entry(tmp_path):
    """An input read without a version is traced to the dataset's latest write before the run: the last entry of
    ``ix_lineage_run_datasets_dataset`` (dataset, direction, written_at, run) below the run's start, read from the
    index alone; it was every write of the dataset, each joined to its run and sorted (``USE TEMP B-TREE FOR ORDER
    BY``: 234 ms at p95 on PostgreSQL for a year of 10^6 events). PostgreSQL's plan:
    tests/integration/test_lineage_store_postgres.py."""
    from include.lineage.queries import provenance

    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        sql = provenance._RUN_PROVENANCE.replace(":run", "?")
        connection = store.engine.raw_connection()
        try:
            plan = connection.cursor().execute(f"EXPLAIN QUERY PLAN {sql}", ["a run"]).fetchall()
        finally:
            connection.close()
    steps = {row[0]: row for row in plan}
    latest = [row[-1] for row in plan if steps.get(row[1], (None, None, None, ""))[-1].startswith("CORRELATED")]
    assert len(latest) == 2, plan  # in the walk, and for the inputs listed
    for step in latest:
        assert step == (
            "SEARCH lw USING COVERING INDEX ix_lineage_run_datasets_dataset"
            " (dataset_id=? AND direction=? AND written_at<?)"
        ), plan
    assert not [row for row in plan if "TEMP B-TREE" in row[-1] or row[-1].startswith("SCAN lw")], plan


def test_the_pages_graph_reads_the_jobs_once_and_their_latest_runs_by_key(tmp_path):
    """The page's graph reads every job once (their level, their latest run, the picker's DAGs): a year of updates
    leaves PostgreSQL's table of 1,200 jobs 37 MB of pages, and the graph read it three times (one a LIKE over every
    job's facets), 40 of its 113 ms at 10^6 events. Each latest run's state is a seek of the runs' key."""
    from include.lineage.api import data
    from include.lineage.queries import LineageQueries

    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest(_dag_runs(3))
        graph = None

        def draw():
            nonlocal graph
            graph = data.graph(LineageQueries(store))

        jobs = _explained_while(store, "lineage_jobs", draw)
        runs = _explained_while(store, "lineage_runs", draw)
    every_job = [sql for sql, plan in jobs if any(step.startswith("SCAN lineage_jobs") for step in plan)]
    assert len(every_job) == 1 and not [sql for sql, _ in jobs if "LIKE" in sql], jobs  # the rest seek by id
    states = [plan for sql, plan in runs if "lineage_runs.state" in sql and "lineage_runs.id IN" in sql]
    assert states and all(plan[0].startswith("SEARCH lineage_runs USING INDEX sqlite_autoindex") for plan in states)
    assert [run["job"] for run in graph["runs"]] == ["dag_a"] * 3  # the picker still finds the DAG's runs
    assert {node["state"] for node in graph["nodes"] if node["kind"] == "job"} == {"COMPLETED"}
