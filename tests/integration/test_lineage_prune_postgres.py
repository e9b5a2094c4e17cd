"""``lineage prune`` on a real PostgreSQL (a cluster of the test's own on loopback): the same generated history as
tests/unit/test_lineage_prune.py, pruned in small transactions, leaves exactly what SQLite leaves (by names, not by
ids), and a writer coming in between the prune's transactions keeps what it wrote, as on SQLite."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from include.lineage.store import LineageStore
from include.lineage.store.retention import parse_horizon, prune_store
from include.lineage.store.schema import (
    dataset_versions_table,
    datasets_table,
    edge_history_table,
    events_table,
    job_versions_table,
    jobs_table,
    nodes_table,
    run_datasets_table,
    runs_table,
)
from tests.support import throwaway_postgres
from tests.unit.test_lineage_prune import (
    NOW,
    check_closure,
    check_references,
    generated_events,
    prune_with_a_writer_in_between,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
DATABASES = ("batched", "written")


@pytest.fixture(scope="module")
def postgres_urls(paths):
    folder = paths.var / "postgres-lineage-prune"
    with throwaway_postgres(folder, "lineage", DATABASES, "the prune is checked on PostgreSQL") as made:
        urls = made[0]
        events = generated_events()  # its run ids are drawn at random: the same list for both databases
        for name in DATABASES:
            with LineageStore(urls[name]) as store:
                store.ingest(events)
        yield urls, events


def what_stays(store) -> dict[str, set]:
    """What is left, named as both databases name it (their ids may differ)."""
    with store.engine.connect() as conn:
        node = dict(conn.execute(select(nodes_table.c.id, nodes_table.c.key)).all())
        dataset = dict(conn.execute(select(datasets_table.c.id, datasets_table.c.name)).all())
        job = dict(conn.execute(select(jobs_table.c.id, jobs_table.c.name)).all())
        dv, jv, rd = dataset_versions_table.c, job_versions_table.c, run_datasets_table.c
        return {
            "events": set(conn.execute(select(events_table.c.dedup_key)).scalars()),
            "runs": set(conn.execute(select(runs_table.c.id)).scalars()),
            "run edges": {
                (r, dataset[d], direction)
                for r, d, direction in conn.execute(select(rd.run_id, rd.dataset_id, rd.direction))
            },
            "dataset versions": {(dataset[d], v) for d, v in conn.execute(select(dv.dataset_id, dv.version))},
            "job versions": {(job[j], v) for j, v in conn.execute(select(jv.job_id, jv.version))},
            "edge history": {
                (node[s], node[t])
                for s, t in conn.execute(select(edge_history_table.c.source, edge_history_table.c.target))
            },
        }


def test_a_prune_in_small_transactions_on_postgresql_leaves_what_it_leaves_on_sqlite(postgres_urls, tmp_path):
    sqlite = tmp_path / "store.db"
    urls, events = postgres_urls
    with LineageStore(f"sqlite:///{sqlite}") as store:
        store.ingest(events)
        expected_report = prune_store(store, parse_horizon("90d"), now=NOW)
        expected = what_stays(store)
    with LineageStore(urls["batched"]) as store:
        dry = prune_store(store, parse_horizon("90d"), now=NOW, dry_run=True)
        report = prune_store(store, parse_horizon("90d"), now=NOW, batch_runs=7)
        assert what_stays(store) == expected
        check_references(store)
        check_closure(store)
    assert report.counts == expected_report.counts == dry.counts and report.counts["runs"] > 1000
    assert report.transactions > report.counts["runs"] / 7 and report.bytes_before is None


def test_a_writer_between_the_prune_s_transactions_on_postgresql(postgres_urls):
    with LineageStore(postgres_urls[0]["written"]) as store:
        prune_with_a_writer_in_between(store)
