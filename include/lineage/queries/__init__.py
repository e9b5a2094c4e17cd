"""Questions asked of the lineage store: where did this come from, who is affected, what changed between two runs.

Every query resolves a node the way a user names it (``namespace:name``, a dataset's table name such as
``nyc_taxi.yellow_rides_hourly_forecast``, a URL, a job name, or Marquez's ``dataset:<ns>:<name>``). Three graphs:

- ``upstream``/``downstream``/``impact`` walk the current graph through the closure table (one indexed query for all
  ancestors or descendants); with ``as_of`` the graph as it was at an instant (each job as the version of its latest
  run started by then, datasets first seen by then), with ``all_history`` every edge ever seen, with when;
- ``marquez_lineage`` answers ``GET /api/v1/lineage`` the way Marquez 0.51 does (``LineageService.lineage``): the
  start job of the node, then every job whose *current version* shares a dataset with the jobs reached so far, from
  a replay of the stored events in Marquez's terms (``MarquezModel``), whatever the closure table holds;
- ``run_lineage`` answers ``GET /api/v1/runlineage/upstream`` (``LineageDao.getUpstreamRuns``): run -> dataset
  version read -> run that wrote it -> ..., the provenance that ``diff --upstream`` compares.

Graphs render as a readable tree or, for ``--json``, in Marquez's lineage response shape (``{"graph": [{"id",
"type", "data", "inEdges", "outEdges"}]}``).

``LineageQueries`` (``front.py``) is the front; one module answers each kind of question, lower ones first:

- ``sql``: the driver's cursor, the closure table, the recursive walk every baseline is built from;
- ``names``: nodes, subgraphs, a user's names and instants; ``model``: Marquez's model, replayed from the events;
- ``walks``: the current, as-of and history walks; ``shape``: Marquez's response shape; ``runs``; ``columns``;
- ``marquez``: ``GET /api/v1/lineage``; ``impact``; ``provenance``: run provenance; then ``diff``.
"""

from include.lineage.errors import EmptyStoreError, UnknownNodeError
from include.lineage.queries.front import LineageQueries
from include.lineage.queries.names import Node, NotYetSeenError, Subgraph, parse_instant, parse_node_id
from include.lineage.queries.sql import (
    DEFAULT_DEPTH,
    closure_downstream,
    closure_upstream,
    closure_upstream_rows,
    cte_walk,
    fetch_rows,
    recursive_walk_sql,
)

__all__ = [
    "DEFAULT_DEPTH",
    "EmptyStoreError",
    "LineageQueries",
    "Node",
    "NotYetSeenError",
    "Subgraph",
    "UnknownNodeError",
    "closure_downstream",
    "closure_upstream",
    "closure_upstream_rows",
    "cte_walk",
    "fetch_rows",
    "parse_instant",
    "parse_node_id",
    "recursive_walk_sql",
]
