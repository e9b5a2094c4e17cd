"""The audits among the runs: each run whose merged facets hold a ``writeAuditPublish`` run facet (an audited write, a
publish or a discard of a kept branch; the facet's schema is include/lineage/spec/facets/WriteAuditPublishRunFacet.json)
has a row of ``lineage_run_audits`` with the facet's table, branch and verdict, written as the run's facets are.

The page (include/lineage/api/audits.py) asks which tables wait for review: the blocked audits, then the audits of
those tables only, each an index read. Found among the runs' facets instead, every first draw of the page read and
parsed every run's facets: 34 s on a year's store of 6.4 x 10^6 events.

Only a facet this project could have written is kept: an object whose ``table`` is a non-empty text of at most
``TABLE_LIMIT`` characters (an index entry has a size limit on PostgreSQL; the project's table keys are a few dozen).
A run whose facet stops being one (a later event's facet wins the merge) loses its row.
"""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.engine import Connection

from include.core.jsontext import sorted_compact
from include.lineage.store.bulk import execute_many
from include.lineage.store.schema import run_audits_table

FACET = "writeAuditPublish"
TABLE_LIMIT = 1024  # run_audits_table.c.table_name's length

_CHUNK = 500  # run ids of one IN (...) list


def audit_row(run_id: str, facets: dict) -> dict | None:
    """The run's row of ``lineage_run_audits`` from its merged facets, or None if they hold no audit facet the
    project could have written."""
    facet = facets.get(FACET)
    if not isinstance(facet, dict):
        return None
    table = facet.get("table")
    if not isinstance(table, str) or not table or len(table) > TABLE_LIMIT:
        return None
    branch = facet.get("branch")
    return {
        "run_id": run_id,
        "table_name": table,
        "branch": None if branch is None else str(branch),
        "published": facet.get("published") is True,
        "facet": sorted_compact(facet),
    }


def write(conn: Connection, changed: dict[str, dict | None]) -> None:
    """The rows of runs whose facets changed: ``changed`` maps a run id to its row, or to None (no audit facet)."""
    run_ids = sorted(changed)
    for start in range(0, len(run_ids), _CHUNK):
        conn.execute(delete(run_audits_table).where(run_audits_table.c.run_id.in_(run_ids[start : start + _CHUNK])))
    rows = [changed[run_id] for run_id in run_ids if changed[run_id] is not None]
    if rows:
        execute_many(conn, run_audits_table.insert(), rows)
