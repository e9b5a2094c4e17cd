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
    written = json.loads(results.read_text())
    assert written["explorer"] == {"kept": 1}, "the explorer's figures stay as they were"
    served = written["lineage_serve"]
    assert served["single_post_events_per_second"] > 0 and served["batch_post_events_per_second"] > 0
    assert served["schema_check_events_per_second"] > 0 and served["events"] == 120


def test_its_keys_name_what_they_measure_in_a_section_of_their_own():
    # explorer.ingest_events_per_second once held two figures: the explorer's ingest straight into the store, then
    # this section's POSTs to lineage serve over it (the docs quoted one as the other)
    keys = {ingest_throughput.SINGLE, ingest_throughput.BATCHED, ingest_throughput.SCHEMA_CHECK}
    assert len(keys) == 3 and all(key.endswith("_events_per_second") for key in keys)
    assert ingest_throughput.SECTION == "lineage_serve", (
        "not the explorer's section, which bench/explorer.py writes whole"
    )
