"""Recognise a month that is already loaded from the very same file, before any Spark session starts.

Every commit a taxi job makes for one month carries, in its Iceberg snapshot summary, the month and the identity of
what it was made from (``source_identity``: the landed file's xxhash64, the staging code's digest, Spark's version).
A forced re-ingest of an unchanged file then reads the tables' histories through pyiceberg (a few catalog calls,
no JVM session) and, when every table it would write already holds exactly that month from that source, writes
nothing: a re-load costs about what launching the job does, not a second staging of the file.

The rule (``month_identity``) walks a table's current history from its newest snapshot back:

- a commit tagged with another month passes (the jobs write one month's rows per commit: a month's partition);
- the first commit tagged with this month decides: its identity is the month's;
- any commit without a tag ends the walk unanswered (a user's ``DELETE``, a compaction, the row-id migration,
  an expired history): the job then loads as usual.

Because the walk starts at the table's current snapshot, a rolled-back table (``lineage rollback``) or a branch
published later (write-audit-publish) is judged by the history it has now, never by a record kept elsewhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

SOURCE_MONTH = "lakehouse.source-month"
SOURCE_IDENTITY = "lakehouse.source-identity"
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
    for summary in summaries_newest_first:
        tagged = summary.get(SOURCE_MONTH)
        if tagged is None:
            return None
        if tagged == month:
            return summary.get(SOURCE_IDENTITY)
    return None


@dataclass(frozen=True)
class MonthState:
    """One table's main branch as the rule sees it, read in one catalog call."""

    identity: str | None  # ``month_identity`` of its history; None: cannot tell, or no such table
    snapshot_id: int | None  # its current snapshot


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
    history = (snapshot.summary or {} for snapshot in ancestors_of(current, table.metadata))
    return MonthState(month_identity(history, month), current.snapshot_id)


@contextlib.contextmanager
def tagged_commits(spark, month: str, identity: str) -> Iterator[None]:
    """Every commit the session makes inside the block is tagged with ``month`` and ``identity``; only for writes
    that change that month's rows alone."""
    keys = {SOURCE_MONTH: month, SOURCE_IDENTITY: identity}
    for key, value in keys.items():
        spark.conf.set(SESSION_SNAPSHOT_PROPERTY + key, value)
    try:
        yield
    finally:
        for key in keys:
            spark.conf.unset(SESSION_SNAPSHOT_PROPERTY + key)
