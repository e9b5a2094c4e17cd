"""Write-audit-publish on the lineage page: the runs that audited a write (or published or discarded a kept branch),
and the tables waiting for review because of them, now or at any time. One rule for the page served, its exported
file and include/quality/review.py (``pipeline publish``/``discard``, ``lineage checks``, which import it through
``data``)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select

from include.core import naming, settings
from include.core.jsontext import loads
from include.lineage.queries.sql import chunks
from include.lineage.store.schema import jobs_table, run_audits_table, runs_table

# The operator's decisions about a kept audit branch (``pipeline publish`` / ``pipeline discard``, include/quality/
# review.py): runs of these jobs carry the ``writeAuditPublish`` facet of the branch they decided.
PUBLISH_JOB = "pipeline.publish"
DISCARD_JOB = "pipeline.discard"
DECISION_JOBS = (PUBLISH_JOB, DISCARD_JOB)


def audit_runs(store, tables: Iterable[str] | None = None) -> list[dict]:
    """Every run that carries a ``writeAuditPublish`` run facet (an audited write, a publish or a discard of a kept
    branch), oldest first, or only those of ``tables``: its job, state, time (start, else its latest event) and the
    facet's facts. Read from ``lineage_run_audits`` (``store/run_audits.py``), by its index when ``tables`` is given."""
    a = run_audits_table
    if tables is None:
        return _read_audits(store, None)
    found = []
    for chunk in chunks(sorted(set(tables))):
        found += _read_audits(store, a.c.table_name.in_(chunk))
    return sorted(found, key=lambda item: (item["time"] or "", item["run_id"]))


def _read_audits(store, where) -> list[dict]:
    """The audits ``where`` selects (None: all), oldest first."""
    a, r, j = run_audits_table, runs_table, jobs_table
    query = (
        select(a.c.run_id, a.c.table_name, a.c.branch, a.c.facet, r.c.state, r.c.started_at, r.c.state_time, j.c.name)
        .join(r, r.c.id == a.c.run_id)
        .join(j, j.c.id == r.c.job_id)
    )
    if where is not None:
        query = query.where(where)
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
    found = [_audit(row, loads(row.facet)) for row in rows]
    return sorted(found, key=lambda item: (item["time"] or "", item["run_id"]))


def _audit(row, facet: dict) -> dict:
    return {
        "run_id": row.run_id,
        "job": row.name,
        "state": row.state,
        "time": row.started_at or row.state_time,
        "table": row.table_name,
        "branch": row.branch,
        "published": facet.get("published") is True,
        "blocked": facet.get("published") is not True and row.name not in DECISION_JOBS,
        "reason": _text(facet.get("reason")),
        "blocking": _texts(facet.get("blocking")),
        "warnings": _texts(facet.get("warnings")),
        "results": [r for r in facet.get("results") or [] if isinstance(r, dict)]
        if isinstance(facet.get("results"), list)
        else [],
    }


def _text(value) -> str | None:
    return None if value is None else str(value)


def _texts(values) -> list[str]:
    return [str(value) for value in values] if isinstance(values, list) else []


def failed_expectations(results: list[dict]) -> list[dict]:
    """The failed entries of an audit's results, as the page lists them: name, observed, threshold, severity."""
    return [
        {
            "name": _text(result.get("name") or result.get("assertion")),
            "observed": _text(result.get("actual")),
            "threshold": _text(result.get("expected")),
            "severity": _text(result.get("severity")),
        }
        for result in results
        if result.get("success") is False
    ]


def blocked_spans(store) -> list[dict]:
    """Each blocked audit with the span of time its table was waiting for review: from the audit until the
    operator published or discarded its branch, or a newer audit of the table (``until`` None: still waiting).
    One rule for the page served now, as of a time, and in the exported file (``lineage.js`` reads the spans).
    Only the audits of tables with a blocked audit are read: a span ends at a later audit of its own table."""
    a, r, j = run_audits_table, runs_table, jobs_table
    with store.engine.connect() as conn:
        tables = conn.execute(
            select(a.c.table_name)
            .distinct()
            .join(r, r.c.id == a.c.run_id)
            .join(j, j.c.id == r.c.job_id)
            .where(a.c.published.is_(False), j.c.name.not_in(DECISION_JOBS))
        ).scalars()
        tables = list(tables)
    audits = audit_runs(store, tables) if tables else []
    spans = []
    for index, audit in enumerate(audits):
        if not audit["blocked"]:
            continue
        ends = [
            later["time"]
            for later in audits[index + 1 :]
            if later["table"] == audit["table"]
            and (later["job"] not in DECISION_JOBS or later["branch"] == audit["branch"])
        ]
        spans.append(
            {
                "table": audit["table"],
                "label": f"{settings.ICEBERG_NAMESPACE}.{audit['table']}",
                "since": audit["time"],
                "until": min(ends) if ends else None,
                "decided": next(
                    (
                        "published" if later["job"] == PUBLISH_JOB else "discarded"
                        for later in audits[index + 1 :]
                        if later["job"] in DECISION_JOBS
                        and later["table"] == audit["table"]
                        and later["branch"] == audit["branch"]
                    ),
                    None,
                ),
                **{name: audit[name] for name in ("branch", "run_id", "blocking", "warnings", "results")},
                "failed": failed_expectations(audit["results"]),
            }
        )
    return spans


def blocked_tables(store, as_of: str | None = None) -> dict[str, dict]:
    """{table label (``nyc_taxi.yellow_taxi_raw``): its blocked audit} for each table waiting for review (now, or as
    of ``as_of``): its newest audit was blocked, and its branch was neither published nor discarded since."""
    blocked = {}
    for span in blocked_spans(store):
        since_ok = as_of is None or (span["since"] or "") <= as_of
        open_then = span["until"] is None if as_of is None else (span["until"] is None or span["until"] > as_of)
        if since_ok and open_then:
            blocked[span["label"]] = span
    return blocked


def blocked_of(node, blocked: dict[str, dict]) -> dict | None:
    """The blocked audit of a dataset node: by its table name, or by the dataset the table's key names."""
    if node.label in blocked:
        return blocked[node.label]
    for span in blocked.values():
        dataset_id, _ = naming.dataset_for_key(span["table"])
        if (node.namespace, node.name) == (dataset_id.namespace, dataset_id.name):
            return span
    return None


def blocked_summary(span: dict) -> dict:
    """What the page shows of a blocked audit beside its table."""
    return {
        "branch": span["branch"],
        "since": span["since"],
        "runId": span["run_id"],
        "failed": span["failed"],
        "blocking": span["blocking"],
    }
