"""Every table's expectations, declared in one place, and their evaluation.

A Spark job measures the audited snapshot (the month it wrote to an audit branch) into ``observations``: a dict of
metric name -> number (or None when it cannot be measured, e.g. no published month to compare with). ``evaluate``
checks each expectation of the table against them, without Spark. An expectation whose metric is None passes and
says why ("not measured: ...").

Severity ``block``: the branch is not published (``main`` is not moved) when it fails. ``warn``: it is published,
and the failure is reported (lineage, alert). Defaults pass on the project's generated data and on every TLC era the
pipeline ingests (tests/unit/test_expectations.py checks them against generated months of each era).

To change a threshold, edit its line below: the change is versioned with the code, and each run's lineage records
the thresholds it was held to (``expected`` of each ``dataQualityAssertions`` entry).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from include.core import naming

BLOCK = "block"
WARN = "warn"
SEVERITIES = (BLOCK, WARN)
# OpenLineage's dataQualityAssertions `severity`: "error" blocks the pipeline, "warn" does not.
OPENLINEAGE_SEVERITY = {BLOCK: "error", WARN: "warn"}


@dataclass(frozen=True)
class Expectation:
    """``metric`` must lie within [minimum, maximum] (either bound may be None: unbounded on that side)."""

    table: str
    name: str
    metric: str
    severity: str
    description: str
    minimum: float | None = None
    maximum: float | None = None
    column: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"expectation {self.name}: severity {self.severity!r}, expected one of {SEVERITIES}")
        if self.minimum is None and self.maximum is None:
            raise ValueError(f"expectation {self.name}: needs a minimum or a maximum")

    @property
    def threshold(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            return f"between {_number(self.minimum)} and {_number(self.maximum)}"
        if self.minimum is not None:
            return f">= {_number(self.minimum)}"
        return f"<= {_number(self.maximum)}"


@dataclass(frozen=True)
class Result:
    expectation: Expectation
    observed: float | None
    passed: bool
    note: str = ""

    @property
    def blocking(self) -> bool:
        return not self.passed and self.expectation.severity == BLOCK

    @property
    def message(self) -> str:
        e = self.expectation
        observed = _number(self.observed) if self.observed is not None else f"not measured ({self.note})"
        verdict = "passed" if self.passed else f"FAILED ({e.severity})"
        return f"{e.table} {e.name}: {verdict}: observed {observed}, expected {e.threshold} ({e.description})"

    def to_assertion(self) -> dict:
        """An entry of OpenLineage's ``dataQualityAssertions`` facet (and of the job report)."""
        e = self.expectation
        return {
            "assertion": e.name,
            "name": e.name,
            "success": self.passed,
            "column": e.column,
            "severity": OPENLINEAGE_SEVERITY[e.severity],
            "description": e.description,
            "expected": e.threshold,
            "actual": None if self.observed is None else _number(self.observed),
        }


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


_TAXI = naming.TAXI_RAW
_WEATHER = naming.WEATHER_RAW
_FORECAST = naming.HOURLY_FORECAST

