"""The rule that recognises a month already loaded from the same source (spark_jobs/common/loaded_source.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.common.loaded_source import SOURCE_IDENTITY, SOURCE_MONTH, month_identity


def tagged(month: str, identity: str) -> dict:
    return {"operation": "overwrite", SOURCE_MONTH: month, SOURCE_IDENTITY: identity}


UNTAGGED = {"operation": "delete"}  # a user's DELETE, a compaction, the row-id migration


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([], None),
        ([tagged("2025-01", "a")], "a"),
        ([tagged("2025-01", "b"), tagged("2025-01", "a")], "b"),
        ([tagged("2025-02", "x"), tagged("2025-01", "a")], "a"),
        ([UNTAGGED, tagged("2025-01", "a")], None),
        ([tagged("2025-02", "x"), UNTAGGED, tagged("2025-01", "a")], None),
        ([tagged("2025-01", "a"), UNTAGGED], "a"),
        ([tagged("2025-02", "x")], None),
        ([{SOURCE_MONTH: "2025-01"}], None),
    ],
    ids=[
        "empty history",
        "the month's only commit",
        "the newest commit of the month decides",
        "other months' commits pass",
        "an untagged commit after it: unknown",
        "an untagged commit between: unknown",
        "an untagged commit before it does not matter",
        "the month never loaded",
        "a tag without identity",
    ],
)
def test_month_identity(history, expected):
    assert month_identity(history, "2025-01") == expected


months = st.sampled_from(["2025-01", "2025-02", "2025-03"])
commits = st.one_of(st.just(UNTAGGED), st.builds(tagged, months, st.sampled_from(["a", "b", "c"])))


@given(st.lists(commits, max_size=12), st.lists(st.builds(tagged, st.just("2025-02"), st.just("z")), max_size=5))
def test_other_months_commits_never_change_the_answer(history, newer_other_months):
    assert month_identity(newer_other_months + history, "2025-01") == month_identity(history, "2025-01")


@given(st.lists(commits, max_size=12))
def test_an_untagged_newer_commit_always_makes_it_unknown(history):
    assert month_identity([UNTAGGED, *history], "2025-01") is None
