"""Airflow's local settings for every Airflow process of the project: Airflow imports this module by name from
PYTHONPATH (the project root is on it, ``settings.airflow_env``). It binds Airflow's log servers to loopback when the
API is there (``include/airflow/loopback.py``), and defines one cluster policy: a run's conf may send a task to a
Celery queue of its choice (``include/airflow/queues.py``; nothing changes without it)."""

from include.airflow import loopback
from include.airflow.queues import task_instance_mutation_hook

__all__: list[str] = ["task_instance_mutation_hook"]

loopback.serve_logs_on_loopback()
