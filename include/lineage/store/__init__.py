"""The lineage store: ``schema`` (tables), ``ingest`` (one event into them), ``store`` (the store and its engine),
``ancestry`` (the packed upstream closure), ``migrations`` (the schema's history, applied on open)."""

from include.lineage.store.ingest_result import IngestResult
from include.lineage.store.store import LineageStore, default_store_url, iter_events

__all__ = ["IngestResult", "LineageStore", "default_store_url", "iter_events"]
