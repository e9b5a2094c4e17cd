"""Dead letters: what ``lineage serve`` refused, kept with why, so that a refused event is not a lost one.

A body that is not JSON, not gzip, nested too deep, or an event refused as Marquez refuses it (or past a limit of
the server) is kept in ``lineage_dead_letters`` with its reason, the status answered, the endpoint, the client and
when: ``lineage rejected`` lists them, ``lineage rejected --replay`` stores what the server takes now (after an
upgrade) and ``--replay ID --file FIXED.json`` an operator's edit. The same content again is one row (its SHA-256),
counted. A body refused for its size (a gzip bomb, a body past ``LINEAGE_MAX_BODY_BYTES``) is not kept whole: at most
its first ``PREVIEW_BYTES`` (``lineage serve`` keeps none of them) and its size are, with the reason. The table is bounded: at most ``LINEAGE_DEAD_LETTERS``
rows and ``LINEAGE_DEAD_LETTERS_BYTES`` of content, the oldest going first.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from include.core import settings
from include.lineage.store.schema import dead_letters_table
from include.lineage.store.store import LineageStore

PREVIEW_BYTES = 4096  # what is kept of a body refused for its size


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def keep(
    store: LineageStore,
    content: bytes,
    reason: str,
    status: int,
    endpoint: str,
    client: str | None = None,
    length: int | None = None,
    whole: bool = True,
) -> int:
    """Keep one refused body or event; its row id. ``whole`` False: ``content`` is only the start of a body of
    ``length`` bytes (refused for its size), and only its first ``PREVIEW_BYTES`` are kept."""
    kept = content if whole else content[:PREVIEW_BYTES]
    length = len(content) if length is None else length
    digest = hashlib.sha256(kept + (b"" if whole else f"\0{length}".encode())).hexdigest()
    table, now = dead_letters_table, _now()
    with store.engine.begin() as conn:
        row = conn.execute(select(table.c.id).where(table.c.sha256 == digest)).first()
        if row is None:
            try:
                with conn.begin_nested():
                    row_id = conn.execute(
                        table.insert().values(
                            sha256=digest,
                            received_at=now,
                            last_received_at=now,
                            times=1,
                            endpoint=endpoint[:64],
                            status=status,
                            reason=reason,
                            client=(client or "")[:255] or None,
                            length=length,
                            content=kept,
                        )
                    ).inserted_primary_key[0]
            except IntegrityError:  # another request kept the same content meanwhile
                row = conn.execute(select(table.c.id).where(table.c.sha256 == digest)).one()
        if row is not None:
            row_id = row.id
            conn.execute(
                update(table)
                .where(table.c.id == row_id)
                .values(times=table.c.times + 1, last_received_at=now, reason=reason, status=status)
            )
        _evict(conn)
    return row_id


def _evict(conn) -> None:
    """Drop the oldest letters past ``LINEAGE_DEAD_LETTERS`` rows or ``LINEAGE_DEAD_LETTERS_BYTES`` of content."""
    table = dead_letters_table
    most, most_bytes = settings.LINEAGE_DEAD_LETTERS.integer(), settings.LINEAGE_DEAD_LETTERS_BYTES.integer()
    count, size = conn.execute(select(func.count(), func.coalesce(func.sum(func.length(table.c.content)), 0))).one()
    if count <= most and size <= most_bytes:
        return
    kept_rows, kept_bytes, cut = 0, 0, None
    for row_id, row_bytes in conn.execute(select(table.c.id, func.length(table.c.content)).order_by(table.c.id.desc())):
        if kept_rows + 1 > most or kept_bytes + row_bytes > most_bytes:
            cut = row_id
            break
        kept_rows, kept_bytes = kept_rows + 1, kept_bytes + row_bytes
    if cut is not None:
        conn.execute(table.delete().where(table.c.id <= cut))


def letters(store: LineageStore, limit: int | None = None, waiting_only: bool = False) -> list[dict]:
    """The dead letters, newest first: id, when, endpoint, status, reason, client, size, whether the body is kept
    whole, how often it came, its replay, and the content as text (bad bytes replaced)."""
    table = dead_letters_table
    query = select(table).order_by(table.c.id.desc())
    if waiting_only:
        query = query.where(table.c.replayed_at.is_(None))
    if limit is not None:
        query = query.limit(limit)
    with store.engine.connect() as conn:
        return [_as_json(row) for row in conn.execute(query)]


def letter(store: LineageStore, letter_id: int) -> dict | None:
    with store.engine.connect() as conn:
        row = conn.execute(select(dead_letters_table).where(dead_letters_table.c.id == letter_id)).first()
    return _as_json(row) if row is not None else None


def _as_json(row) -> dict:
    return {
        "id": row.id,
        "receivedAt": row.received_at,
        "lastReceivedAt": row.last_received_at,
        "times": row.times,
        "endpoint": row.endpoint,
        "status": row.status,
        "reason": row.reason,
        "client": row.client,
        "length": row.length,
        "whole": row.length == len(row.content),
        "replayedAt": row.replayed_at,
        "replayOutcome": row.replay_outcome,
        "content": row.content.decode("utf-8", errors="replace"),
        "bytes": row.content,
    }


def record_replay(store: LineageStore, letter_id: int, outcome: str, stored: bool) -> None:
    """What a replay of the letter gave: ``stored`` marks it replayed (it leaves the waiting list)."""
    values = {"replay_outcome": outcome}
    if stored:
        values["replayed_at"] = _now()
    with store.engine.begin() as conn:
        conn.execute(update(dead_letters_table).where(dead_letters_table.c.id == letter_id).values(**values))


def waiting(store: LineageStore) -> int:
    """How many dead letters were not replayed (``GET /api/v1/health``'s ``deadLetters``)."""
    table = dead_letters_table
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).where(table.c.replayed_at.is_(None))).scalar_one()
