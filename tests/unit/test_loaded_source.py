"""The rule that recognises a month already loaded from the same source (spark_jobs/common/loaded_source.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.common.loaded_source import (
    COMPLETES_SNAPSHOT,
    SOURCE_IDENTITY,
    SOURCE_MONTH,
    MonthState,
    load_completed,
    month_commit,
    month_identity,
)


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


def completing(month: str, identity: str, snapshot_id: int) -> dict:
    return {**tagged(month, identity), COMPLETES_SNAPSHOT: str(snapshot_id)}


def state(history: list[tuple[int, dict]]) -> MonthState:
    """A table's MonthState for 2025-01 from (snapshot id, summary) pairs, newest first, as month_state reads it."""
    deciding = month_commit(history, "2025-01")
    current = history[0][0] if history else None
    if deciding is None:
        return MonthState(None, current)
    return MonthState(deciding[1].get(SOURCE_IDENTITY), current, deciding[0], deciding[1])


@pytest.mark.parametrize(
    ("staging", "quarantine", "expected"),
    [
        ([(2, tagged("2025-01", "a"))], [(7, completing("2025-01", "a", 2))], True),
        # stopped after staging's write (or before its repeated rows were removed): no quarantine commit names it
        ([(3, tagged("2025-01", "a")), (2, tagged("2025-01", "a"))], [(7, completing("2025-01", "a", 2))], False),
        ([(2, tagged("2025-01", "a"))], [(7, tagged("2025-01", "a"))], False),
        ([(2, tagged("2025-01", "a"))], [], False),
        ([(2, tagged("2025-01", "b"))], [(7, completing("2025-01", "a", 2))], False),
        ([(2, tagged("2025-01", "a"))], [(7, completing("2025-01", "b", 2))], False),
        # other months' later stages leave the month's answer as it was
        (
            [(5, tagged("2025-02", "x")), (2, tagged("2025-01", "a"))],
            [(9, completing("2025-02", "x", 5)), (7, completing("2025-01", "a", 2))],
            True,
        ),
        ([(5, UNTAGGED), (2, tagged("2025-01", "a"))], [(7, completing("2025-01", "a", 2))], False),
    ],
    ids=[
        "the quarantine's commit completes staging's",
        "staging written again after the last completed stage",
        "a quarantine commit that completes nothing",
        "no quarantine",
        "staging from another source",
        "quarantine from another source",
        "other months' stages in between",
        "a user's change to staging since",
    ],
)
def test_load_completed(staging, quarantine, expected):
    assert load_completed(state(staging), state(quarantine), "a") is expected


@given(st.lists(commits, max_size=8), st.integers(min_value=1, max_value=10**6))
def test_a_newer_staging_commit_of_the_month_is_never_completed_by_an_older_quarantine(history, newer):
    staging = [(i + 1, summary) for i, summary in enumerate(reversed(history))][::-1]
    decided = state(staging)
    quarantine = state([(10**7, completing("2025-01", "a", decided.month_snapshot_id or 0))])
    rewritten = state([(10**6 + newer, tagged("2025-01", "a")), *staging])
    assert not load_completed(rewritten, quarantine, "a")
