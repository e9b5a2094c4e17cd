"""How complete a DAG run's lineage is: complete, or what is missing, named.

Events go missing in the field (the START of a fast Spark job, a listener queue that overflowed, a task's events lost
by the provider), and no backend says so; the store knows enough to. For a DAG run and every run under it (its task
runs, their Spark applications, their Spark jobs), ``completeness`` names:

- **no terminal event**: a run that started and has no COMPLETE, FAIL or ABORT, ``grace`` seconds (default
  ``GRACE_SECONDS``) after its parent ended (a DAG run: after its last task ended). A Spark application under a task
  is named as such: it started under the task but sent no COMPLETE (its driver died, or its events were lost);
- **no START**: a run with a terminal event and no START;
- **fewer Spark applications than submitted**: a task of a ``SparkSubmitOperator`` (the provider's ``airflow`` run
  facet names the operator; the project's operator is one) submits one application per try, so a completed task
  run without a Spark application child run lost that application's events;
- **a line set aside** or **a post refused**: a line of the event files the store could not keep, or a post ``lineage
  serve`` refused (a dead letter not replayed), that names a run of the DAG run;
- **a torn event file**: a Spark application's outbox kept as ``.torn`` (it died in the middle of writing an event),
  given by the caller (the files are outside the store) and matched by the run ids it names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Connection

from include.lineage.events import utc_time
from include.lineage.queries.runs import descendant_runs
from include.lineage.queries.sql import chunks
from include.lineage.store.schema import dead_letters_table, jobs_table, rejected_lines_table, runs_table

GRACE_SECONDS = 600.0
_DONE = ("COMPLETED", "FAILED", "ABORTED")


def _job_type(facets: str | None) -> tuple[str, str]:
    job_type = (json.loads(facets or "{}").get("jobType") or {}) if facets else {}
    return str(job_type.get("jobType") or ""), str(job_type.get("integration") or "")


def dag_runs(conn: Connection, limit: int = 10) -> list[str]:
    """The newest DAG runs: runs without a parent whose job is a DAG (``jobType`` DAG) or that have child runs."""
    r, j = runs_table, jobs_table
    has_children = select(runs_table.c.id).where(runs_table.c.parent_run_id == r.c.id).exists()
    query = (
        select(r.c.id, j.c.facets)
        .join(j, j.c.id == r.c.job_id)
        .where(r.c.parent_run_id.is_(None))
        .order_by(func.coalesce(r.c.started_at, r.c.first_event_time).desc(), r.c.id)
    )
    found = []
    for run_id, facets in conn.execute(query.where(or_(has_children, j.c.facets.like('%"DAG"%')))):
        if (
            _job_type(facets)[0] == "DAG"
            or conn.execute(select(r.c.id).where(r.c.parent_run_id == run_id).limit(1)).first()
        ):
            found.append(run_id)
        if len(found) >= limit:
            break
    return found


def completeness(
    conn: Connection,
    dag_run_id: str,
    now: datetime | None = None,
    grace: float = GRACE_SECONDS,
    torn: Iterable[tuple[str, bytes]] = (),
) -> dict:
    """The DAG run's lineage: ``{"runId", "job", "state", "startedAt", "runs", "complete", "missing": [{"kind",
    "runId", "job", "detail"}]}``. ``torn``: (name, content) of torn Spark event files, matched by the run ids they
    name."""
    tree = descendant_runs(conn, [dag_run_id])
    r, j = runs_table, jobs_table
    runs = {}
    for chunk in chunks(tree):
        for row in conn.execute(
            select(r.c.id, r.c.parent_run_id, r.c.state, r.c.started_at, r.c.ended_at, r.c.facets, j.c.name)
            .add_columns(j.c.facets.label("job_facets"))
            .join(j, j.c.id == r.c.job_id)
            .where(r.c.id.in_(chunk))
        ):
            runs[row.id] = row
    deadline = utc_time((now or datetime.now(UTC)).isoformat())
    cutoff = utc_time(((now or datetime.now(UTC)) - timedelta(seconds=grace)).isoformat())
    missing = []
    for run_id in tree:
        row = runs.get(run_id)
        if row is not None:
            missing += _gaps(row, runs, cutoff)
    missing += _kept_aside(conn, tree, runs)
    missing += _torn(torn, tree, runs)
    dag = runs.get(dag_run_id)
    return {
        "runId": dag_run_id,
        "job": dag.name if dag else None,
        "state": dag.state if dag else None,
        "startedAt": dag.started_at if dag else None,
        "checkedAt": deadline,
        "runs": len(runs),
        "complete": not missing,
        "missing": missing,
    }


def _gap(kind: str, row, detail: str) -> dict:
    return {"kind": kind, "runId": row.id, "job": row.name, "detail": detail}


def _gaps(row, runs: dict, cutoff: str) -> list[dict]:
    gaps = []
    job_type, _integration = _job_type(row.job_facets)
    parent = runs.get(row.parent_run_id)
    if row.ended_at is not None and row.started_at is None:
        gaps.append(_gap("no START", row, f"{row.state} at {row.ended_at}, and no START event"))
    if row.state not in _DONE and row.started_at is not None:
        if parent is not None:
            ended = parent.ended_at
        else:  # the DAG run: once every run under it ended
            children = [child for child in runs.values() if child.parent_run_id == row.id]
            ended = max((c.ended_at for c in children), default=None) if all(c.ended_at for c in children) else None
        if ended is not None and ended <= cutoff:
            if job_type == "APPLICATION" and parent is not None:
                detail = (
                    f"started under task {parent.name} (run {parent.id}) but sent no COMPLETE; the task ended "
                    f"{parent.state} at {ended} (its driver died, or its events were lost)"
                )
                gaps.append(_gap("Spark application without COMPLETE", row, detail))
            else:
                whose = f"its parent {parent.name} ended {parent.state}" if parent else "its last child run ended"
                gaps.append(_gap("no terminal event", row, f"started, no COMPLETE/FAIL/ABORT; {whose} at {ended}"))
    if row.state == "COMPLETED" and _submits_spark(row):
        applications = [c for c in runs.values() if c.parent_run_id == row.id and _spark(c)]
        if not applications:
            gaps.append(
                _gap(
                    "fewer Spark applications than submitted",
                    row,
                    "its operator submits one Spark application per try; no Spark child run was received",
                )
            )
    return gaps


def _spark(row) -> bool:
    job_type, integration = _job_type(row.job_facets)
    return integration == "SPARK" or job_type in ("APPLICATION", "SQL_JOB", "RDD_JOB")


def _submits_spark(row) -> bool:
    task = (json.loads(row.facets or "{}").get("airflow") or {}).get("task") or {}
    operator = f"{task.get('operator_class_path') or ''} {task.get('operator_class') or ''}"
    return "SparkSubmitOperator" in operator


def _kept_aside(conn: Connection, tree: list[str], runs: dict) -> list[dict]:
    """Lines set aside and posts refused (not replayed) that name a run of the tree, each under the run it names
    first (an event names its own run before its parent's)."""
    found: dict[tuple, object] = {}
    for run_id in tree:
        for table, kind in ((rejected_lines_table, "a line set aside"), (dead_letters_table, "a post refused")):
            query = select(table).where(_holds(conn, table.c.content, run_id.encode()))
            if table is dead_letters_table:
                query = query.where(table.c.replayed_at.is_(None))
            for item in conn.execute(query):
                key = (kind, item.path, item.byte_offset) if kind == "a line set aside" else (kind, item.id)
                found[key] = item
    gaps = []
    for (kind, *_), item in found.items():
        named = min(
            (run_id for run_id in tree if run_id.encode() in item.content), key=lambda r: item.content.find(r.encode())
        )
        if kind == "a line set aside":
            where = f"{item.path}:{item.line_number or 'byte ' + str(item.byte_offset)}"
            detail = f"{where} names run {named} and was not stored: {item.error}"
        else:
            detail = f"dead letter #{item.id} ({item.status}) names run {named}: {item.reason}"
        gaps.append({"kind": kind, "runId": named, "job": runs[named].name, "detail": detail[:500]})
    return gaps


def _holds(conn: Connection, column, needle: bytes):
    """``column`` (bytes) holds ``needle``: SQLite's LIKE never matches a BLOB, its ``instr`` does; PostgreSQL has
    ``bytea LIKE bytea``."""
    if conn.dialect.name == "sqlite":
        return func.instr(column, needle) > 0
    return column.contains(needle)


def _torn(torn: Iterable[tuple[str, bytes]], tree: list[str], runs: dict) -> list[dict]:
    gaps = []
    for name, content in torn:
        named = [run_id for run_id in tree if run_id.encode() in content]
        if named:
            gaps.append(
                {
                    "kind": "a torn event file",
                    "runId": named[0],
                    "job": runs[named[0]].name,
                    "detail": f"{name}: a Spark application died in the middle of writing an event",
                }
            )
    return gaps
