"""Keeps a store up to date with the event files under ``var/lineage/``, reading only what was appended."""

from __future__ import annotations

import json
from pathlib import Path

from include.core import settings
from include.lineage.events import discover_event_files
from include.lineage.store.store import LineageStore


class StoreFollower:
    """Keeps a store up to date with the event files under ``var/lineage/`` (Airflow's file transport, the Spark
    listener's file, spooled events): only the bytes appended since the last call are read; ingest is idempotent."""

    def __init__(self, store: LineageStore, paths: settings.Paths | None = None):
        self.store = store
        self.paths = paths or settings.Paths.current()
        self._offsets: dict[Path, int] = {}

    def refresh(self) -> int:
        new = 0
        for path in discover_event_files(self.paths):
            size = path.stat().st_size
            offset = self._offsets.get(path, 0)
            if size < offset:  # truncated or replaced: read it again
                offset = 0
            if size == offset:
                continue
            with path.open("rb") as stream:
                stream.seek(offset)
                chunk = stream.read(size - offset)
            if path.suffix == ".jsonl":
                complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next refresh
                lines = [line for line in complete.decode().splitlines() if line.strip()]
                events = [json.loads(line) for line in lines]
            else:
                complete = chunk
                events = [json.loads(chunk)]
            if events:
                new += self.store.ingest(events).new
            self._offsets[path] = offset + len(complete)
        return new
