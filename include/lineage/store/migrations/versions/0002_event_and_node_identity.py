"""An event is identified by its content; a node by (kind, namespace, name).

- ``lineage_events.dedup_key``: was ``<runId>|<eventType>|<eventTime>``, which silently dropped a second, different
  event of a run with the same type and time; now ``sha256:`` + the SHA-256 of the event's canonical JSON (keys sorted,
  ``(",", ":")`` separators, non-ASCII kept), recomputed here from each stored ``payload`` so that ingesting the same
  files again stays idempotent.
- ``lineage_nodes``: ``key`` (``dataset:<namespace>:<name>``) is no longer unique (two datasets may share it:
  ``pg://h:5432`` + ``db.t`` and ``pg://h`` + ``5432:db.t``), only indexed; ``(kind, namespace, name)`` is unique.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24

Written out by hand, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import hashlib
import json

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_SQLITE_KEY_CONSTRAINT = {"uq": "uq_%(table_name)s_%(column_0_name)s"}  # names 0001's unnamed UNIQUE (key) in batch


def _content_key(payload: str) -> str:
    canonical = json.dumps(json.loads(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _old_key(run_id: str | None, event_type: str | None, event_time: str, payload: str) -> str:
    if run_id:
        return f"{run_id}|{event_type or ''}|{event_time}"
    event = json.loads(payload)
    return "sha256:" + hashlib.sha256(json.dumps(event, sort_keys=True, default=str).encode()).hexdigest()


def _rekey(conn, key_of) -> None:
    """Give every event the key ``key_of(row)``; of events that get the same key the first keeps it and later ones
    get ``<key>|<id>`` (upgrading, that cannot happen: equal content had equal old keys)."""
    rows = conn.execute(
        sa.text("SELECT id, run_id, event_type, event_time, payload FROM lineage_events ORDER BY id")
    ).all()
    seen: set[str] = set()
    keys = []
    for row in rows:
        key = key_of(row)
        keys.append({"p_id": row.id, "p_key": f"{key}|{row.id}" if key in seen else key})
        seen.add(key)
    # Through a key no event has, so that no two rows hold one key in between (the column is unique).
    conn.execute(sa.text("UPDATE lineage_events SET dedup_key = 'migrating:' || id"))
    if keys:
        conn.execute(sa.text("UPDATE lineage_events SET dedup_key = :p_key WHERE id = :p_id"), keys)


def _key_constraint(conn) -> str:
    return "uq_lineage_nodes_key" if conn.dialect.name == "sqlite" else "lineage_nodes_key_key"


def upgrade() -> None:
    conn = op.get_bind()
    _rekey(conn, lambda row: _content_key(row.payload))
    with op.batch_alter_table("lineage_nodes", naming_convention=_SQLITE_KEY_CONSTRAINT) as batch_op:
        batch_op.drop_constraint(_key_constraint(conn), type_="unique")
        batch_op.create_unique_constraint("uq_lineage_nodes_kind_namespace_name", ["kind", "namespace", "name"])
        batch_op.create_index("ix_lineage_nodes_key", ["key"], unique=False)


def downgrade() -> None:
    conn = op.get_bind()
    shared = conn.execute(sa.text("SELECT key FROM lineage_nodes GROUP BY key HAVING count(*) > 1 LIMIT 5")).scalars()
    shared = list(shared)
    if shared:
        raise RuntimeError(f"cannot downgrade below 0002: several nodes share the node id(s) {shared}")
    with op.batch_alter_table("lineage_nodes", naming_convention=_SQLITE_KEY_CONSTRAINT) as batch_op:
        batch_op.drop_index("ix_lineage_nodes_key")
        batch_op.drop_constraint("uq_lineage_nodes_kind_namespace_name", type_="unique")
        batch_op.create_unique_constraint(_key_constraint(conn), ["key"])
    _rekey(conn, lambda row: _old_key(row.run_id, row.event_type, row.event_time, row.payload))
