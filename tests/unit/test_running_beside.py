"""Spark work run beside a block in the same session (spark_jobs/common/session.py ``running_beside``), and the commit
tags that stay with one write whatever another thread of the session does (loaded_source ``tagged_write``): what lets
load_taxi write the quarantine while raw's audit branch is written."""

from __future__ import annotations

import threading

import pytest
from pyspark.sql import types as T

from spark_jobs.common import loaded_source
from spark_jobs.common.session import running_beside
from spark_jobs.common.tables import ensure_table, qualified

SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("source_month", T.StringType())])


def test_the_work_runs_while_the_block_runs_and_is_waited_for(spark):
    in_block = threading.Event()
    seen: dict[str, object] = {}

    def work():
        # Waits for the block: the work finishing at all proves the two ran at the same time.
        seen["block_was_running"] = in_block.wait(timeout=120)
        seen["rows"] = spark.range(1000).count()

    with running_beside(work, "test-work"):
        in_block.set()
        assert spark.range(10).count() == 10
    assert seen == {"block_was_running": True, "rows": 1000}, "left the block before the work ended"


def test_the_works_error_is_raised_after_the_block():
    finished = []

    def work():
        raise ValueError("the quarantine's write failed")

    with pytest.raises(ValueError, match="quarantine's write failed"):
        with running_beside(work, "test-failing-work"):
            finished.append("block")
    assert finished == ["block"], "the block ran to its end"


def test_the_blocks_error_wins_and_the_work_is_still_waited_for():
    done = threading.Event()

    def work():
        done.wait(timeout=0.5)
        done.set()

    with pytest.raises(RuntimeError, match="raw's write failed"):
        with running_beside(work, "test-work-after-failure"):
            raise RuntimeError("raw's write failed")
    assert done.is_set(), "the caller went on while the work still ran"


def test_a_tagged_write_commits_its_tags_and_leaves_the_session_untouched(spark):
    name = "tagged_write_beside"
    spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
    ensure_table(spark, name, SCHEMA, partitioned_by="source_month")
    tags = loaded_source.commit_tags("2025-01", "source of 2025-01", loaded_source.new_load_id())
    writer = spark.createDataFrame([(1, "2025-01")], SCHEMA).writeTo(qualified(name))
    loaded_source.tagged_write(writer, tags).overwritePartitions()
    summary = spark.sql(f"SELECT summary FROM {qualified(name)}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[
        0
    ]
    assert {key: summary.get(key) for key in tags} == tags
    assert all(spark.conf.get(loaded_source.SESSION_SNAPSHOT_PROPERTY + key, None) is None for key in tags)
    # The next plain commit carries none of them: a write option is the commit's own.
    spark.createDataFrame([(2, "2025-02")], SCHEMA).writeTo(qualified(name)).overwritePartitions()
    latest = spark.sql(f"SELECT summary FROM {qualified(name)}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
    assert loaded_source.LOAD_ID not in latest
    spark.sql(f"DROP TABLE IF EXISTS {qualified(name)}")
