"""How the store keeps an event's text on disk: a zstd frame, compressed with a dictionary the store trains from its
own events (``lineage_payload_dictionaries``), in ``lineage_events.packed``.

Why: the raw events were 61 % of a PostgreSQL store (its TOAST compresses each JSON about 3x) and 82 % of a SQLite
one (not compressed at all): ≈ 39 GB and 85 GB for 10^7 events. One event's JSON is too short for a compressor to
find much in it alone (zstd: 5.6 kB -> 1.2 kB on the bench's generated events), but events of one platform repeat
the same keys, facet schema URLs and producers, which a dictionary trained on a sample of them holds: 5.6 kB ->
0.32 kB, 6 us to pack and 3 us to unpack an event (measured on the generated history; docs/performance.md).

The rules, each because of something that can happen:

- A frame names its dictionary (zstd writes the dictionary id into the frame header), so a reader needs no column
  to know which one; a frame packed without a dictionary says 0.
- Dictionaries are never changed nor deleted (a few tens of kB each): every packed row stays readable. A process
  packs with the newest it knows; another may have trained a newer one meanwhile, which is fine.
- The first is trained once the store holds ``FIRST_TRAINING`` events, then a new one each time it holds
  ``RETRAIN_GROWTH`` times as many as when the newest was trained: a handful per store, following the producers'
  drift (a new provider's producer URL, new facets) early in its life, when it matters most.
- Training never fails an ingest: the events are stored (packed without the new dictionary) whatever happens to it.
- A dictionary id is drawn at random and kept only if its row could be inserted: two processes training at once
  keep two dictionaries, never one id for two.
- Rows stored before migration 0010 keep their text in ``payload`` and are read from there; a packed row's
  ``payload`` is the empty string (making the column nullable would rewrite every row of a SQLite table).
"""

from __future__ import annotations

import logging
import secrets
import threading
from dataclasses import dataclass
from datetime import UTC, datetime

import zstandard
from sqlalchemy import func, insert, select
from sqlalchemy.engine import Connection, Engine

from include.lineage.errors import UnreadableStoredEventError
from include.lineage.store.schema import events_table, payload_dictionaries_table

log = logging.getLogger(__name__)

LEVEL = 3  # zstd's default: levels up to 19 saved < 5 % on events and cost 10x the time
DICTIONARY_BYTES = 32 * 1024  # 16 kB packed 2 % worse, 64 kB 3 % better: the median of the three
FIRST_TRAINING = 1_000
RETRAIN_GROWTH = 10
SAMPLE = 2_000  # the newest events trained on: 0.2 s of training
CHECK_EVERY = 1_000  # events packed by this process between two looks at the store's size
PRIVATE_IDS = range(32_768, 2**31)


@dataclass(frozen=True)
class Dictionary:
    id: int
    events: int  # the store's newest event id when it was trained
    data: zstandard.ZstdCompressionDict


