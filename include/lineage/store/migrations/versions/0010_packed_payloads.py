"""``lineage_events.packed``: an event's text as a zstd frame packed with a dictionary the store trains from its own
events, kept in the new ``lineage_payload_dictionaries`` (store/packing.py): the raw events were 61 % of a
PostgreSQL store and 82 % of a SQLite one. Rows stored before keep their text in ``payload`` and are read from there
(packing them here would rewrite every stored event inside the migration); a packed row's ``payload`` is "".

Downgrade unpacks every packed row back into ``payload`` before dropping the column, so no event is lost.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28

Written out here, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import sqlalchemy as sa
import zstandard
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lineage_payload_dictionaries",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("trained_at", sa.String(length=32), nullable=False),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("lineage_events") as batch:
        batch.add_column(sa.Column("packed", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    conn = op.get_bind()
    dictionaries = {
        dictionary_id: zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(bytes(data)))
        for dictionary_id, data in conn.execute(sa.text("SELECT id, data FROM lineage_payload_dictionaries"))
    }
    plain = zstandard.ZstdDecompressor()
    last = 0
    while True:  # in chunks: a store's packed rows may not fit in memory at once
        rows = conn.execute(
            sa.text(
                "SELECT id, packed FROM lineage_events WHERE packed IS NOT NULL AND id > :last ORDER BY id LIMIT 1000"
            ),
            {"last": last},
        ).all()
        if not rows:
            break
        for event_id, packed in rows:
            dictionary_id = zstandard.get_frame_parameters(bytes(packed)).dict_id
            decompressor = dictionaries[dictionary_id] if dictionary_id else plain
            conn.execute(
                sa.text("UPDATE lineage_events SET payload = :payload WHERE id = :id"),
                {"payload": decompressor.decompress(bytes(packed)).decode("utf-8"), "id": event_id},
            )
        last = rows[-1][0]
    with op.batch_alter_table("lineage_events") as batch:
        batch.drop_column("packed")
    op.drop_table("lineage_payload_dictionaries")
