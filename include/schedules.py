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
