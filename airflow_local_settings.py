"""Airflow's local settings for every Airflow process of the project: Airflow imports this module by name from
PYTHONPATH (the project root is on it, ``settings.airflow_env``). It binds Airflow's log servers to loopback when the
API is there (``include/airflow/loopback.py``); it defines no cluster policy."""

from include.airflow import loopback

__all__: list[str] = []

loopback.serve_logs_on_loopback()
