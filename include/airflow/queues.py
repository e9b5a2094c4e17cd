"""Which Celery queue a task instance goes to, chosen per DAG run: Airflow's ``task_instance_mutation_hook``
(a cluster policy, registered by the project's ``airflow_local_settings.py``) reads the run's conf.

A run triggered with ``{"queues": {"<task_id>": "<queue>", ...}}`` in its conf sends each task named there to that
queue; every other task keeps its operator's queue (``[operators] default_queue``, ``default``). With the
CeleryExecutor a queue is a set of workers: `pipeline fleet` gives each worker a queue of its own (``worker-a``,
``worker-b``) beside the shared ``default``, so a run can pin its download to one machine and the load to another
(tests/integration/test_fleet.py). Airflow applies the hook when it creates a run's task instances (the api-server
for a triggered run, the scheduler otherwise); a retry keeps the queue its first try had. Other executors ignore
queues, and a conf without ``queues`` changes nothing.
"""

from __future__ import annotations

CONF_KEY = "queues"


def queue_for(task_id: str, conf: dict | None) -> str | None:
    """The queue the run's conf names for ``task_id``, or None."""
    queues = (conf or {}).get(CONF_KEY) if isinstance(conf, dict) else None
    queue = queues.get(task_id) if isinstance(queues, dict) else None
    return queue if isinstance(queue, str) and queue.strip() else None


def task_instance_mutation_hook(task_instance, dag_run=None) -> None:
    """Airflow's cluster policy: route ``task_instance`` to the queue its run's conf names for it. ``dag_run`` is
    None while a task instance is being built before it belongs to a run: nothing to do then."""
    queue = queue_for(task_instance.task_id, getattr(dag_run, "conf", None))
    if queue:
        task_instance.queue = queue
