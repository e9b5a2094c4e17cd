"""``bench/ingest_throughput.py`` runs its two real servers end to end on a few events and reports both figures
(the bench itself asserts no timing)."""

from __future__ import annotations

import json

from bench import ingest_throughput
from include.core import settings
from include.lineage.validation import IngestValidator


def test_the_generated_events_pass_the_ingest_check():
    validator = IngestValidator()
    events = ingest_throughput.generate(60)
    assert len(events) == 60
    for event in events:
        validator.check(event, 1000, 1 << 20)


def test_the_bench_posts_every_event_singly_and_in_batches_and_merges_its_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("BENCH_INGEST_EVENTS", "120")
    results = settings.Paths.current().bench / "results.json"
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps({"explorer": {"kept": 1}}))
    assert ingest_throughput.main() == 0
    explorer = json.loads(results.read_text())["explorer"]
    assert explorer["kept"] == 1, "the explorer's other figures stay"
    assert explorer["ingest_events_per_second"] > 0 and explorer["batch_ingest_events_per_second"] > 0
    assert explorer["ingest_throughput"]["events"] == 120
