"""What the store was given and did not keep, in one list, and its replay (``lineage rejected [--replay]``).

Two kinds: lines of the event files the follower set aside (``store/follower.py``: not JSON, not an event, refused by
the store) and posts ``lineage serve`` refused (dead letters, ``store/dead_letters.py``: a body not JSON or over a
limit, an event refused as Marquez refuses it). A replay admits each again with today's rules
(:func:`include.lineage.api.intake.admit`, what ``lineage serve`` runs): after an upgrade that takes what was refused,
or with an operator's edit (``--replay ID --file FIXED.json``: the fixed event stands for the letter). What is stored
leaves the waiting list (a dead letter is marked replayed, a file line is removed); what is still refused stays, with
the new reason.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field

from sqlalchemy import delete

from include.lineage.api.intake import Admitted, Refused, admit
from include.lineage.errors import InvalidEventError
from include.lineage.store import LineageStore, dead_letters
from include.lineage.store.follower import rejected_lines
from include.lineage.store.schema import rejected_lines_table


@dataclass
class ReplayReport:
    stored: list[str] = field(default_factory=list)  # what was stored, each "dead letter 3: 1 new"
    refused: list[str] = field(default_factory=list)  # what is still refused, with why
    skipped: list[str] = field(default_factory=list)  # what cannot be replayed (kept only in part)

    def line(self) -> str:
        return (
            f"lineage rejected --replay: {len(self.stored)} stored, {len(self.refused)} still refused, "
            f"{len(self.skipped)} kept only in part"
        )


def listing(store: LineageStore, limit: int | None = None) -> list[dict]:
    """File lines set aside (``kind: line``), then posts refused (``kind: post``), each newest first."""
    lines = [{"kind": "line", **item} for item in rejected_lines(store, limit)]
    posts = [
        {"kind": "post", **{k: v for k, v in item.items() if k != "bytes"}}
        for item in dead_letters.letters(store, limit)
    ]
    return lines + posts


def _events_of(content: bytes) -> list:
    """The events of a kept body (gzip still compressed when it could not be read then)."""
    if content[:2] == b"\x1f\x8b":
        content = gzip.decompress(content)
    data = json.loads(content) if content.strip() else None
    return data if isinstance(data, list) else [data]


def _store(store: LineageStore, events: list, source: str) -> tuple[bool, str]:
    """Admit and store ``events`` (all or none): (stored, what happened)."""
    verdicts = [admit(event) for event in events]
    refused = [(index, verdict) for index, verdict in enumerate(verdicts) if isinstance(verdict, Refused)]
    if refused:
        index, verdict = refused[0]
        where = f"event {index}: " if len(events) > 1 else ""
        return False, f"still refused ({verdict.status}): {where}{verdict.message()}"
    admitted: list[Admitted] = verdicts  # type: ignore[assignment]
    try:
        result = store.ingest([item.sourced(source) for item in admitted])
    except InvalidEventError as error:
        return False, f"still refused: {error}"
    problems = sum(len(item.problems) for item in admitted)
    named = f", {problems} problem(s) named" if problems else ""
    return True, f"stored: {result.read} read, {result.new} new{named}"


def replay(store: LineageStore, ids: list[int] | None = None, fixed: bytes | None = None) -> ReplayReport:
    """Replay the dead letters waiting (or those of ``ids``; ``fixed``: the operator's edit of the one given), then,
    without ``ids``, the file lines set aside."""
    report = ReplayReport()
    letters = (
        [item for item in map(lambda i: dead_letters.letter(store, i), ids) if item is not None]
        if ids
        else dead_letters.letters(store, waiting_only=True)
    )
    for item in reversed(letters):  # oldest first
        label = f"dead letter {item['id']}"
        if fixed is None and not item["whole"]:
            report.skipped.append(f"{label}: only its first bytes were kept ({item['reason']}); send it again")
            continue
        try:
            events = _events_of(fixed if fixed is not None else item["bytes"])
        except (ValueError, OSError, EOFError) as error:
            outcome, stored = f"still refused: not JSON ({error})", False
        else:
            stored, outcome = _store(store, events, f"{label} (replayed{', edited' if fixed is not None else ''})")
        dead_letters.record_replay(store, item["id"], outcome, stored)
        (report.stored if stored else report.refused).append(f"{label}: {outcome}")
    if not ids:
        _replay_lines(store, report)
    return report


def _replay_lines(store: LineageStore, report: ReplayReport) -> None:
    table = rejected_lines_table
    for item in reversed(rejected_lines(store)):
        where = f"{item['path']}:{item['line'] if item['line'] is not None else 'byte ' + str(item['byteOffset'])}"
        if item["truncated"] or item["error"].startswith("not UTF-8"):
            report.skipped.append(f"{where}: not kept as it was written ({item['error'][:60]}); fix the file's line")
            continue
        try:
            events = _events_of(item["content"].encode())
        except (ValueError, OSError, EOFError) as error:
            report.refused.append(f"{where}: still not JSON ({error})")
            continue
        stored, outcome = _store(store, events, where)
        if not stored:
            report.refused.append(f"{where}: {outcome}")
            continue
        with store.engine.begin() as conn:
            conn.execute(delete(table).where(table.c.path == item["path"], table.c.byte_offset == item["byteOffset"]))
        report.stored.append(f"{where}: {outcome}")
