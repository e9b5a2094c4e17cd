"""The lineage page says which facets of a node were invalid and why, and whether each DAG run's lineage is complete or
what is missing: in what the page is given (``include/lineage/api/data.py``: the node panel's ``invalidFacets``, a
DAG run's provenance ``completeness``), in the exported page's bundle, and drawn in a real browser."""

from __future__ import annotations

import uuid

import pytest

from include.core import settings
from include.lineage.api import data
from include.lineage.api.app import create_ui_app
from include.lineage.queries import LineageQueries
from include.lineage.store import LineageStore
from tests.support import tap_node
from tests.unit.test_lineage_completeness import _dag_run
from tests.unit.test_marquez_intake import BASE, PRODUCER, RUN_EVENT

DATASET = "dataset:file:/out/checked"


def _with_invalid_facet() -> dict:
    return {
        "eventType": "COMPLETE",
        "eventTime": "2025-02-01T00:00:00Z",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "ns", "name": "checker", "facets": {}},
        "inputs": [],
        "outputs": [
            {"namespace": "file", "name": "/out/checked", "facets": {"dataQualityMetrics": {**BASE, "rowCount": 3}}}
        ],
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT,
    }


@pytest.fixture
def page_store(tmp_path, monkeypatch):
    from include.lineage.api.intake import admit

    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    paths = settings.Paths.current()
    paths.lineage.mkdir(parents=True)
    store = LineageStore(f"sqlite:///{paths.lineage / 'store.db'}")
    store.ingest([admit(_with_invalid_facet()).sourced("POST /api/v1/lineage")])
    ids = {"good": _dag_run(store, "good_dag", complete=True), "bad": _dag_run(store, "bad_dag", complete=False)}
    yield store, ids, paths
    store.close()


def test_the_node_panel_names_the_invalid_facets_and_a_dag_runs_provenance_its_completeness(page_store):
    store, ids, _paths = page_store
    queries = LineageQueries(store)
    detail = data.node_detail(queries, DATASET)
    (problem,) = detail["invalidFacets"]
    assert problem["facet"] == "dataQualityMetrics" and '"columnMetrics" is a required property' in problem["rule"]
    assert detail["dataQuality"] == {}, "the invalid facet is not read: the panel shows no metrics from it"
    good = data.provenance(queries, ids["good"]["dag"])["completeness"]
    bad = data.provenance(queries, ids["bad"]["dag"])["completeness"]
    assert good["complete"] and not bad["complete"]
    assert {item["kind"] for item in bad["missing"]} >= {"Spark application without COMPLETE", "no START"}
    assert data.provenance(queries, ids["bad"]["app"])["completeness"] is None, "only a DAG run's"
    bundle = data.bundle(queries)
    assert bundle["details"][DATASET]["invalidFacets"] == detail["invalidFacets"]
    assert bundle["provenance"][ids["bad"]["dag"]]["completeness"]["complete"] is False


def test_the_served_page_shows_invalid_facets_and_what_a_dag_run_is_missing(page_store, browser):
    from tests.support import app_served

    store, ids, paths = page_store
    with app_served(create_ui_app(store=store, paths=paths)) as url:
        page = browser.new_page(viewport={"width": 1500, "height": 900})
        page.goto(url + "/")
        page.wait_for_function("document.body.dataset.ready === 'true'", timeout=30_000)
        tap_node(page, DATASET)
        page.wait_for_selector("#invalid-facets tr.invalid-facet[data-facet='dataQualityMetrics']")
        assert "columnMetrics" in page.inner_text("#invalid-facets")
        page.select_option("#as-of-run", ids["bad"]["dag"])
        page.wait_for_function("document.body.dataset.ready === 'true'")
        page.click("#run-provenance")
        page.wait_for_function("want => document.body.dataset.provenance === want", arg=ids["bad"]["dag"])
        kinds = page.evaluate("[...document.querySelectorAll('#completeness li.missing')].map(li => li.dataset.kind)")
        assert "Spark application without COMPLETE" in kinds and "Lineage incomplete" in page.inner_text(
            "#completeness"
        )
        page.close()
