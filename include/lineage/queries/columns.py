"""Column lineage: the upstream of ``DATASET.COLUMN`` from the columnLineage facets, and Marquez's column-lineage
response shape (``DATASET_FIELD`` nodes)."""

from __future__ import annotations

import difflib
import json

from sqlalchemy import select
from sqlalchemy.engine import Connection

from include.lineage.errors import LineageError, UnknownNodeError
from include.lineage.queries.names import Node, resolve
from include.lineage.queries.sql import chunks
from include.lineage.store.schema import column_edges_table, datasets_table, nodes_table

Column = tuple[int, str]  # (dataset row id, field)


def column_lineage(conn: Connection, ref: str, depth: int, store_url: str) -> dict:
    """The answer of ``LineageQueries.columns``: the focus column, each column upstream with its level, the edges
    with their transformations, and the datasets' (namespace, name, label, field types)."""
    dataset_node, column = _resolve_column(conn, ref, store_url)
    dataset_id = conn.execute(select(datasets_table.c.id).where(datasets_table.c.node_id == dataset_node.id)).scalar()
    start = (dataset_id, column)
    levels, edges = _upstream_columns(conn, start, depth)
    return {"focus": start, "levels": levels, "edges": edges, "datasets": _datasets(conn, {ds for ds, _ in levels})}


def _upstream_columns(
    conn: Connection, start: Column, depth: int
) -> tuple[dict[Column, int], list[tuple[Column, Column, list]]]:
    ce = column_edges_table
    levels = {start: 0}
    edges: list[tuple[Column, Column, list]] = []
    frontier = [start]
    while frontier:
        next_frontier = []
        for ds, col in frontier:
            if levels[(ds, col)] >= depth:
                continue
            for row in conn.execute(
                select(ce.c.input_dataset_id, ce.c.input_field, ce.c.transformations).where(
                    ce.c.dataset_id == ds, ce.c.field == col
                )
            ):
                source = (row.input_dataset_id, row.input_field)
                if source == (ds, col):
                    continue  # a table rewritten from itself (MERGE): not an origin of the column
                edges.append((source, (ds, col), json.loads(row.transformations or "[]")))
                if source not in levels:
                    levels[source] = levels[(ds, col)] + 1
                    next_frontier.append(source)
        frontier = next_frontier
    return levels, edges


def _datasets(conn: Connection, dataset_ids: set[int]) -> dict[int, tuple]:
    d = datasets_table
    info = {}
    for chunk in chunks(dataset_ids):
        for row in conn.execute(
            select(d.c.id, d.c.namespace, d.c.name, d.c.facets, nodes_table.c.label)
            .join(nodes_table, nodes_table.c.id == d.c.node_id)
            .where(d.c.id.in_(chunk))
        ):
            facets = json.loads(row.facets or "{}")
            types = {f.get("name"): f.get("type") for f in (facets.get("schema") or {}).get("fields") or []}
            info[row.id] = (row.namespace, row.name, row.label, types)
    return info


def _resolve_column(conn: Connection, ref: str, store_url: str) -> tuple[Node, str]:
    if "." not in ref:
        raise LineageError(
            f"{ref!r}: give a column as DATASET.COLUMN, e.g. nyc_taxi.yellow_rides_hourly_forecast.forecasted_total_rides"
        )
    dataset_ref, column = ref.rsplit(".", 1)
    node = resolve(conn, dataset_ref, store_url)
    if node.kind != "dataset":
        raise LineageError(f"{dataset_ref!r} is a job, not a dataset")
    d, ce = datasets_table, column_edges_table
    row = conn.execute(select(d.c.id, d.c.facets).where(d.c.node_id == node.id)).first()
    known = {f.get("name") for f in (json.loads(row.facets or "{}").get("schema") or {}).get("fields") or []}
    known |= set(conn.execute(select(ce.c.field).where(ce.c.dataset_id == row.id).distinct()).scalars())
    known |= set(conn.execute(select(ce.c.input_field).where(ce.c.input_dataset_id == row.id).distinct()).scalars())
    if column not in known:
        raise UnknownNodeError(
            ref,
            [f"{dataset_ref}.{c}" for c in difflib.get_close_matches(column, sorted(known), n=5, cutoff=0.4)],
            what="column",
        )
    return node, column


def column_graph(result: dict) -> dict:
    """Marquez's column-lineage response shape (``DATASET_FIELD`` nodes) of ``column_lineage``'s answer."""
    datasets = result["datasets"]

    def field_id(key):
        ns, name, _, _ = datasets[key[0]]
        return f"datasetField:{ns}:{name}:{key[1]}"

    in_edges: dict = {}
    out_edges: dict = {}
    inputs: dict = {}
    for source, target, transformations in result["edges"]:
        edge = {"origin": field_id(source), "destination": field_id(target)}
        out_edges.setdefault(source, []).append(edge)
        in_edges.setdefault(target, []).append(edge)
        ns, name, _, _ = datasets[source[0]]
        first = transformations[0] if transformations else {}
        inputs.setdefault(target, []).append(
            {
                "namespace": ns,
                "dataset": name,
                "field": source[1],
                "transformationDescription": first.get("description"),
                "transformationType": first.get("type"),
                "transformations": transformations,
            }
        )
    graph = []
    for key in sorted(result["levels"], key=lambda k: (result["levels"][k], field_id(k))):
        ns, name, _, types = datasets[key[0]]
        graph.append(
            {
                "id": field_id(key),
                "type": "DATASET_FIELD",
                "data": {
                    "namespace": ns,
                    "dataset": name,
                    "field": key[1],
                    "fieldType": types.get(key[1]),
                    "inputFields": inputs.get(key, []),
                },
                "inEdges": in_edges.get(key, []),
                "outEdges": out_edges.get(key, []),
            }
        )
    return {"graph": graph}
