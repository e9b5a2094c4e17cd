"""``make bench``'s explorer section (``bench/explorer.py``) on a small generated graph, for real: the store's ingest,
the closure table, as-of and run-provenance answers beside their recursive-CTE baselines (the section raises when
an answer and its baseline disagree), the figures and the report."""

from __future__ import annotations

import json

import pytest

from bench import explorer, ingest_throughput
from include.core import settings
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


def _flat(results: dict, prefix: str = "") -> dict:
    """results.json's figures by dotted key (``explorer.store_ingest_events_per_second``)."""
    flat = {}
    for key, value in results.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def test_no_two_bench_sections_write_the_same_key(figures, tmp_path, monkeypatch):
    """The explorer's figures, then the ingest-throughput section on a few events (as `make bench` runs them): the
    second adds keys of its own and changes none of the first's. `explorer.ingest_events_per_second` was written by
    both, two different rates under one key."""
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("BENCH_INGEST_EVENTS", "20")
    results = settings.Paths.current().bench / "results.json"
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps({"explorer": figures}))
    before = _flat(json.loads(results.read_text()))
    assert "explorer.store_ingest_events_per_second" in before
    assert ingest_throughput.main() == 0
    after = _flat(json.loads(results.read_text()))
    written = {key for key, value in after.items() if before.get(key, value) != value or key not in before}
    assert written, "the section wrote its figures"
    assert sorted(written & before.keys()) == [], "a key another section wrote"
    assert sorted(after.keys() - written) == sorted(before)
    assert all(key.startswith(f"{ingest_throughput.SECTION}.") for key in written)


def test_every_baseline_is_one_recursive_walk_shape():
    # one helper builds them all (the current graph's, the as-of one, the run provenance one)
    for sql in (explorer.ASOF_UPSTREAM_CTE, explorer.RUN_UPSTREAM_CTE, *queries.sql.CTE_WALK_SQL.values()):
        assert sql.startswith("WITH RECURSIVE walk(node, depth) AS (SELECT ")
