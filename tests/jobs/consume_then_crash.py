"""``lineage consume`` that dies by SIGKILL right after its first batch is stored, before the batch's offsets are
committed: the crash the at-least-once test needs, kept out of the product (``consume(after_store=...)``)."""

from __future__ import annotations

import os
import signal
import sys

from include.lineage.consume import consume
from include.lineage.store import LineageStore


def main(bootstrap: str, store_url: str, topic: str, dead_letter_topic: str) -> None:
    with LineageStore(store_url) as store:
        consume(
            store,
            bootstrap,
            topic=topic,
            dead_letter_topic=dead_letter_topic,
            idle_timeout=20,
            after_store=lambda: os.kill(os.getpid(), signal.SIGKILL),
        )


if __name__ == "__main__":
    main(*sys.argv[1:5])
