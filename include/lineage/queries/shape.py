"""Marquez's lineage response shape: ``{"graph": [{"id", "type", "data", "inEdges", "outEdges"}]}``, with each
node's ``DatasetData`` or ``JobData`` as Marquez fills it; for ``GET /api/v1/lineage`` (``marquez.py``) and for the
CLI's ``--json`` of any subgraph (``marquez_graph``)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Connection

from include.core.jsontext import field_reader, loads
from include.lineage.queries.names import Node, Subgraph
from include.lineage.queries.sql import chunks, fetch_rows, in_list
from include.lineage.store.schema import (
    dataset_versions_table,
    datasets_table,
    job_versions_table,
    jobs_table,
    runs_table,
)

# The facets a node's data reads: only these members are decoded (a dataset's schema, column lineage and statistics,
# a job's source code are most of their facets' size)
_dataset_facets = field_reader("schema", "lifecycleStateChange", "symlinks")
_job_facets = field_reader("jobType", "sourceCodeLocation", "documentation")


def marquez_graph(conn: Connection, subgraph: Subgraph) -> dict:
    """A subgraph in Marquez's lineage response shape; edges of a history subgraph carry ``firstSeen``/``lastSeen``."""
    in_edges: dict[int, list] = {}
    out_edges: dict[int, list] = {}
    for source, target in subgraph.edges:
        edge = {"origin": subgraph.nodes[source].key, "destination": subgraph.nodes[target].key}
        if subgraph.edge_times is not None:
            edge["firstSeen"], edge["lastSeen"] = subgraph.edge_times.get((source, target), (None, None))
        out_edges.setdefault(source, []).append(edge)
        in_edges.setdefault(target, []).append(edge)
    io = None
    if subgraph.as_of is not None or subgraph.edge_times is not None:  # the jobs' datasets of *that* graph
        io = _io_of_subgraph(subgraph)
    data = node_data(conn, list(subgraph.nodes.values()), io)
    graph = []
    for node in sorted(subgraph.nodes.values(), key=lambda n: n.key):
        graph.append(
            {
                "id": node.key,
                "type": "DATASET" if node.kind == "dataset" else "JOB",
                "data": data.get(node.id),
                "inEdges": sorted(in_edges.get(node.id, []), key=lambda e: (e["origin"], e["destination"])),
                "outEdges": sorted(out_edges.get(node.id, []), key=lambda e: (e["origin"], e["destination"])),
            }
        )
    return {"graph": graph}


def _io_of_subgraph(subgraph: Subgraph) -> dict[int, dict]:
    """job node -> its inputs and outputs among the subgraph's edges."""
    io: dict[int, dict] = {}
    for source, target in subgraph.edges:
        a, b = subgraph.nodes[source], subgraph.nodes[target]
        if b.kind == "job":
            io.setdefault(b.id, {"inputs": [], "outputs": []})["inputs"].append(
                {"namespace": a.namespace, "name": a.name}
            )
        else:
            io.setdefault(a.id, {"inputs": [], "outputs": []})["outputs"].append(
                {"namespace": b.namespace, "name": b.name}
            )
    return _sorted_sides(io)


def _sorted_sides(io: dict[int, dict[str, list]]) -> dict[int, dict[str, list]]:
    """Each job's inputs and outputs in (namespace, name) order, as Marquez lists them."""
    for sides in io.values():
        for datasets in sides.values():
            datasets.sort(key=lambda x: (x["namespace"], x["name"]))
    return io


def node_data(conn: Connection, nodes: list[Node], io: dict[int, dict] | None = None) -> dict[int, dict]:
    """Marquez's ``DatasetData`` and ``JobData`` of each node (plus ``currentVersion``, and a dataset's
    ``symlinks``); a job's inputs and outputs are those of the current graph unless ``io`` gives them (job node ->
    ``{"inputs": [...], "outputs": [...]}``, each list in (namespace, name) order)."""
    data = _dataset_data(conn, [n.id for n in nodes if n.kind == "dataset"])
    data.update(_job_data(conn, [n.id for n in nodes if n.kind == "job"], io))
    return data


