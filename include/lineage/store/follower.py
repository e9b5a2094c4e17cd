"""Keeps a store up to date with the event files under ``var/lineage/``, reading only what was appended.

How far each file was read is kept in the store itself (``lineage_file_cursors``), not in the process: an alert, a
``lineage`` command or a restarted ``lineage serve`` goes on where the last reader of that store stopped, so catching
up costs what was appended since, not the whole history again (an alert's impact set has a few seconds; Airflow's
event file grows with every run).

A line that is not an event (not UTF-8, not JSON, not shaped like an OpenLineage event) or that the store refuses does
not stop the follower: it is kept in ``lineage_rejected_lines`` with its file, line and reason, logged once, and the
lines after it are stored. Stopping there would keep every later event of that file out of the store for good, and
make every reader that catches up (the lineage page, an alert) fail on it."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select

from include.core import settings
from include.lineage.errors import InvalidEventError
from include.lineage.events import EventLine, SourcedEvent, discover_event_files, event_lines, parse_event
from include.lineage.store.schema import file_cursors_table, rejected_lines_table
from include.lineage.store.store import INGEST_BATCH_SIZE, LineageStore

HEAD_BYTES = 4096  # how much of a file's start identifies it: a replaced file is read again from its start
REJECTED_CONTENT_BYTES = 64 * 1024  # how much of a rejected line the store keeps (the file keeps all of it)
log = logging.getLogger(__name__)


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
                row.path: (row.read_bytes, row.head_sha256, row.read_lines)
                for row in conn.execute(
                    select(file_cursors_table).where(file_cursors_table.c.path.in_(list(keys.values())))
                )
            }
        new = 0
        for path in paths:
            new += self._follow(path, keys[path], cursors.get(keys[path]))
        return new

    def _follow(self, path: Path, key: str, cursor: tuple[int, str, int | None] | None) -> int:
        try:
            stream = path.open("rb")
        except FileNotFoundError:
            return 0  # gone since it was listed: a spooled event sent and removed by `lineage replay` meanwhile
        with stream:  # once: the head to check and keep, then what follows the cursor
            size = stream.seek(0, 2)
            stream.seek(0)
            head = stream.read(min(size, HEAD_BYTES))
            offset, lines_before = 0, 0
            if cursor is not None:
                read_bytes, digest, read_lines = cursor
                if read_bytes <= size and head_digest(head, read_bytes) == digest:
                    offset, lines_before = read_bytes, read_lines
            if size == offset:
                return 0
            stream.seek(offset)
            chunk = stream.read(size - offset)
        if path.suffix == ".jsonl":
            complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next refresh
            lines = event_lines(complete, offset, None if lines_before is None else lines_before + 1)
            read_lines = None if lines_before is None else lines_before + complete.count(b"\n")
        else:  # a spooled event: one JSON document
            complete = chunk
            lines = [EventLine(0, None, chunk, *parse_event(chunk))] if chunk.strip() else []
            read_lines = None
        new, rejected = self._ingest(str(path), lines)
        if complete:
            # After the events' transaction: a crash in between only means these bytes are read again
            end = offset + len(complete)
            self._save(str(path), key, end, head_digest(head, end), read_lines, rejected)
        return new

    def _ingest(self, label: str, lines: list[EventLine]) -> tuple[int, list[tuple[EventLine, str]]]:
        """Store the lines' events; (how many were new, the lines not stored with why)."""
        rejected = [(line, line.error) for line in lines if line.error is not None]
        good = [line for line in lines if line.error is None]
        new = 0
        for start in range(0, len(good), INGEST_BATCH_SIZE):
            new += self._ingest_batch(label, good[start : start + INGEST_BATCH_SIZE], rejected)
        return new, sorted(rejected, key=lambda item: item[0].offset)

    def _ingest_batch(self, label: str, good: list[EventLine], rejected: list[tuple[EventLine, str]]) -> int:
        """Store one batch's events in one transaction; how many were new. When the store refuses one of them (an
        event of the right shape it still cannot keep), the transaction is lost with it: each event is then stored
        alone and only the refused ones go to ``rejected``. The batch is one transaction, not several of the
        store's: had a first one committed before a later one was refused, storing its events again alone would
        find them stored, and count them as not new."""
        events = [SourcedEvent(line.event, line.where(label), checked=True) for line in good]
        try:
            return self.store.ingest(events, batch_size=len(events)).new
        except InvalidEventError:
            pass
        new = 0
        for line, event in zip(good, events, strict=True):
            try:
                new += self.store.ingest([event]).new
            except InvalidEventError as error:
                reason = str(error)  # the store names the event's source first: the rejected line has its own
                rejected.append((line, reason.removeprefix(f"{event.source}: ")))
        return new

    def _save(
        self,
        label: str,
        key: str,
        read_bytes: int,
        digest: str,
        read_lines: int | None,
        rejected: list[tuple[EventLine, str]],
    ) -> None:
        """The cursor and the rejected lines, in one transaction: a line is rejected once however often it is read."""
        now = datetime.now(UTC).isoformat()
        with self.store.engine.begin() as conn:
            for line, reason in rejected:
                kept = conn.execute(
                    self.store.statements["insert_rejected_line"],
                    {
                        "path": key,
                        "byte_offset": line.offset,
                        "line_sha256": hashlib.sha256(line.raw).hexdigest(),
                        "line_number": line.number,
                        "length": len(line.raw),
                        "content": line.raw[:REJECTED_CONTENT_BYTES],
                        "error": reason,
                        "rejected_at": now,
                    },
                ).first()
                if kept is not None:
                    log.warning(
                        "%s: not stored: %s; the line is kept in the store's rejected lines (`lineage rejected`), "
                        "and the follower went on past it",
                        line.where(label),
                        reason,
                    )
            conn.execute(
                self.store.statements["upsert_file_cursor"],
                {"path": key, "read_bytes": read_bytes, "head_sha256": digest, "read_lines": read_lines},
            )


def rejected_lines(store: LineageStore, limit: int | None = None) -> list[dict]:
    """The lines the follower could not store, newest first: file, line (or byte offset), why, and the line."""
    table = rejected_lines_table
    query = select(table).order_by(table.c.rejected_at.desc(), table.c.path, table.c.byte_offset)
    if limit is not None:
        query = query.limit(limit)
    with store.engine.connect() as conn:
        return [
            {
                "path": row.path,
                "line": row.line_number,
                "byteOffset": row.byte_offset,
                "length": row.length,
                "error": row.error,
                "rejectedAt": row.rejected_at,
                "content": row.content.decode("utf-8", errors="replace"),
                "truncated": row.length > len(row.content),
            }
            for row in conn.execute(query)
        ]
