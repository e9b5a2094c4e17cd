"""Write-audit-publish on Iceberg branches, as every writer of a published table does it.

1. ``open_branch``: a branch of the table at ``main``'s snapshot (``ALTER TABLE ... CREATE BRANCH``; on a table
   without a snapshot Iceberg creates an empty one for the branch), and the session's ``spark.wap.branch`` set to it.
   With the table property ``write.wap.enabled=true``, Iceberg then sends this session's writes of the table to the
   branch and its reads to the branch too once it exists (``SparkTableUtil.determineWriteBranch`` /
   ``determineReadBranch``): the job's own code (MERGE, append, checks) runs unchanged, and ``main`` does not move.
2. The job measures the branch's snapshot; ``include/quality/expectations.py`` judges it.
3. ``publish``: ``CALL <catalog>.system.fast_forward(table, 'main', branch)``: ``main`` takes the branch's snapshot in
   one metadata commit, and only when ``main`` is an ancestor of the branch (Iceberg's ``replaceBranch(..., true)``:
   ``Cannot fast-forward: main is not an ancestor of <branch>``), so a commit on ``main`` after the branch was made
   fails it cleanly instead of being overwritten. The branch is then dropped. A blocked branch is kept for review
   (``pipeline publish`` / ``pipeline discard``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from include.core import settings
from spark_jobs.common import tables
from spark_jobs.common.tables import qualified, set_table_property, table_property

WAP_PROPERTY = "write.wap.enabled"
WAP_BRANCH_CONF = "spark.wap.branch"
_BRANCH_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,99}$")


def branch_name(purpose: str, month: str | None = None, now: datetime | None = None) -> str:
    """``audit_<purpose>_<YYYYMM>_<UTC time to the microsecond>``: unique per run, readable, a valid identifier."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%f")
    parts = ["audit", purpose, *([month.replace("-", "")] if month else []), stamp]
    return "_".join(parts)


def check_branch_name(branch: str) -> str:
    if not _BRANCH_NAME.match(branch or "") or branch == "main":
        raise ValueError(f"{branch!r} is not an audit branch name (letters, digits and _, not 'main')")
    return branch


def enable(spark, table: str) -> None:
    if table_property(spark, table, WAP_PROPERTY) != "true":
        set_table_property(spark, table, WAP_PROPERTY, "true")


def open_branch(spark, table: str, branch: str) -> None:
    """Create ``branch`` at ``main`` and send this session's reads and writes of ``table`` to it."""
    check_branch_name(branch)
    enable(spark, table)
    spark.sql(f"ALTER TABLE {qualified(table)} CREATE BRANCH `{branch}`")
    spark.conf.set(WAP_BRANCH_CONF, branch)


def refresh(spark, table: str) -> None:
    """Drop the session's cached metadata of ``table`` (Iceberg's CachingCatalog): the next read or procedure sees
    the branch as the last commit left it. Without it, after the first write into a table that had no snapshot, the
    session read the branch at its empty snapshot (found by the bench: an audit of 0 rows), and a fast-forward from
    stale metadata would publish that snapshot."""
    spark.catalog.refreshTable(qualified(table))


def close_session_branch(spark) -> None:
    """Reads and writes of the session go to ``main`` again."""
    spark.conf.unset(WAP_BRANCH_CONF)


def ref_snapshot_id(spark, table: str, ref: str) -> int | None:
    return tables.ref_snapshot_id(spark, table, check_ref(ref))


def check_ref(ref: str) -> str:
    return ref if ref == "main" else check_branch_name(ref)


def branches(spark, table: str) -> dict[str, int]:
    """Audit branches of the table and their snapshots."""
    refs = tables.java_table(spark, table, refresh=True).refs()
    return {str(name): int(ref.snapshotId()) for name, ref in refs.items() if ref.isBranch() and str(name) != "main"}


def publish(spark, table: str, branch: str, drop: bool = True) -> int:
    """Fast-forward ``main`` to ``branch`` (one atomic commit), then drop the branch; returns main's new snapshot.
    Raises Spark's error, unchanged, when main is not an ancestor of the branch (it moved since)."""
    check_branch_name(branch)
    close_session_branch(spark)
    refresh(spark, table)
    catalog = settings.CatalogSettings.current().name
    # The identifier with its catalog: Spark3Util would first look for a catalog named after the namespace. Spark 4
    # runs a procedure while it analyses the CALL (InvokeProcedures), so spark.sql() alone publishes, and its result
    # is not read: reading it is a SQL execution of a millisecond whose START the OpenLineage listener missed in 7 %
    # of loads (Trap 36). Main's snapshot comes from the table's metadata instead.
    spark.sql(f"CALL {catalog}.system.fast_forward('{qualified(table)}', 'main', '{branch}')")
    if drop:
        discard(spark, table, branch)
    return ref_snapshot_id(spark, table, "main")


def discard(spark, table: str, branch: str) -> None:
    check_branch_name(branch)
    spark.sql(f"ALTER TABLE {qualified(table)} DROP BRANCH IF EXISTS `{branch}`")


def blocked_message(audit: dict) -> str:
    """The error of a blocked publish: the table, main's snapshot, the kept branch, what to do, each failure."""
    table, branch = audit["table"], audit["branch"]
    return (
        f"{table}: publish blocked, main left at snapshot {audit['main_snapshot_id']}; the data is kept on branch "
        f"{branch} (snapshot {audit['branch_snapshot_id']}) for review: `pipeline publish --table {table} --branch "
        f'{branch} --reason "..."` or `pipeline discard --table {table} --branch {branch}`. '
        f"{len(audit['blocking'])} blocking expectation(s) failed: " + "; ".join(audit["blocking"])
    )


def publish_or_block(spark, table: str, branch: str, main_before: int | None, verdict: dict) -> dict:
    """Publish ``branch`` when no blocking expectation failed, else keep it; the job report's ``audit`` section."""
    refresh(spark, table)
    branch_snapshot = ref_snapshot_id(spark, table, branch)
    close_session_branch(spark)
    audit = {
        **verdict,
        "branch": branch,
        "main_snapshot_id": main_before,
        "branch_snapshot_id": branch_snapshot,
        "published": False,
    }
    if verdict["blocking"]:
        return audit
    audit["main_snapshot_id"] = publish(spark, table, branch)
    audit["published"] = True
    return audit
