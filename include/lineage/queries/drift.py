"""Tasks whose latest run did not read and write what their DAG declares: the ``lineageDrift`` run facet
(include/lineage/emit/observed.py) of each job's newest run that carries one."""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.engine import Connection

from include.lineage.store.schema import jobs_table, runs_table

DRIFT_LISTS = ("declaredNotRead", "declaredNotWritten", "readNotDeclared", "writtenNotDeclared")


def drifted_tasks(conn: Connection) -> list[dict]:
    """Every job whose newest observed run drifted, with what drifted (datasets as ``namespace:name``), by job name.
    A job's newest run is the latest by first event time whose facets hold an observed ``lineageDrift``; a task whose
    later run kept its declaration again is not listed."""
    rows = conn.execute(
        select(jobs_table.c.name, runs_table.c.id, runs_table.c.first_event_time, runs_table.c.facets)
        .select_from(runs_table.join(jobs_table, jobs_table.c.id == runs_table.c.job_id))
        .where(runs_table.c.facets.like('%"lineageDrift"%'))
        .order_by(jobs_table.c.name, runs_table.c.first_event_time, runs_table.c.id)
    ).all()
    newest: dict[str, tuple] = {}
    for name, run_id, time, facets_text in rows:
        try:
            drift = (json.loads(facets_text or "{}") or {}).get("lineageDrift") or {}
        except ValueError:
            continue
        if isinstance(drift, dict) and drift.get("observed"):
            newest[name] = (run_id, time, drift)  # ordered by time: the last one wins
    found = []
    for name, (run_id, time, drift) in sorted(newest.items()):
        if not drift.get("drifted"):
            continue
        found.append(
            {
                "job": name,
                "runId": run_id,
                "time": time,
                **{
                    key: [f"{d.get('namespace')}:{d.get('name')}" for d in drift.get(key) or [] if isinstance(d, dict)]
                    for key in DRIFT_LISTS
                },
            }
        )
    return found
