"""Keeps a store up to date with the event files under ``var/lineage/``, reading only what was appended.

How far each file was read is kept in the store itself (``lineage_file_cursors``), not in the process: an alert, a
``lineage`` command or a restarted ``lineage serve`` goes on where the last reader of that store stopped, so catching
up costs what was appended since, not the whole history again (an alert's impact set has a few seconds; Airflow's
event file grows with every run)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import select

from include.core import settings
from include.lineage.events import discover_event_files
from include.lineage.store.schema import file_cursors_table
from include.lineage.store.store import LineageStore

HEAD_BYTES = 4096  # how much of a file's start identifies it: a replaced file is read again from its start


def head_digest(head: bytes, length: int) -> str:
    """The digest a cursor of ``length`` bytes keeps, from the file's first ``HEAD_BYTES`` (or fewer) bytes."""
    return hashlib.sha256(head[: min(length, HEAD_BYTES)]).hexdigest()


class StoreFollower:
    """Keeps a store up to date with the event files under ``var/lineage/`` (Airflow's file transport, the Spark
    listener's file, spooled events): only the bytes appended since the store last read the file are read; a file
    that shrank or whose start changed (replaced, rotated) is read again from its start. Ingest is idempotent, so a
    second reader of the same bytes (two processes at once, a crash before the cursor was written) stores nothing
    twice."""

    def __init__(self, store: LineageStore, paths: settings.Paths | None = None):
        self.store = store
        self.paths = paths or settings.Paths.current()

    def refresh(self, files: Iterable[Path] | None = None) -> int:
        """Ingest what was appended to ``files`` (default: every event file under ``var/lineage/``); the number of
        new events."""
        paths = list(discover_event_files(self.paths) if files is None else (f for f in files if f.exists()))
        if not paths:
            return 0
        keys = {path: str(path.resolve()) for path in paths}
        with self.store.engine.connect() as conn:
            cursors = {
                row.path: (row.read_bytes, row.head_sha256)
                for row in conn.execute(
                    select(file_cursors_table).where(file_cursors_table.c.path.in_(list(keys.values())))
                )
            }
        new = 0
        for path in paths:
            new += self._follow(path, keys[path], cursors.get(keys[path]))
        return new

    def _follow(self, path: Path, key: str, cursor: tuple[int, str] | None) -> int:
        size = path.stat().st_size
        with path.open("rb") as stream:  # once: the head to check and keep, then what follows the cursor
            head = stream.read(min(size, HEAD_BYTES))
            offset = 0
            if cursor is not None:
                read_bytes, digest = cursor
                if read_bytes <= size and head_digest(head, read_bytes) == digest:
                    offset = read_bytes
            if size == offset:
                return 0
            stream.seek(offset)
            chunk = stream.read(size - offset)
        if path.suffix == ".jsonl":
            complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next refresh
            events = [json.loads(line) for line in complete.decode().splitlines() if line.strip()]
        else:
            complete = chunk
            events = [json.loads(chunk)]
        new = self.store.ingest(events).new if events else 0
        if complete:
            # After the events' transaction: a crash in between only means these bytes are read again
            self._save(key, offset + len(complete), head_digest(head, offset + len(complete)))
        return new

    def _save(self, key: str, read_bytes: int, digest: str) -> None:
        with self.store.engine.begin() as conn:
            conn.execute(
                self.store.statements["upsert_file_cursor"],
                {"path": key, "read_bytes": read_bytes, "head_sha256": digest},
            )
