"""Shared DAG settings, so the DAG files stay wiring only."""

from __future__ import annotations

from datetime import datetime, timedelta

DEFAULT_ARGS = {
    "owner": "data-platform",
    "retries": 1,
    "retry_delay": timedelta(seconds=30),
}
START_DATE = datetime(2024, 1, 1)
# The month the run ingests: its data interval's start (the run for January fires on February 1st).
MONTH = "{{ data_interval_start.strftime('%Y-%m') }}"

# The ingest DAGs start where their sources start, so that a run of any published month has task instances (Airflow
# creates none for a run dated before the DAG's start date: a silent, green no-op). TLC publishes yellow-taxi files
# from 2009-01; NOAA nClimGrid daily's first file is 1951-01.
TAXI_START_DATE = datetime(2009, 1, 1)
WEATHER_START_DATE = datetime(1951, 1, 1)
# The first month each ingest DAG can ingest, and why nothing earlier.
FIRST_SUPPORTED_MONTH = {
    "tlc": (
        "2011-01",
        "TLC's 2009-2010 yellow-taxi files have text pickup times and coordinates but no pickup zone "
        "(PULocationID), which every table downstream is keyed by",
    ),
    "noaa": ("1951-01", "NOAA nClimGrid daily's first county file is 1951-01"),
}


def month_of(context) -> str:
    return context["data_interval_start"].strftime("%Y-%m")


def unsupported_month_reason(source: str, month: str) -> str | None:
    """Why ``month`` of ``source`` cannot be ingested, or None when it can."""
    first, why = FIRST_SUPPORTED_MONTH[source]
    if month >= first:
        return None
    return f"{source} {month} cannot be ingested: the first supported month is {first} ({why})"


def refuse_unsupported_month(source: str):
    """A ``pre_execute`` hook for a DAG's first task: a run of a month before the first supported one fails at once,
    without retries, saying why (instead of downloading a file the stage job would refuse)."""

    def check(context) -> None:
        reason = unsupported_month_reason(source, month_of(context))
        if reason:
            from airflow.sdk.exceptions import AirflowFailException

            raise AirflowFailException(reason)

    return check


def alerting_default_args(notifier) -> dict:
    """``DEFAULT_ARGS`` with the project's alerts, one per failed task, blocked publish or publish with failed warn
    expectations: ``notifier()`` on failure, ``notifier(on="success")`` on success. ``notifier`` is
    ``plugins/lakehouse_notifier.py``'s ``LineageAlertNotifier``, passed in by the DAG file (the library never
    imports ``plugins/``)."""
    return {**DEFAULT_ARGS, "on_failure_callback": [notifier()], "on_success_callback": [notifier(on="success")]}


def land_month(source: str) -> dict:
    """The arguments of an ingest DAG's first task (a ``LandSourceOperator``): this run's month of ``source``, again
    when the run's ``force`` param says so, refused at once for a month before the first supported one."""
    return {
        "source": source,
        "month": MONTH,
        "force": "{{ params.force }}",
        "pre_execute": refuse_unsupported_month(source),
    }
