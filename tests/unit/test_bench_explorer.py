"""``make bench``'s explorer section (``bench/explorer.py``) on a small generated graph, for real: the store's ingest,
the closure table, as-of and run-provenance answers beside their recursive-CTE baselines (the section raises when
an answer and its baseline disagree), the figures and the report."""

from __future__ import annotations

import pytest

from bench import explorer
from include.lineage import queries


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    return explorer.explorer(tmp_path_factory.mktemp("explorer"), target_nodes=700, queries=12)


def test_the_section_measures_every_figure_beside_its_baseline_and_writes_the_report(figures):
    assert figures["nodes"] >= 600 and figures["events"] > 0 and figures["closure_rows"] > figures["nodes"]
    for name in ("upstream", "downstream", "asof_upstream", "run_upstream", "big_upstream"):
        assert figures[f"{name}_p95_ms"] > 0 and figures[f"cte_{name}_p95_ms"] > 0, name
    assert figures["upstream_full_query_p95_ms"] > 0 and figures["big_upstream_full_query_p95_ms"] > 0
    assert figures["big_upstream_nodes"] >= 1 and figures["big_upstream_mean_ancestors"] > 10
    assert len(figures["load_average_1min"]) == 2 and len(figures["load_average_1min_queries"]) == 2
    report = explorer.to_markdown(figures)
    for row in ("`lineage upstream --as-of`", "run provenance", "the most ancestors", "machine load"):
        assert row in report, row


def test_every_baseline_is_one_recursive_walk_shape():
    # one helper builds them all (the current graph's, the as-of one, the run provenance one)
    for sql in (explorer.ASOF_UPSTREAM_CTE, explorer.RUN_UPSTREAM_CTE, *queries._CTE.values()):
        assert sql.startswith("WITH RECURSIVE walk(node, depth) AS (SELECT ")
