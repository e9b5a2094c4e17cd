"""What the spec refused in the events a node was given: each invalid facet (or field) ``lineage serve`` kept with its
event and left out of what the store reads, with the rule, the event's time and its run (``lineage show``, the
lineage page's node panel)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Connection

from include.lineage.queries.names import Node
from include.lineage.store.schema import events_table, facet_problems_table


def facet_problems(conn: Connection, node: Node, limit: int = 50) -> list[dict]:
    """The node's problems, newest first: ``{"eventTime", "runId", "path", "facet", "rule"}`` (of events still
    stored: a pruned event takes its problems with it)."""
    p, e = facet_problems_table, events_table
    query = (
        select(p.c.event_time, p.c.run_id, p.c.path, p.c.facet, p.c.rule)
        .join(e, e.c.id == p.c.event_id)
        .where(p.c.node_id == node.id)
        .order_by(p.c.event_time.desc(), p.c.event_id.desc(), p.c.path)
        .limit(limit)
    )
    return [
        {"eventTime": row.event_time, "runId": row.run_id, "path": row.path, "facet": row.facet, "rule": row.rule}
        for row in conn.execute(query)
    ]
