"""The rule that recognises a month already loaded from the same source (spark_jobs/common/loaded_source.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_jobs.common.loaded_source import (
    LOAD_ID,
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


def of_load(month: str, identity: str, load: str) -> dict:
    return {**tagged(month, identity), LOAD_ID: load}


def state(history: list[tuple[int, dict]]) -> MonthState:
    """A table's MonthState for 2025-01 from (snapshot id, summary) pairs, newest first, as month_state reads it."""
    deciding = month_commit(history, "2025-01")
    current = history[0][0] if history else None
    if deciding is None:
        return MonthState(None, current)
    return MonthState(deciding[1].get(SOURCE_IDENTITY), current, deciding[0], deciding[1])


@pytest.mark.parametrize(
    ("raw", "quarantine", "expected"),
    [
        ([(2, of_load("2025-01", "a", "L1"))], [(7, of_load("2025-01", "a", "L1"))], True),
        # raw's removal of repeated rows is a second commit of the same load
        (
            [(3, of_load("2025-01", "a", "L1")), (2, of_load("2025-01", "a", "L1"))],
            [(7, of_load("2025-01", "a", "L1"))],
            True,
        ),
        # stopped after raw's write straight into main: a newer raw commit of another load, the quarantine of the last
        (
            [(3, of_load("2025-01", "a", "L2")), (2, of_load("2025-01", "a", "L1"))],
            [(7, of_load("2025-01", "a", "L1"))],
            False,
        ),
        # blocked or stopped before the publish: the quarantine of the new load, raw's main of the last
        (
            [(2, of_load("2025-01", "a", "L1"))],
            [(8, of_load("2025-01", "a", "L2")), (7, of_load("2025-01", "a", "L1"))],
            False,
        ),
        ([(2, tagged("2025-01", "a"))], [(7, tagged("2025-01", "a"))], False),
        ([(2, of_load("2025-01", "a", "L1"))], [], False),
        ([(2, of_load("2025-01", "b", "L1"))], [(7, of_load("2025-01", "a", "L1"))], False),
        ([(2, of_load("2025-01", "a", "L1"))], [(7, of_load("2025-01", "b", "L1"))], False),
        # other months' loads in between leave the month's answer as it was
        (
            [(5, of_load("2025-02", "x", "L5")), (2, of_load("2025-01", "a", "L1"))],
            [(9, of_load("2025-02", "x", "L5")), (7, of_load("2025-01", "a", "L1"))],
            True,
        ),
        ([(5, UNTAGGED), (2, of_load("2025-01", "a", "L1"))], [(7, of_load("2025-01", "a", "L1"))], False),
    ],
    ids=[
        "one load's commits on both",
        "two raw commits of one load",
        "raw written again by a load that never reached the quarantine",
        "a quarantine whose load never reached raw's main",
        "commits without a load id",
        "no quarantine",
        "raw from another source",
        "quarantine from another source",
        "other months' loads in between",
        "a user's change to raw since",
    ],
)
def test_load_completed(raw, quarantine, expected):
    assert load_completed(state(raw), state(quarantine), "a") is expected


@given(st.lists(commits, max_size=8), st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=8))
def test_a_newer_raw_commit_of_another_load_is_never_completed_by_the_last_quarantine(history, last, newer):
    """Whatever raw's history, once a load other than the quarantine's wrote raw's month last, the month is loaded
    again: a stopped or blocked load is never taken for a completed one."""
    quarantine = state([(10**7, of_load("2025-01", "a", last))])
    raw = state([(10**6, of_load("2025-01", "a", newer)), *[(i, summary) for i, summary in enumerate(history)]])
    assert load_completed(raw, quarantine, "a") is (newer == last)
