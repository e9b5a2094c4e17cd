"""A transaction writes once what its events merge (jobs' and datasets' facets, edge history, run -> dataset rows,
column edges: include/lineage/store/ingest.py ``FacetRow``, ``LineageStore._flush``); the store it leaves is the one
an event per transaction leaves, row for row, on a generated platform history (bench/history.py)."""

from __future__ import annotations

import random

from sqlalchemy import select

from bench.history import History
from include.lineage.store import LineageStore
from include.lineage.store.schema import metadata

# what depends on when a row was written, not on what the events say
_SKIPPED = {"lineage_file_cursors", "lineage_rejected_lines", "lineage_dead_letters"}


def _tables(store: LineageStore) -> dict[str, list[tuple]]:
    with store.engine.connect() as conn:
        return {
            table.name: sorted(map(tuple, conn.execute(select(table))), key=repr)
            for table in metadata.sorted_tables
            if table.name not in _SKIPPED
        }


def test_one_transaction_per_batch_leaves_the_store_one_per_event_leaves(tmp_path):
    events = list(History(1_200, seed=8).events())
    rng = random.Random(8)
    late = rng.sample(range(len(events)), 60)  # some events late, out of order: merges that must not win
    for index in late:
        events.append(events[index])
    for index in sorted(late, reverse=True):
        del events[index]
    with (
        LineageStore(f"sqlite:///{tmp_path / 'one.db'}") as one,
        LineageStore(f"sqlite:///{tmp_path / 'all.db'}") as batch,
    ):
        one.ingest(events, batch_size=1)
        batch.ingest(events, batch_size=400)
        expected, actual = _tables(one), _tables(batch)
    assert expected.keys() == actual.keys()
    for name in expected:
        assert actual[name] == expected[name], name
    assert expected["lineage_column_edges"] and expected["lineage_edge_history"]
