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

A load that commits to two tables is recognised only once it has made every commit (``load_completed``). Every
commit of one taxi load carries the load's id (``LOAD_ID``), and the month counts as loaded only when raw's deciding
commit on ``main`` and the quarantine's carry the same one. The load writes raw on its audit branch (append or MERGE,
then the removal of the month's repeated rows) while it replaces the quarantine beside it; only the audit's publish,
after both, moves raw's ``main`` to the branch. A load stopped before publishing, or blocked, leaves raw's ``main``
holding an earlier load's id, so its retry loads the month again instead of taking a half-done one for a loaded
month. (A load straight into ``main``, the bench's measure without write-audit-publish, writes the quarantine last
for the same reason.) A re-load that finds raw's month already holding exactly its rows writes no raw commit: its
quarantine carries the load id of raw's commit it completes.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

SOURCE_MONTH = "lakehouse.source-month"
SOURCE_IDENTITY = "lakehouse.source-identity"
# The load that made the commit: the same on every commit of one load, whichever table (load_completed).
LOAD_ID = "lakehouse.load-id"
# Iceberg copies session properties with this prefix into the summary of every commit the session makes
# (SparkSQLProperties.SNAPSHOT_PROPERTY_PREFIX, Iceberg >= 1.11 on Spark 4.1), row-level commands included.
SESSION_SNAPSHOT_PROPERTY = "spark.sql.iceberg.snapshot-property."
# The same for one DataFrame write's commit (SparkWriteOptions.SNAPSHOT_PROPERTY_PREFIX).
WRITE_SNAPSHOT_PROPERTY = "snapshot-property."


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
    """Whether one load of two tables made every commit from ``identity``: both hold the month from it, and both
    deciding commits carry the same ``LOAD_ID``."""
    if first.identity != identity or last.identity != identity:
        return False
    load = month_load_id(first)
    return load is not None and month_load_id(last) == load


def month_load_id(state: MonthState) -> str | None:
    """The ``LOAD_ID`` of the commit that decided ``state``'s month (None: untagged, or no such commit)."""
    return (state.month_summary or {}).get(LOAD_ID)


def new_load_id() -> str:
    return uuid.uuid4().hex


def commit_tags(month: str, identity: str, load_id: str | None) -> dict[str, str]:
    """The snapshot-summary tags of a load's commits (``load_id`` None: a commit no load may be completed by)."""
    tags = {SOURCE_MONTH: month, SOURCE_IDENTITY: identity}
    if load_id is not None:
        tags[LOAD_ID] = load_id
    return tags


def tagged_write(writer, tags: Mapping[str, str]):
    """``writer`` (a ``DataFrameWriterV2``) whose commit carries ``tags``, as write options: unlike
    ``tagged_commits``, safe while another thread of the session commits to another table."""
    for key, value in tags.items():
        writer = writer.option(f"{WRITE_SNAPSHOT_PROPERTY}{key}", value)
    return writer


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
def tagged_commits(spark, tags: Mapping[str, str]) -> Iterator[None]:
    """Every commit the session makes inside the block carries ``tags`` (``commit_tags``), row-level commands (MERGE)
    included; only for writes that change that month's rows alone. Session-wide: a write committing in another
    thread meanwhile is tagged too (``tagged_write`` is not)."""
    keys = dict(tags)
    for key, value in keys.items():
        spark.conf.set(SESSION_SNAPSHOT_PROPERTY + key, value)
    try:
        yield
    finally:
        for key in keys:
            spark.conf.unset(SESSION_SNAPSHOT_PROPERTY + key)
