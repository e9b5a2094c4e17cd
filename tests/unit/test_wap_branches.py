"""Iceberg's write-audit-publish rules the project relies on (spark_jobs/common/wap.py), pinned on real tables of
Iceberg 1.12 on Spark 4.1 (read from Iceberg's source: SparkTableUtil.determineWriteBranch / determineReadBranch,
SnapshotManager.createBranch, UpdateSnapshotReferencesOperation.replaceBranch, FastForwardBranchProcedure)."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from spark_jobs.common import wap
from spark_jobs.common.tables import ensure_table, qualified

SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("month", T.StringType())])


@pytest.fixture
def table(spark, request):
    name = f"wap_{request.node.name[:40]}"
    spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
    ensure_table(spark, name, SCHEMA)
    yield name
    wap.close_session_branch(spark)
    spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")


def _append(spark, table: str, ids: list[int]) -> None:
    spark.createDataFrame([(i, "2025-01") for i in ids], SCHEMA).writeTo(qualified(table)).append()


def _ids(spark, table: str, ref: str | None = None) -> list[int]:
    reader = spark.read.option("branch", ref) if ref else spark.read
    return sorted(row.id for row in reader.table(qualified(table)).collect())


def test_writes_through_the_wap_branch_leave_main_untouched_and_reads_follow_the_branch(spark, table):
    _append(spark, table, [1])
    main_before = wap.ref_snapshot_id(spark, table, "main")
    wap.open_branch(spark, table, "audit_t_1")
    _append(spark, table, [2, 3])  # the job's own code, unchanged
    assert _ids(spark, table) == [1, 2, 3], "the session reads its branch"
    wap.close_session_branch(spark)
    assert _ids(spark, table) == [1]
    assert wap.ref_snapshot_id(spark, table, "main") == main_before
    assert _ids(spark, table, "audit_t_1") == [1, 2, 3]
    published = wap.publish(spark, table, "audit_t_1")
    assert wap.ref_snapshot_id(spark, table, "main") == published != main_before
    assert _ids(spark, table) == [1, 2, 3]
    assert "audit_t_1" not in wap.branches(spark, table), "a published branch is dropped"


def _sql_executions(spark) -> int:
    """SQL executions so far, as Spark's status store counts them once its listener has seen every event posted
    (the store is filled on Spark's listener thread, after the statement returned)."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(30_000)
    return spark._jsparkSession.sharedState().statusStore().executionsCount()


def test_the_publish_runs_no_statement_the_lineage_listener_could_miss(spark, table):
    """Spark 4 runs the CALL while analysing it; reading its one-row result was a SQL execution of a millisecond whose
    START the OpenLineage listener missed in 7 % of loads (Trap 36). The publish now runs one SQL execution, the
    branch's DROP, and main still moves."""
    _append(spark, table, [1])
    wap.open_branch(spark, table, "audit_t_5")
    _append(spark, table, [2])
    branch_snapshot = wap.ref_snapshot_id(spark, table, "audit_t_5")
    wap.close_session_branch(spark)
    before = _sql_executions(spark)
    assert wap.publish(spark, table, "audit_t_5", drop=False) == branch_snapshot
    assert _sql_executions(spark) == before, "the CALL alone published: nothing read its result"
    assert wap.ref_snapshot_id(spark, table, "main") == branch_snapshot
    wap.discard(spark, table, "audit_t_5")
    assert _sql_executions(spark) == before + 1, "the count sees a statement: the DROP BRANCH"


def test_a_branch_of_a_table_without_a_snapshot_publishes_main_for_the_first_time(spark, table):
    assert wap.ref_snapshot_id(spark, table, "main") is None
    wap.open_branch(spark, table, "audit_t_2")
    _append(spark, table, [7])
    wap.refresh(spark, table)
    assert _ids(spark, table) == [7], "the session reads what it wrote to its branch"
    written = wap.ref_snapshot_id(spark, table, "audit_t_2")
    wap.close_session_branch(spark)
    assert wap.ref_snapshot_id(spark, table, "main") is None, "still no main"
    assert wap.publish(spark, table, "audit_t_2") == written
    assert _ids(spark, table) == [7]


def test_fast_forward_fails_cleanly_when_main_moved_after_the_branch_was_made(spark, table):
    _append(spark, table, [1])
    wap.open_branch(spark, table, "audit_t_3")
    _append(spark, table, [2])
    wap.close_session_branch(spark)
    _append(spark, table, [9])  # a concurrent writer commits on main
    moved = wap.ref_snapshot_id(spark, table, "main")
    with pytest.raises(Exception, match="Cannot fast-forward: main is not an ancestor of audit_t_3"):
        wap.publish(spark, table, "audit_t_3")
    assert wap.ref_snapshot_id(spark, table, "main") == moved, "main kept the concurrent commit"
    assert _ids(spark, table) == [1, 9]
    assert "audit_t_3" in wap.branches(spark, table), "the refused branch is kept"
    wap.discard(spark, table, "audit_t_3")
    assert "audit_t_3" not in wap.branches(spark, table)


def test_without_write_wap_enabled_the_session_branch_is_ignored(spark, table):
    """The table property gates spark.wap.branch: why open_branch sets it."""
    spark.sql(f"ALTER TABLE {qualified(table)} CREATE BRANCH `audit_t_4`")
    spark.conf.set(wap.WAP_BRANCH_CONF, "audit_t_4")
    _append(spark, table, [5])
    wap.close_session_branch(spark)
    assert _ids(spark, table) == [5], "written to main"
    assert _ids(spark, table, "audit_t_4") == []


@pytest.mark.parametrize("name", ["main", "", "1abc", "a-b", "a;DROP", "x" * 101, "a b"])
def test_branch_names_that_are_not_audit_branches_are_refused(name):
    with pytest.raises(ValueError, match="not an audit branch name"):
        wap.check_branch_name(name)


class _Recorded:
    def __init__(self):
        self.events = []

    def emit(self, event):
        self.events.append(event)


def test_pipeline_publish_follows_the_fast_forward_rule_through_pyiceberg_and_records_the_reason(
    spark, table, monkeypatch
):
    from include.core import settings
    from include.quality import review

    monkeypatch.setattr(review, "AUDITED_TABLES", (table,))
    _append(spark, table, [1])
    wap.open_branch(spark, table, "audit_t_5")
    _append(spark, table, [2])
    wap.close_session_branch(spark)
    branch_snapshot = wap.ref_snapshot_id(spark, table, "audit_t_5")
    recorded = _Recorded()
    outcome = review.publish(table, "audit_t_5", "reviewed", settings.pyiceberg_catalog(), transport=recorded)
    spark.sql(f"REFRESH TABLE {qualified(table)}")
    assert wap.ref_snapshot_id(spark, table, "main") == branch_snapshot == outcome["snapshot"]
    assert "audit_t_5" not in wap.branches(spark, table)
    assert [e.eventType.value for e in recorded.events] == ["START", "COMPLETE"]
    facet = recorded.events[-1].run.facets["writeAuditPublish"]
    assert facet.reason == "reviewed" and facet.published is True and facet.branch == "audit_t_5"
    assert recorded.events[-1].outputs[0].facets["version"].datasetVersion == str(branch_snapshot)


def test_pipeline_publish_refuses_a_branch_main_moved_away_from_and_discard_drops_it(spark, table, monkeypatch):
    from include.core import settings
    from include.core.errors import NotFoundError
    from include.quality import review

    monkeypatch.setattr(review, "AUDITED_TABLES", (table,))
    _append(spark, table, [1])
    wap.open_branch(spark, table, "audit_t_6")
    _append(spark, table, [2])
    wap.close_session_branch(spark)
    _append(spark, table, [3])  # main moved
    moved = wap.ref_snapshot_id(spark, table, "main")
    with pytest.raises(review.PublishRefusedError, match="Cannot fast-forward: main is not an ancestor of audit_t_6"):
        review.publish(table, "audit_t_6", "reviewed", settings.pyiceberg_catalog())
    assert wap.ref_snapshot_id(spark, table, "main") == moved
    review.discard(table, "audit_t_6", catalog=settings.pyiceberg_catalog())
    spark.sql(f"REFRESH TABLE {qualified(table)}")
    assert "audit_t_6" not in wap.branches(spark, table) and _ids(spark, table) == [1, 3]
    with pytest.raises(NotFoundError, match="no audit branch 'audit_t_6'"):
        review.discard(table, "audit_t_6", catalog=settings.pyiceberg_catalog())


def _sql_executions(spark) -> int:
    """SQL executions the session has run so far: what the OpenLineage listener builds an event for, each."""
    return spark._jsparkSession.sharedState().statusStore().executionsCount()


def test_a_jobs_questions_about_a_table_run_no_sql_and_see_every_commit(spark, table):
    """The snapshot of main or a branch, a property, and an existing table's creation are read from the Iceberg table
    object, not by SQL statements, each of which the OpenLineage listener would analyse for an event."""
    from spark_jobs.common.tables import current_snapshot_id, ref_snapshot_id, table_property

    _append(spark, table, [1])
    wap.open_branch(spark, table, "audit_t_q")
    _append(spark, table, [2])  # through the session's branch
    before = _sql_executions(spark)
    main, branch = current_snapshot_id(spark, table), ref_snapshot_id(spark, table, "audit_t_q")
    enabled = table_property(spark, table, wap.WAP_PROPERTY)
    ensure_table(spark, table, SCHEMA)
    assert wap.branches(spark, table) == {"audit_t_q": branch}
    assert _sql_executions(spark) == before
    assert enabled == "true" and table_property(spark, table, "no.such.property") is None
    assert main != branch and ref_snapshot_id(spark, table, "no_such_branch") is None
    assert current_snapshot_id(spark, "no_such_table") is None
    assert main == spark.sql(f"SELECT snapshot_id FROM {qualified(table)}.refs WHERE name = 'main'").first()[0]
    assert branch == spark.sql(f"SELECT snapshot_id FROM {qualified(table)}.refs WHERE name = 'audit_t_q'").first()[0]
