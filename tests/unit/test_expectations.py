"""The declared expectations and their evaluation (include/quality/expectations.py), without Spark."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from include.core import naming
from include.quality import expectations as ex

TABLES = (naming.TAXI_RAW, naming.WEATHER_RAW, naming.HOURLY_FORECAST)
# Observations of a clean month of each table: every expectation passes.
CLEAN = {
    naming.TAXI_RAW: {
        "daily_rows_ratio": 1.02,
        "quarantine_rate": 0.001,
        "days_missing": 0,
        "null_rate_PULocationID": 0.0,
        "null_rate_tpep_dropoff_datetime": 0.0,
        "null_rate_total_amount": 0.0,
        "fare_out_of_range_rate": 0.0,
        "distance_out_of_range_rate": 0.0,
        "duration_out_of_range_rate": 0.0,
        "pickups_outside_month": 0,
    },
    naming.WEATHER_RAW: {"nyc_series_missing": 0, "max_missing_share": 0.0},
    naming.HOURLY_FORECAST: {"negative_rides": 0, "nan_rides": 0, "zone_hours_missing": 0},
}


@pytest.mark.parametrize("table", TABLES)
def test_a_clean_snapshot_passes_every_expectation(table):
    results = ex.evaluate(table, CLEAN[table])
    assert results and all(r.passed for r in results), [r.message for r in results if not r.passed]
    assert {r.expectation.metric for r in results} == set(CLEAN[table])


# (table, metric, observed, expectation that fails, its severity, threshold in the message)
FAILING = [
    (naming.TAXI_RAW, "daily_rows_ratio", 0.6, "daily_rows_vs_trailing_months", "block", ">= 0.7"),
    (naming.TAXI_RAW, "daily_rows_ratio", 1.8, "daily_rows_vs_trailing_months_high", "warn", "<= 1.5"),
    (naming.TAXI_RAW, "quarantine_rate", 0.4, "quarantine_rate", "block", "<= 0.2"),
    (naming.TAXI_RAW, "quarantine_rate", 0.08, "quarantine_rate_low", "warn", "<= 0.05"),
    (naming.TAXI_RAW, "days_missing", 3, "days_missing", "block", "<= 0"),
    (naming.TAXI_RAW, "null_rate_PULocationID", 0.001, "null_rate_pickup_zone", "block", "<= 0"),
    (naming.TAXI_RAW, "null_rate_tpep_dropoff_datetime", 0.5, "null_rate_dropoff_time", "block", "<= 0.01"),
    (naming.TAXI_RAW, "null_rate_total_amount", 0.02, "null_rate_total_amount", "block", "<= 0.01"),
    (naming.TAXI_RAW, "fare_out_of_range_rate", 0.03, "fare_out_of_range", "warn", "<= 0.02"),
    (naming.TAXI_RAW, "distance_out_of_range_rate", 0.03, "distance_out_of_range", "warn", "<= 0.02"),
    (naming.TAXI_RAW, "duration_out_of_range_rate", 0.5, "duration_out_of_range", "warn", "<= 0.02"),
    (naming.TAXI_RAW, "pickups_outside_month", 1, "pickups_outside_month", "block", "<= 0"),
    (naming.WEATHER_RAW, "nyc_series_missing", 4, "nyc_series_present", "block", "<= 0"),
    (naming.WEATHER_RAW, "max_missing_share", 1.0, "missing_values_per_county_element", "block", "<= 0.2"),
    (naming.WEATHER_RAW, "max_missing_share", 0.1, "any_missing_value", "warn", "<= 0"),
    (naming.HOURLY_FORECAST, "negative_rides", 2, "negative_rides", "block", "<= 0"),
    (naming.HOURLY_FORECAST, "nan_rides", 1, "nan_rides", "block", "<= 0"),
    (naming.HOURLY_FORECAST, "zone_hours_missing", 24, "zone_hours_missing", "block", "<= 0"),
]


@pytest.mark.parametrize("table, metric, observed, name, severity, threshold", FAILING)
def test_each_expectation_fails_with_its_observed_value_and_threshold(
    table, metric, observed, name, severity, threshold
):
    results = ex.evaluate(table, {**CLEAN[table], metric: observed})
    failed = {r.expectation.name: r for r in results if not r.passed}
    assert name in failed, [r.message for r in results]
    result = failed[name]
    assert result.expectation.severity == severity
    assert result.blocking == (severity == "block")
    assert f"observed {ex._number(float(observed))}" in result.message
    assert f"expected {threshold}" in result.message and "FAILED" in result.message
    entry = result.to_assertion()
    assert entry["success"] is False and entry["severity"] == {"block": "error", "warn": "warn"}[severity]
    assert entry["expected"] == threshold


def test_every_declared_expectation_is_exercised_failing_above():
    assert {e.name for e in ex.EXPECTATIONS} == {case[3] for case in FAILING}


def test_a_metric_not_measured_passes_and_says_why_but_a_metric_not_reported_is_an_error():
    results = ex.evaluate(
        naming.TAXI_RAW, {**CLEAN[naming.TAXI_RAW], "daily_rows_ratio": None}, {"daily_rows_ratio": "no month"}
    )
    ratio = [r for r in results if r.expectation.metric == "daily_rows_ratio"]
    assert all(r.passed and "not measured (no month)" in r.message for r in ratio)
    with pytest.raises(KeyError, match="measured no 'days_missing'"):
        ex.evaluate(naming.TAXI_RAW, {k: v for k, v in CLEAN[naming.TAXI_RAW].items() if k != "days_missing"})


def test_nan_never_passes():
    results = ex.evaluate(naming.HOURLY_FORECAST, {**CLEAN[naming.HOURLY_FORECAST], "negative_rides": math.nan})
    assert [r.expectation.name for r in results if not r.passed] == ["negative_rides"]


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"severity": "fatal", "maximum": 1}, "severity 'fatal'"),
        ({"severity": "block"}, "needs a minimum or a maximum"),
    ],
)
def test_a_malformed_declaration_is_refused(kwargs, error):
    with pytest.raises(ValueError, match=error):
        ex.Expectation(naming.TAXI_RAW, "x", "m", description="d", **kwargs)


@pytest.mark.parametrize(
    "month, trailing", [("2025-03", ["2025-02", "2025-01", "2024-12"]), ("2011-01", ["2010-12", "2010-11", "2010-10"])]
)
def test_trailing_months_are_the_calendar_months_before(month, trailing):
    assert ex.trailing_months(month) == trailing


def _median_ratio(current: float, trailing: list[float]) -> float | None:
    """The ratio computed independently: ``current`` / ``statistics.median`` of the measured months."""
    measured = [value for value in trailing if value is not None]
    if not measured or statistics.median(measured) == 0:
        return None
    return current / statistics.median(measured)


@given(
    current=st.floats(min_value=0, max_value=1e9, allow_nan=False),
    trailing=st.lists(
        st.one_of(st.none(), st.floats(min_value=0, max_value=1e9, allow_nan=False)), min_size=0, max_size=6
    ),
)
def test_the_ratio_to_the_trailing_median_is_the_month_over_the_median_of_the_measured_months(current, trailing):
    ratio = ex.ratio_to_trailing_median(current, trailing)
    expected = _median_ratio(current, trailing)
    if expected is None:
        assert ratio is None, (current, trailing, ratio)
    else:
        assert ratio == pytest.approx(expected, rel=1e-12), (current, trailing)
    measured = [value for value in trailing if value is not None]
    if measured and statistics.median(measured) != 0:
        assert ex.ratio_to_trailing_median(statistics.median(measured), trailing) == pytest.approx(1, rel=1e-12)


@pytest.mark.parametrize(
    "current, trailing, ratio",
    [
        (30, [10, 20, 40], 1.5),  # odd: the middle value, not the mean (23.3)
        (30, [40, 20], 1.0),  # even: the mean of the two middle values, (20 + 40) / 2
        (60, [100, 10, 30, 20], 2.4),  # even, unsorted: (20 + 30) / 2 = 25
        (45, [None, 30, None], 1.5),  # a month not measured is left out
        (10, [None], None),  # nothing to compare with
        (10, [0, 0, 5], None),  # a median of 0
        (0, [4, 8], 0.0),
    ],
)
def test_the_ratio_to_the_trailing_median_on_known_months(current, trailing, ratio):
    assert ex.ratio_to_trailing_median(current, trailing) == ratio