class PayloadPacker:
    """Packs and unpacks one store's event texts. Thread-safe: zstd's compressors are not, so each thread has its
    own; the dictionaries are shared (immutable)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._dictionaries: dict[int, Dictionary] = {}
        self._newest: Dictionary | None = None
        self._lock = threading.Lock()
        self._local = threading.local()
        self._packed_since_check = 0
        self._loaded = False  # read at the first pack, not at open: an up-to-date store opens with one query

    # ------------------------------------------------------------------------------------------------ packing
    def pack(self, conn: Connection, text: str) -> bytes:
        """The event's text as a zstd frame, with the newest dictionary this process knows (``conn``: the ingest's,
        to read the dictionaries the first time)."""
        if not self._loaded:
            self._load_all(conn)
        self._packed_since_check += 1
        return self._compressor().compress(text.encode("utf-8"))

    def _compressor(self) -> zstandard.ZstdCompressor:
        newest = self._newest
        cached = getattr(self._local, "compressor", None)
        if cached is None or cached[0] is not newest:
            if newest is None:
                compressor = zstandard.ZstdCompressor(level=LEVEL)
            else:
                compressor = zstandard.ZstdCompressor(level=LEVEL, dict_data=newest.data)
            cached = self._local.compressor = (newest, compressor)
        return cached[1]

    # ---------------------------------------------------------------------------------------------- unpacking
    def text(self, conn: Connection, event_id: int, payload: str | None, packed: bytes | None) -> str:
        """A stored event's text: its packed frame unpacked, or its ``payload`` for a row stored before 0010."""
        if packed is None:
            return payload or ""
        try:
            packed = bytes(packed)  # PostgreSQL's bytea comes back as a memoryview
            dictionary_id = zstandard.get_frame_parameters(packed).dict_id
            decompressor = self._decompressor(conn, dictionary_id)
            return decompressor.decompress(packed).decode("utf-8")
        except (zstandard.ZstdError, UnicodeDecodeError, KeyError) as error:
            raise UnreadableStoredEventError(event_id, f"{type(error).__name__}: {error}") from error

    def _decompressor(self, conn: Connection, dictionary_id: int) -> zstandard.ZstdDecompressor:
        cache = getattr(self._local, "decompressors", None)
        if cache is None:
            cache = self._local.decompressors = {}
        decompressor = cache.get(dictionary_id)
        if decompressor is None:
            if dictionary_id == 0:
                decompressor = zstandard.ZstdDecompressor()
            else:
                if dictionary_id not in self._dictionaries:
                    self._load_all(conn)  # trained by another process since this one started
                decompressor = zstandard.ZstdDecompressor(dict_data=self._dictionaries[dictionary_id].data)
            cache[dictionary_id] = decompressor
        return decompressor

    # ----------------------------------------------------------------------------------------------- training
    def after_ingest(self) -> None:
        """Called after an ingest transaction commits: train a new dictionary when the store has grown enough. Never
        raises: a dictionary is a saving, not something an event waits for."""
        if self._packed_since_check < CHECK_EVERY:
            return
        self._packed_since_check = 0
        try:
            with self._lock:
                self._train_if_grown()
        except Exception as error:  # noqa: BLE001 - the events are stored; packing goes on without the new one
            log.warning(
                "lineage store: training a payload dictionary failed (events stay packed without it): %s", error
            )

    def _train_if_grown(self) -> None:
        with self.engine.connect() as conn:
            self._load_all(conn)
            newest_event = conn.execute(select(func.max(events_table.c.id))).scalar() or 0
            due = FIRST_TRAINING if self._newest is None else self._newest.events * RETRAIN_GROWTH
            if newest_event < due:
                return
            samples = self._samples(conn)
        if len(samples) < FIRST_TRAINING // 2:
            return  # ids are not a count: a store whose early events were pruned trains once it has enough again
        # zstd's private range (RFC 8878 reserves ids up to 32,767 and from 2^31 for registered dictionaries)
        dictionary_id = PRIVATE_IDS.start + secrets.randbelow(len(PRIVATE_IDS))
        data = zstandard.train_dictionary(DICTIONARY_BYTES, samples, dict_id=dictionary_id, level=LEVEL)
        with self.engine.begin() as conn:
            conn.execute(
                insert(payload_dictionaries_table).values(
                    id=dictionary_id,
                    trained_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                    events=newest_event,
                    samples=len(samples),
                    data=data.as_bytes(),
                )
            )
        self._remember(Dictionary(dictionary_id, newest_event, data))
        log.info("lineage store: payload dictionary %d trained on %d events", dictionary_id, len(samples))

    def _samples(self, conn: Connection) -> list[bytes]:
        e = events_table.c
        rows = conn.execute(select(e.id, e.payload, e.packed).order_by(e.id.desc()).limit(SAMPLE)).all()
        return [self.text(conn, *row).encode("utf-8") for row in rows]

    # ----------------------------------------------------------------------------------------- dictionaries
    def _load_all(self, conn: Connection) -> None:
        d = payload_dictionaries_table.c
        for dictionary_id, events, data in conn.execute(
            select(d.id, d.events, d.data).where(d.id.not_in(list(self._dictionaries) or [-1]))
        ):
            self._remember(Dictionary(dictionary_id, events, zstandard.ZstdCompressionDict(bytes(data))))
        self._loaded = True

    def _remember(self, dictionary: Dictionary) -> None:
        self._dictionaries[dictionary.id] = dictionary
        if self._newest is None or (dictionary.events, dictionary.id) > (self._newest.events, self._newest.id):
            self._newest = dictionary