def _dataset_data(conn: Connection, dataset_nodes: list[int]) -> dict[int, dict]:
    d, dv = datasets_table, dataset_versions_table
    data: dict[int, dict] = {}
    for chunk in chunks(dataset_nodes):
        rows = conn.execute(
            select(d, dv.c.version, dv.c.schema)
            .outerjoin(dv, dv.c.id == d.c.current_version_id)
            .where(d.c.node_id.in_(chunk))
        ).all()
        for row in rows:
            facets = _dataset_facets(row.facets or "{}")
            schema = (
                loads(row.schema)
                if row.schema
                else [[f.get("name"), f.get("type")] for f in (facets.get("schema") or {}).get("fields") or []]
            )
            data[row.node_id] = {
                "id": {"namespace": row.namespace, "name": row.name},
                "type": "DB_TABLE",
                "name": row.name,
                "physicalName": row.name,
                "createdAt": row.created_at,
                "updatedAt": row.updated_at,
                "namespace": row.namespace,
                "sourceName": row.namespace,
                "fields": [{"name": name, "type": kind, "tags": [], "description": None} for name, kind in schema],
                "tags": [],
                "lastModifiedAt": row.updated_at,
                "description": None,
                "lastLifecycleState": (facets.get("lifecycleStateChange") or {}).get("lifecycleStateChange"),
                "currentVersion": row.version,
                "symlinks": [i.get("name") for i in (facets.get("symlinks") or {}).get("identifiers") or []],
            }
    return data


def _job_data(conn: Connection, job_nodes: list[int], io: dict[int, dict] | None) -> dict[int, dict]:
    j, r, jv = jobs_table, runs_table, job_versions_table
    data: dict[int, dict] = {}
    for chunk in chunks(job_nodes):
        rows = conn.execute(
            select(j, jv.c.version).outerjoin(jv, jv.c.id == j.c.current_version_id).where(j.c.node_id.in_(chunk))
        ).all()
        latest_ids = [row.latest_run_id for row in rows if row.latest_run_id]
        # the columns ``_marquez_run`` gives, never the run's facets: a year's runs carry KB of them each, read
        # (and on PostgreSQL, decompressed) for nothing by a whole-row select
        run_columns = (r.c.id, r.c.state, r.c.started_at, r.c.ended_at, r.c.nominal_start, r.c.nominal_end)
        latest = (
            {run.id: run for run in conn.execute(select(*run_columns).where(r.c.id.in_(latest_ids)))}
            if latest_ids
            else {}
        )
        job_io = io if io is not None else _current_io(conn, chunk)
        for row in rows:
            data[row.node_id] = _job_item(row, latest.get(row.latest_run_id), job_io.get(row.node_id, {}))
    return data


def _current_io(conn: Connection, job_nodes: list[int]) -> dict[int, dict[str, list]]:
    """The jobs' inputs (edges into them) and outputs (edges out of them) in the current graph, each from the edges'
    index (CROSS JOIN keeps SQLite's order: one query on "source or target", or one led by the nodes' (kind, ...)
    index, scanned every edge or every dataset: 0.6 s, 11 s for 1,531 nodes)."""
    current: dict[int, dict[str, list]] = {}
    placeholders, params = in_list(job_nodes)
    for side, job_end, dataset_end in (("inputs", "target", "source"), ("outputs", "source", "target")):
        for job_node, ns, name in fetch_rows(
            conn,
            f"SELECT e.{job_end}, n.namespace, n.name FROM lineage_edges e CROSS JOIN lineage_nodes n"
            f" WHERE e.{job_end} IN ({placeholders}) AND n.id = e.{dataset_end} AND n.kind = 'dataset'",
            params,
        ):
            current.setdefault(job_node, {"inputs": [], "outputs": []})[side].append({"namespace": ns, "name": name})
    return _sorted_sides(current)


def _job_item(row, run, io: dict) -> dict:
    facets = _job_facets(row.facets or "{}")
    processing = ((facets.get("jobType") or {}).get("processingType") or "").upper()
    return {
        "id": {"namespace": row.namespace, "name": row.name},
        "type": "STREAM" if processing == "STREAMING" else "BATCH",
        "name": row.name,
        "simpleName": row.name.rsplit(".", 1)[-1],
        "parentJobName": row.name.rsplit(".", 1)[0] if "." in row.name else None,
        "parentJobUuid": None,  # Marquez's job UUIDs: the store has none
        "currentRunUuid": row.latest_run_id,
        "createdAt": row.created_at,
        "updatedAt": row.updated_at,
        "namespace": row.namespace,
        "inputs": io.get("inputs", []),
        "outputs": io.get("outputs", []),
        "location": (facets.get("sourceCodeLocation") or {}).get("url"),
        "description": (facets.get("documentation") or {}).get("description"),
        "latestRun": _marquez_run(run) if run is not None else None,
        "currentVersion": row.version,
    }


def _marquez_run(row) -> dict:
    return {
        "id": row.id,
        "state": row.state,
        "startedAt": row.started_at,
        "endedAt": row.ended_at,
        "nominalStartTime": row.nominal_start,
        "nominalEndTime": row.nominal_end,
    }
