"""The bench's speed probe: the cores' slow state is told from the fast one, for the whole bench and each section."""

from __future__ import annotations

import statistics
import time

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from bench import speed_probe
from bench.speed_probe import SpeedProbe, summary


@pytest.mark.parametrize(
    ("units", "slow_share"),
    [
        ([0.27] * 8 + [0.50] * 2, 0.2),  # the two states this VM's cores switch between (docs/performance.md)
        ([0.50] * 10, 0.0),  # slow all along: nothing to tell it from, so no sample stands out
        ([0.27] * 5 + [0.30] * 5, 0.0),  # jitter within the fast state
        ([0.27, 0.50, 0.27, 0.50], 0.5),
        ([0.001], 0.0),
    ],
)
def test_the_slow_share_counts_the_samples_of_the_slow_state(units, slow_share):
    result = summary(units)
    assert result["slow_share"] == pytest.approx(slow_share)
    assert result["samples"] == len(units)
    assert result["min_ms"] == pytest.approx(min(units) * 1000)
    assert result["max_ms"] == pytest.approx(max(units) * 1000)


def test_no_sample_is_no_figure_not_a_zero():
    assert summary([]) == {"samples": 0, "median_ms": None, "min_ms": None, "max_ms": None, "slow_share": None}


@given(
    st.lists(st.floats(min_value=1e-4, max_value=10.0, allow_nan=False), min_size=1, max_size=200),
    st.floats(min_value=0.1, max_value=10.0),
)
def test_the_slow_share_is_a_share_and_does_not_depend_on_the_units_scale(units, scale):
    """A faster or slower machine as a whole (every sample scaled) is not a change of state."""
    fastest_tenth = sorted(units)[: max(1, len(units) // 10)]
    threshold = speed_probe.SLOW_FACTOR * statistics.median(fastest_tenth)
    assume(all(abs(unit - threshold) > 1e-9 * threshold for unit in units))  # not on the line, where rounding decides
    share = summary(units)["slow_share"]
    assert 0.0 <= share < 1.0  # the fastest tenth is never slow
    assert summary([unit * scale for unit in units])["slow_share"] == pytest.approx(share)


def test_a_real_probe_samples_the_bench_and_its_sections_beside_it():
    with SpeedProbe(interval=0.05) as probe:
        time.sleep(0.3)
        with probe.section("busy"):
            deadline = time.monotonic() + 0.4
            while time.monotonic() < deadline:  # the probe thread still gets its turns beside a busy main thread
                sum(i * i for i in range(1000))
    report = probe.report()
    assert report["whole"]["samples"] >= 3 and report["whole"]["median_ms"] > 0
    busy = report["sections"]["busy"]
    assert 1 <= busy["samples"] <= report["whole"]["samples"]
    count = len(probe.samples)
    time.sleep(0.15)
    assert len(probe.samples) == count  # stopped with its block


def test_a_paused_probe_takes_no_sample_and_goes_on_after():
    """The explorer's latencies are measured in the bench's own process: the probe's unit would share its GIL."""
    with SpeedProbe(interval=0.02) as probe:
        time.sleep(0.1)
        with probe.paused():
            time.sleep(0.05)  # a unit started just before the pause may still end inside it
            started = time.monotonic()
            time.sleep(0.3)
            ended = time.monotonic()
        time.sleep(0.2)
    assert probe.between(started, ended) == []
    assert probe.between(ended, time.monotonic())


def test_the_markdown_names_the_slow_share_of_the_whole_and_of_each_section():
    report = {
        "interval_seconds": 0.5,
        "unit_iterations": speed_probe.UNIT_ITERATIONS,
        "whole": summary([0.27] * 8 + [0.50] * 2),
        "sections": {"ingest": summary([0.27] * 4), "lineage": summary([0.27, 0.5]), "explorer": summary([])},
    }
    text = speed_probe.to_markdown(report)
    assert "slow state in 20% of the samples" in text
    assert "ingest 0% slow" in text and "lineage 50% slow" in text and "explorer no sample" in text
    assert speed_probe.to_markdown({**report, "whole": summary([])}) == ""
