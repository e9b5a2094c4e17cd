"""What the DAG files declare will consume a table, before anything ran there: the DAGs scheduled on its Airflow
Asset, and the tasks that declare it as an input (a project operator's ``inputs``, a stock operator's ``inlets``).

Lineage names what *did* read a table; a fresh deployment whose forecast DAG has not run yet has no such reader, yet
a blocked month still stops that DAG. An alert names both: the observed downstream, and these declared consumers
marked "declared, not yet run". Read from the DAG files (a DagBag parse, no metadata database: a task process of
Airflow 3 has none), within the alert's budget.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from include.core import naming, settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeclaredConsumer:
    dag_id: str
    task_id: str | None  # None: the whole DAG (scheduled on the Asset)
    how: str  # "scheduled on its Asset" or "declares it as an input"

    def line(self) -> str:
        where = f"DAG {self.dag_id}" + (f" task {self.task_id}" if self.task_id else "")
        return f"{where} ({self.how}; declared, not yet run)"


def _assets(condition) -> list:
    """The Assets of a schedule's condition, nested ``&``/``|`` included (an Asset has a name and a URI)."""
    if condition is None:
        return []
    if hasattr(condition, "uri") and hasattr(condition, "name"):
        return [condition]
    found = []
    for part in getattr(condition, "objects", None) or []:
        found += _assets(part)
    return found


def _declared_inputs(task) -> list[str]:
    if hasattr(task, "lineage_keys"):
        inputs, _ = task.lineage_keys()
        return [key for key in inputs if "{" not in key]  # a template is known only at run time
    return [getattr(asset, "name", "") for asset in getattr(task, "inlets", None) or []]


def consumers_of(table: str, dags: dict | None = None) -> list[DeclaredConsumer]:
    """The declared consumers of ``table`` (a lineage key) in ``dags`` (dag_id -> DAG; default: the DAG folder)."""
    if dags is None:
        from airflow.configuration import conf
        from airflow.dag_processing.dagbag import DagBag

        dags = DagBag(dag_folder=conf.get("core", "dags_folder")).dags
    asset_name = settings.CatalogSettings.current().table(table) if naming.is_table_key(table) else table
    found = []
    for dag_id, dag in sorted(dags.items()):
        condition = getattr(getattr(dag, "timetable", None), "asset_condition", None)
        if any(asset.name == asset_name for asset in _assets(condition)):
            found.append(DeclaredConsumer(dag_id, None, "scheduled on its Asset"))
        for task in dag.tasks:
            if table in _declared_inputs(task) or asset_name in _declared_inputs(task):
                found.append(DeclaredConsumer(dag_id, task.task_id, "declares it as an input"))
    return found
