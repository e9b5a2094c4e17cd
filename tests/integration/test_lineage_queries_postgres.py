"""The lineage store's read paths on PostgreSQL answer exactly as on SQLite: the closure table's upstream and
downstream (rows from the driver's cursor, ``:name`` parameters rewritten for psycopg2), the as-of walk (level by
level on both), run provenance (one recursive query on both, PostgreSQL's without JIT) and the
Marquez-shaped graph data, on the bench's generated graph ingested into both stores."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from bench.explorer import generate_events
from include.lineage.queries import LineageQueries, NotYetSeenError, parse_instant
from include.lineage.store import LineageStore, iter_events, packing
from include.lineage.store.schema import nodes_table, payload_dictionaries_table, runs_table
from tests.support import throwaway_postgres

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def both_stores(paths, tmp_path_factory):
    folder = paths.var / "postgres-lineage-queries"
    with throwaway_postgres(folder, "lineage", ("lineage",), "the queries are compared on a PostgreSQL store") as made:
        events, shape = generate_events(900, seed=5)
        sqlite_path = tmp_path_factory.mktemp("sqlite-store") / "store.db"
        stores = [LineageStore(f"sqlite:///{sqlite_path}"), LineageStore(made[0]["lineage"])]
        for store in stores:
            store.ingest(events)
        yield stores, shape
        for store in stores:
            store.close()


def _named(sub) -> tuple:
    """A subgraph by node keys, not ids: (node -> depth, edges)."""
    key = {node_id: node.key for node_id, node in sub.nodes.items()}
    return (
        {key[node]: depth for node, depth in sub.depths.items()},
        sorted((key[source], key[target]) for source, target in sub.edges),
    )


def test_postgresql_answers_every_read_as_sqlite_does(both_stores):
    (lite, pg), shape = both_stores
    assert pg.dialect == "postgresql"
    with lite.engine.connect() as conn:
        keys = conn.execute(select(nodes_table.c.key).order_by(nodes_table.c.id)).scalars().all()
        run_ids = conn.execute(select(runs_table.c.id).order_by(runs_table.c.id)).scalars().all()
    queries = [LineageQueries(lite), LineageQueries(pg)]
    as_of = parse_instant("2025-01-01T00:03:00Z")  # some jobs had run by then, others not
    assert as_of < shape["end_time"].replace("+00:00", "Z")
    checked_as_of = 0
    for key in keys[::7]:
        for direction in ("upstream", "downstream"):
            for depth in (1, 20):
                answers = [_named(getattr(q, direction)(key, depth)) for q in queries]
                assert answers[0] == answers[1], (key, direction, depth)
            answers = []
            for q in queries:
                try:
                    answers.append(_named(getattr(q, direction)(key, 20, as_of=as_of)))
                except NotYetSeenError as error:  # first seen after the instant
                    answers.append(str(error))
            checked_as_of += isinstance(answers[0], tuple)
            assert answers[0] == answers[1], (key, direction, "as of")
    assert checked_as_of > 10
    for run_id in run_ids[::5]:
        for depth in (0, 2, 20):
            assert queries[0].run_lineage(run_id, depth) == queries[1].run_lineage(run_id, depth), (run_id, depth)
    sample = keys[-1]  # a roll-up report: the widest upstream
    graphs = [q.marquez_graph(q.upstream(sample, 20)) for q in queries]
    assert graphs[0] == graphs[1] and len(graphs[0]["graph"]) > 20


def test_postgresql_keeps_every_event_packed_and_gives_it_back_as_sqlite_does(both_stores, monkeypatch):
    """Packed events (bytea on PostgreSQL, read back as a memoryview), with a dictionary trained there too."""
    (lite, pg), _shape = both_stores
    monkeypatch.setattr(packing, "CHECK_EVERY", 0)  # look at once: the store holds 820 events, train at 500
    monkeypatch.setattr(packing, "FIRST_TRAINING", 500)
    pg.packer.after_ingest()
    with pg.engine.connect() as conn:
        trained = conn.execute(select(payload_dictionaries_table.c.events)).scalars().all()
    assert trained == [len(list(iter_events(lite)))]
    extra = {**next(iter_events(lite)), "eventTime": "2031-01-01T00:00:00Z", "eventType": "OTHER"}
    for store in (lite, pg):
        store.ingest([extra])  # packed with the new dictionary on PostgreSQL, without one on SQLite
    assert list(iter_events(pg)) == list(iter_events(lite)) and list(iter_events(pg))[-1] == extra
    assert LineageQueries(pg).merged_runs() == LineageQueries(lite).merged_runs()


def test_the_store_s_postgresql_sessions_compile_nothing_just_in_time(both_stores):
    """PostgreSQL's planner over-estimates the recursive provenance walk by orders of magnitude; with JIT on (the
    server's default) every run provenance question compiled ~150 functions: 808 of 849 ms at 3x10^4 events
    (docs/performance.md). Each of the store's connections turns it off, the pooled and the fresh ones."""
    (_, pg), _ = both_stores
    with pg.engine.connect() as first, pg.engine.connect() as second:
        assert first.exec_driver_sql("SHOW jit").scalar() == "off"
        assert second.exec_driver_sql("SHOW jit").scalar() == "off"
        # the server's own default is on: a connection the store did not make has it
        assert first.exec_driver_sql("SELECT reset_val FROM pg_settings WHERE name = 'jit'").scalar() == "on"
    pg.engine.dispose()  # connections made again after the pool was emptied
    with pg.engine.connect() as again:
        assert again.exec_driver_sql("SHOW jit").scalar() == "off"
