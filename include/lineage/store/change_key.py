"""What tells a reader that the stored events are the ones it has seen plus newer ones, without counting them.

Marquez's kept model (``queries/model.py``) and the page's kept audits (``api/audits.py``) are each of the events
stored when they were read. They were keyed by ``count(*)`` and ``max(id)`` of ``lineage_events``, asked before each
answer, and a count reads the whole table or index: 13.5 ms of an 18 ms walk on a store of 244,802 events, growing
with every event. The key is now the newest id (one index lookup) and ``lineage_store_state.events_deleted``, which
whatever deletes events moves in the same transaction (``lineage prune``: ``note_events_deleted``). That suffices
because writers are serialised (``LineageStore.serialize_writers``): a transaction's event ids are all above those of
every transaction committed before it, so no event appears under an id below one already seen, and an id is only
ever reused (SQLite) after a deletion, which moves the counter.

Deleting events by hand, outside ``lineage prune``, is not seen by a running ``lineage serve`` until it restarts.
"""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection

from include.lineage.store.schema import events_table, store_state_table

EventsKey = tuple[int | None, int]  # (the newest event id, how many times events were deleted)


def events_key(conn: Connection) -> EventsKey:
    newest = conn.execute(select(func.max(events_table.c.id))).scalar()
    deleted = conn.execute(select(store_state_table.c.events_deleted)).scalar()
    return newest, deleted or 0


def note_events_deleted(conn: Connection) -> None:
    """In the transaction that deletes events: every kept reading of the events is read again."""
    conn.execute(update(store_state_table).values(events_deleted=store_state_table.c.events_deleted + 1))
