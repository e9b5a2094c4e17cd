"""`lineage checks` and the page's "blocked" data (include/quality/review.py) from real events in a real store."""

from __future__ import annotations

import uuid

import pytest

from include.core import naming, settings
from include.lineage.store import LineageStore
from include.quality import review

LOAD = "ingest_yellow_taxi_data.load_yellow_taxi_raw"


def _run(job: str, state: str, time: str, facet: dict) -> list[dict]:
    run_id = str(uuid.uuid4())
    dataset = naming.dataset_for_key(naming.TAXI_RAW)[0]
    return [
        {
            "eventType": event_type,
            "eventTime": time,
            "producer": "https://example.com/test",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id, "facets": {"writeAuditPublish": facet}},
            "job": {"namespace": settings.OPENLINEAGE_NAMESPACE, "name": job},
            "inputs": [],
            "outputs": [{"namespace": dataset.namespace, "name": dataset.name}],
        }
        for event_type in ("START", state)
    ]


def _facet(branch: str, published: bool, blocking=(), reason=None) -> dict:
    return {
        "_producer": "https://example.com/test",
        "_schemaURL": "https://example.com/schema",
        "table": naming.TAXI_RAW,
        "branch": branch,
        "published": published,
        "blocking": list(blocking),
        "warnings": [],
        "reason": reason,
        "results": [
            {"name": "days_missing", "success": not blocking, "severity": "error", "expected": "<= 0", "actual": "3"}
        ],
    }


@pytest.fixture
def store(tmp_path):
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        yield opened


def test_checks_list_each_audit_newest_first_and_a_blocked_branch_waits_for_review_until_published(store):
    failure = "yellow_taxi_raw days_missing: FAILED (block): observed 3, expected <= 0"
    store.ingest(_run(LOAD, "COMPLETE", "2025-02-01T00:10:00Z", _facet("audit_taxi_202501_a", True)))
    store.ingest(_run(LOAD, "FAIL", "2025-03-01T00:10:00Z", _facet("audit_taxi_202502_b", False, [failure])))
    found = review.checks(naming.TAXI_RAW, store)
    assert [(item["branch"], item["blocked"]) for item in found] == [
        ("audit_taxi_202502_b", True),
        ("audit_taxi_202501_a", False),
    ]
    pending = review.pending_reviews(store)
    assert pending[f"{settings.ICEBERG_NAMESPACE}.{naming.TAXI_RAW}"]["blocking"] == [failure]
    text = review.render_checks(naming.TAXI_RAW, found)
    assert "BLOCKED" in text and "FAIL days_missing: observed 3, expected <= 0" in text

    store.ingest(
        _run(review.PUBLISH_JOB, "COMPLETE", "2025-03-02T09:00:00Z", _facet("audit_taxi_202502_b", True, reason="ok"))
    )
    assert review.pending_reviews(store) == {}, "published after review: nothing waits"
    assert review.checks(naming.TAXI_RAW, store)[0]["reason"] == "ok"


@pytest.mark.parametrize("table", ["", "nyc_taxi.no_such", "lakehouse.nyc_taxi.weather_staging", "../x"])
def test_checks_of_a_table_that_is_not_audited_is_a_clear_bad_input(store, table):
    from include.core.errors import BadInputError

    with pytest.raises(BadInputError, match="not a table published through an audit branch"):
        review.checks(table, store)
