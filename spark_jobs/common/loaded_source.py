"""Recognise a month that is already loaded from the very same file, before any Spark session starts.

Every commit a taxi job makes for one month carries, in its Iceberg snapshot summary, the month and the identity of
what it was made from (``source_identity``: the landed file's xxhash64, the loading code's digest, Spark's version).
A forced re-ingest of an unchanged file then reads the tables' histories through pyiceberg (a few catalog calls,
no JVM session) and, when every table it would write already holds exactly that month from that source, writes
nothing: a re-load costs about what launching the job does, not a second load of the file.

The rule (``month_identity``) walks a table's current history from its newest snapshot back:

- a commit tagged with another month passes (the jobs write one month's rows per commit: a month's partition);
- the first commit tagged with this month decides: its identity is the month's;
- any commit without a tag ends the walk unanswered (a user's ``DELETE``, a compaction, the row-id migration,
  an expired history): the job then loads as usual.

Because the walk starts at the table's current snapshot, a rolled-back table (``lineage rollback``) or a branch
published later (write-audit-publish) is judged by the history it has now, never by a record kept elsewhere.

A load that commits to two tables is recognised only once it has made its last commit (``load_completed``). The
taxi load writes raw (on its audit branch), removes the month's repeated rows, and only then writes the quarantine,
whose commit names raw's commit it completes (``COMPLETES_SNAPSHOT``); the audit's publish then moves raw's main to
that commit. A load stopped before publishing leaves raw's main as it was; one that wrote straight into main and was
stopped in between (killed, out of memory, a lost node) leaves raw tagged with the month's identity but no
quarantine commit naming it. Either way its retry loads the month again instead of taking a half-done one (repeated
rows not yet removed) for a loaded month.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

SOURCE_MONTH = "lakehouse.source-month"
SOURCE_IDENTITY = "lakehouse.source-identity"
# On a load's last commit: the snapshot of the first table that this commit completes (load_completed).
COMPLETES_SNAPSHOT = "lakehouse.completes-snapshot-id"
# Iceberg copies session properties with this prefix into the summary of every commit the session makes
# (SparkSQLProperties.SNAPSHOT_PROPERTY_PREFIX, Iceberg >= 1.11 on Spark 4.1), row-level commands included.
SESSION_SNAPSHOT_PROPERTY = "spark.sql.iceberg.snapshot-property."


def source_identity(fingerprint: str, *modules) -> str:
    """What a month's rows are a function of: the file (its xxhash64) and the code that turns it into rows (the
    source text of ``modules``, and Spark's version, whose functions compute the row ids)."""
    import pyspark

    code = hashlib.sha256()
    for module in modules:
        code.update(inspect.getsource(module).encode())
    return f"xxhash64:{fingerprint} code:{code.hexdigest()[:16]} spark:{pyspark.__version__}"


def month_identity(summaries_newest_first: Iterable[Mapping[str, str]], month: str) -> str | None:
    """The source identity the table's current state holds ``month`` from, or None when its history cannot say."""
    deciding = month_commit(((None, summary) for summary in summaries_newest_first), month)
    return None if deciding is None else deciding[1].get(SOURCE_IDENTITY)


def month_commit(
    snapshots_newest_first: Iterable[tuple[int | None, Mapping[str, str]]], month: str
) -> tuple[int | None, Mapping[str, str]] | None:
    """(snapshot id, summary) of the commit that decides ``month_identity``: the newest commit tagged with
    ``month``, reached before any untagged one; None when there is none."""
    for snapshot_id, summary in snapshots_newest_first:
        tagged = summary.get(SOURCE_MONTH)
        if tagged is None:
            return None
        if tagged == month:
            return snapshot_id, summary
    return None


@dataclass(frozen=True)
class MonthState:
    """One table's main branch as the rule sees it, read in one catalog call."""

    identity: str | None  # ``month_identity`` of its history; None: cannot tell, or no such table
    snapshot_id: int | None  # its current snapshot
    month_snapshot_id: int | None = None  # the commit that decided ``identity``
    month_summary: Mapping[str, str] | None = None  # that commit's summary


def load_completed(first: MonthState, last: MonthState, identity: str) -> bool:
    """Whether a load of two tables made every commit from ``identity``: both hold the month from it, and the second
    table's deciding commit names the first's deciding commit as the one it completes (``COMPLETES_SNAPSHOT``)."""
    if first.identity != identity or last.identity != identity or first.month_snapshot_id is None:
        return False
    return (last.month_summary or {}).get(COMPLETES_SNAPSHOT) == str(first.month_snapshot_id)


def month_state(catalog, table_key: str, month: str) -> MonthState:
    """The table's ``MonthState`` for ``month``, read through pyiceberg."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.table.snapshots import ancestors_of

    from include.core import settings

    try:
        table = catalog.load_table(f"{settings.ICEBERG_NAMESPACE}.{table_key}")
    except NoSuchTableError:
        return MonthState(None, None)
    current = table.current_snapshot()
    if current is None:
        return MonthState(None, None)
    history = ((snapshot.snapshot_id, snapshot.summary or {}) for snapshot in ancestors_of(current, table.metadata))
    deciding = month_commit(history, month)
    if deciding is None:
        return MonthState(None, current.snapshot_id)
    snapshot_id, summary = deciding
    return MonthState(summary.get(SOURCE_IDENTITY), current.snapshot_id, snapshot_id, summary)


@contextlib.contextmanager
def tagged_commits(spark, month: str, identity: str, completes_snapshot: int | None = None) -> Iterator[None]:
    """Every commit the session makes inside the block is tagged with ``month`` and ``identity`` (and, for a load's
    last commit, the snapshot it completes); only for writes that change that month's rows alone."""
    keys = {SOURCE_MONTH: month, SOURCE_IDENTITY: identity}
    if completes_snapshot is not None:
        keys[COMPLETES_SNAPSHOT] = str(completes_snapshot)
    for key, value in keys.items():
        spark.conf.set(SESSION_SNAPSHOT_PROPERTY + key, value)
    try:
        yield
    finally:
        for key in keys:
            spark.conf.unset(SESSION_SNAPSHOT_PROPERTY + key)