# fmt: off
EXPECTATIONS: tuple[Expectation, ...] = (
    # --- nyc_taxi.yellow_taxi_raw: the month the run wrote -----------------------------------------------------
    Expectation(_TAXI, "daily_rows_vs_trailing_months", "daily_rows_ratio", BLOCK,
                "trips per day of the month / median trips per day of the published months among the 3 before it",
                minimum=0.7),
    Expectation(_TAXI, "daily_rows_vs_trailing_months_high", "daily_rows_ratio", WARN,
                "trips per day of the month / median trips per day of the published months among the 3 before it",
                maximum=1.5),
    Expectation(_TAXI, "quarantine_rate", "quarantine_rate", BLOCK,
                "share of the file's rows quarantined (null zone, negative total, pickup outside the month, "
                "dropoff before pickup)", maximum=0.2),
    Expectation(_TAXI, "quarantine_rate_low", "quarantine_rate", WARN,
                "share of the file's rows quarantined", maximum=0.05),
    Expectation(_TAXI, "days_missing", "days_missing", BLOCK,
                "days of the month without a single pickup", maximum=0, column="tpep_pickup_datetime"),
    Expectation(_TAXI, "null_rate_pickup_zone", "null_rate_PULocationID", BLOCK,
                "share of the month's rows without a pickup zone", maximum=0.0, column="PULocationID"),
    Expectation(_TAXI, "null_rate_dropoff_time", "null_rate_tpep_dropoff_datetime", BLOCK,
                "share of the month's rows without a dropoff time", maximum=0.01, column="tpep_dropoff_datetime"),
    Expectation(_TAXI, "null_rate_total_amount", "null_rate_total_amount", BLOCK,
                "share of the month's rows without a total amount", maximum=0.01, column="total_amount"),
    Expectation(_TAXI, "fare_out_of_range", "fare_out_of_range_rate", WARN,
                "share of rows with fare_amount outside [0, 1000] dollars", maximum=0.02, column="fare_amount"),
    Expectation(_TAXI, "distance_out_of_range", "distance_out_of_range_rate", WARN,
                "share of rows with trip_distance outside [0, 500] miles", maximum=0.02, column="trip_distance"),
    Expectation(_TAXI, "duration_out_of_range", "duration_out_of_range_rate", WARN,
                "share of rows lasting less than 0 s or more than 24 h", maximum=0.02,
                column="tpep_dropoff_datetime"),
    Expectation(_TAXI, "pickups_outside_month", "pickups_outside_month", BLOCK,
                "rows of the month whose pickup is not inside the month", maximum=0, column="tpep_pickup_datetime"),
    # --- nyc_taxi.weather_raw: the month the run wrote ---------------------------------------------------------
    Expectation(_WEATHER, "nyc_series_present", "nyc_series_missing", BLOCK,
                "(NYC county, element) series of the month absent (5 counties x 4 elements expected)", maximum=0,
                column="region_code"),
    Expectation(_WEATHER, "missing_values_per_county_element", "max_missing_share", BLOCK,
                "largest share of -999.99 among the days observed so far, over NYC's counties and elements",
                maximum=0.2),
    Expectation(_WEATHER, "any_missing_value", "max_missing_share", WARN,
                "largest share of -999.99 among the days observed so far, over NYC's counties and elements",
                maximum=0.0),
    # --- nyc_taxi.yellow_rides_hourly_forecast: the rows the run wrote -----------------------------------------
    Expectation(_FORECAST, "negative_rides", "negative_rides", BLOCK,
                "forecast rows with negative rides", maximum=0, column="forecasted_total_rides"),
    Expectation(_FORECAST, "nan_rides", "nan_rides", BLOCK,
                "forecast rows whose rides are NaN or null", maximum=0, column="forecasted_total_rides"),
    Expectation(_FORECAST, "zone_hours_missing", "zone_hours_missing", BLOCK,
                "(active zone, hour of the 24-hour horizon) pairs without a forecast", maximum=0,
                column="pulocationid"),
)
# fmt: on


def for_table(table: str) -> tuple[Expectation, ...]:
    return tuple(e for e in EXPECTATIONS if e.table == table)


def metrics_of(table: str) -> set[str]:
    return {e.metric for e in for_table(table)}


def evaluate(table: str, observations: dict[str, float | int | None], notes: dict[str, str] | None = None):
    """Each expectation of ``table`` against ``observations``. A metric the job did not report at all is a bug of
    the job, not a pass: it raises (the audit must never pass by omission)."""
    results = []
    for expectation in for_table(table):
        if expectation.metric not in observations:
            raise KeyError(f"{table}: the audit measured no {expectation.metric!r} (expectation {expectation.name})")
        observed = observations[expectation.metric]
        if observed is None:
            note = (notes or {}).get(expectation.metric, "nothing to compare with")
            results.append(Result(expectation, None, True, note))
            continue
        observed = float(observed)
        passed = not math.isnan(observed)
        if expectation.minimum is not None:
            passed = passed and observed >= expectation.minimum
        if expectation.maximum is not None:
            passed = passed and observed <= expectation.maximum
        results.append(Result(expectation, observed, passed))
    return results


def blocking_failures(results) -> list[Result]:
    return [r for r in results if r.blocking]


def warnings(results) -> list[Result]:
    return [r for r in results if not r.passed and r.expectation.severity == WARN]


def ratio_to_trailing_median(current: float, trailing: list[float]) -> float | None:
    """``current`` / the median of ``trailing`` (None when there is nothing to compare with, or the median is 0)."""
    values = sorted(v for v in trailing if v is not None)
    if not values:
        return None
    middle = len(values) // 2
    median = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
    return None if median == 0 else current / median


def trailing_months(month: str, count: int = 3) -> list[str]:
    """The ``count`` calendar months before ``month`` (``YYYY-MM``), newest first."""
    year, number = map(int, month.split("-"))
    months = []
    for _ in range(count):
        year, number = (year - 1, 12) if number == 1 else (year, number - 1)
        months.append(f"{year:04d}-{number:02d}")
    return months
