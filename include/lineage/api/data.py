"""What the lineage page shows, read from the lineage store: the whole graph, a node's details, impact, columns, diffs.

The same functions answer the page's HTTP requests inside Airflow (``include/lineage/api/app.py``) and fill the
exported single-file page (``include/lineage/api/report.py``), so both show the same thing.
"""

from __future__ import annotations

import json

from sqlalchemy import func, select

from include.lineage.queries import LineageQueries, Node, closure_downstream
from include.lineage.store import iter_events
from include.lineage.store.schema import (
    column_edges_table,
    dataset_versions_table,
    datasets_table,
    edges_table,
    jobs_table,
    nodes_table,
    runs_table,
)

RECENT_RUNS = 10
RECENT_VERSIONS = 10
DIFFED_RUNS = 5  # the exported page carries the diff of every pair among a job's newest runs
_SPARK_JOB_TYPES = {"APPLICATION", "SQL_JOB", "RDD_JOB", "JOB"}


def _job_level(facets: dict) -> str:
    job_type = (facets.get("jobType") or {}).get("jobType", "")
    integration = (facets.get("jobType") or {}).get("integration", "")
    if integration == "SPARK" or job_type in _SPARK_JOB_TYPES:
        return "spark"
    return "dag" if job_type == "DAG" else "task"


def short_label(node: Node) -> str:
    """A table's name as the catalog knows it (``nyc_taxi.yellow_taxi_raw``); a file or URL by its last segment."""
    label = node.label
    if node.kind == "dataset" and "/" in label and not label.startswith("nyc_taxi."):
        return label.rstrip("/").rsplit("/", 1)[-1] or label
    return label


def graph(queries: LineageQueries) -> dict:
    """Every job and dataset as a node, every lineage edge; a task sits inside its DAG, a Spark job is marked."""
    with queries.store.engine.connect() as conn:
        nodes = [Node(**row._mapping) for row in conn.execute(select(nodes_table))]
        edges = conn.execute(select(edges_table.c.source, edges_table.c.target)).all()
        job_facets = {
            row.node_id: json.loads(row.facets or "{}")
            for row in conn.execute(select(jobs_table.c.node_id, jobs_table.c.facets))
        }
        dataset_info = {
            row.node_id: row
            for row in conn.execute(
                select(datasets_table.c.node_id, datasets_table.c.facets, dataset_versions_table.c.version).outerjoin(
                    dataset_versions_table, dataset_versions_table.c.id == datasets_table.c.current_version_id
                )
            )
        }
        latest_state = {
            row.node_id: row.state
            for row in conn.execute(
                select(jobs_table.c.node_id, runs_table.c.state).join(
                    runs_table, runs_table.c.id == jobs_table.c.latest_run_id
                )
            )
        }
    keys = {node.id: node.key for node in nodes}
    dag_keys = {
        node.name: node.key for node in nodes if node.kind == "job" and _job_level(job_facets.get(node.id, {})) == "dag"
    }
    out = []
    for node in sorted(nodes, key=lambda n: n.key):
        item = {
            "id": node.key,
            "kind": node.kind,
            "label": short_label(node),
            "fullName": node.label,
            "namespace": node.namespace,
            "name": node.name,
        }
        if node.kind == "job":
            item["level"] = _job_level(job_facets.get(node.id, {}))
            item["state"] = latest_state.get(node.id)
            dag_name = node.name.split(".", 1)[0]
            if item["level"] == "task" and dag_name in dag_keys:
                item["parent"] = dag_keys[dag_name]
                item["label"] = node.name.split(".", 1)[1]  # the task id: its DAG's box carries the DAG id
        else:
            info = dataset_info.get(node.id)
            facets = json.loads(info.facets or "{}") if info else {}
            item["level"] = "table" if (facets.get("symlinks") or facets.get("catalog")) else "file"
            item["version"] = info.version if info else None
        out.append(item)
    return {
        "nodes": out,
        "edges": [{"source": keys[s], "target": keys[t]} for s, t in edges if s in keys and t in keys],
    }


def _writer_statistics(queries: LineageQueries, run_id: str, namespace: str, name: str) -> dict:
    """The output statistics and data-quality facets a run reported for one dataset."""
    found: dict = {}
    for lineage_event in iter_events(queries.store, run_id):
        for output in lineage_event.get("outputs") or []:
            if output.get("namespace") == namespace and output.get("name") == name:
                stats = (output.get("outputFacets") or {}).get("outputStatistics")
                if stats:
                    found["outputStatistics"] = {k: v for k, v in stats.items() if not k.startswith("_")}
                for facet in ("dataQualityAssertions", "dataQualityMetrics"):
                    if (output.get("facets") or {}).get(facet):
                        found[facet] = {k: v for k, v in output["facets"][facet].items() if not k.startswith("_")}
    return found


def node_detail(queries: LineageQueries, ref: str) -> dict:
    """Schema, versions (Iceberg snapshots) with the statistics of the run that wrote each, data-quality results and
    recent runs with their state (of a job: its runs; of a dataset: the runs that wrote it)."""
    node = queries.resolve(ref)
    runs = queries.runs(node.key, RECENT_RUNS)["runs"]
    detail: dict = {
        "id": node.key,
        "kind": node.kind,
        "label": short_label(node),
        "fullName": node.label,
        "namespace": node.namespace,
        "name": node.name,
        "runs": runs,
    }
    with queries.store.engine.connect() as conn:
        if node.kind == "dataset":
            row = conn.execute(select(datasets_table).where(datasets_table.c.node_id == node.id)).first()
            facets = json.loads(row.facets or "{}")
            dv = dataset_versions_table
            versions = conn.execute(
                select(dv.c.version, dv.c.created_at, dv.c.created_by_run_id, dv.c.id)
                .where(dv.c.dataset_id == row.id)
                .order_by(dv.c.created_at.desc(), dv.c.id.desc())
                .limit(RECENT_VERSIONS)
            ).all()
            current = conn.execute(select(dv.c.version).where(dv.c.id == row.current_version_id)).scalar()
            detail["schema"] = [
                {"name": f.get("name"), "type": f.get("type")} for f in (facets.get("schema") or {}).get("fields") or []
            ]
            detail["currentVersion"] = current
            detail["versions"] = [
                {
                    "version": v.version,
                    "createdAt": v.created_at,
                    "runId": v.created_by_run_id,
                    "current": v.version == current,
                    **(
                        _writer_statistics(queries, v.created_by_run_id, node.namespace, node.name)
                        if v.created_by_run_id
                        else {}
                    ),
                }
                for v in versions
            ]
            detail["dataQuality"] = {
                k: {x: y for x, y in facets[k].items() if not x.startswith("_")}
                for k in ("dataQualityAssertions", "dataQualityMetrics")
                if facets.get(k)
            }
            latest_stats = next((v["outputStatistics"] for v in detail["versions"] if v.get("outputStatistics")), None)
            detail["statistics"] = latest_stats
            detail["storage"] = {
                k: (facets.get(k) or {}).get(f) for k, f in (("catalog", "framework"), ("storage", "storageLayer"))
            }
            detail["symlinks"] = [i.get("name") for i in (facets.get("symlinks") or {}).get("identifiers") or []]
            detail["lineageColumns"] = sorted(
                set(
                    conn.execute(
                        select(column_edges_table.c.field).where(column_edges_table.c.dataset_id == row.id)
                    ).scalars()
                )
            )
        else:
            row = conn.execute(select(jobs_table).where(jobs_table.c.node_id == node.id)).first()
            facets = json.loads(row.facets or "{}")
            detail["level"] = _job_level(facets)
            detail["sourceCodeLocation"] = (facets.get("sourceCodeLocation") or {}).get("url")
            detail["documentation"] = (facets.get("documentation") or {}).get("description")
            detail["runCount"] = conn.execute(
                select(func.count()).select_from(runs_table).where(runs_table.c.job_id == row.id)
            ).scalar()
    return detail


def impact(queries: LineageQueries, ref: str) -> dict:
    """Every node downstream of ``ref`` (closure table), with its distance."""
    node = queries.resolve(ref)
    with queries.store.engine.connect() as conn:
        downstream = dict(closure_downstream(conn, node.id))
        keys = dict(
            conn.execute(
                select(nodes_table.c.id, nodes_table.c.key).where(nodes_table.c.id.in_(list(downstream)))
            ).all()
        )
    return {
        "id": node.key,
        "downstream": sorted(
            ({"id": keys[i], "depth": d} for i, d in downstream.items() if i != node.id),
            key=lambda item: (item["depth"], item["id"]),
        ),
    }


def columns(queries: LineageQueries, ref: str) -> dict:
    """Column-level upstream of ``DATASET.COLUMN`` (columnLineage), in Marquez's column-lineage shape."""
    return queries.column_graph(queries.columns(ref))


def diff(queries: LineageQueries, run_a: str, run_b: str) -> dict:
    return queries.diff(run_a, run_b)


def bundle(queries: LineageQueries) -> dict:
    """Everything the page can ask for, answered in advance: what the exported single-file page carries."""
    whole = graph(queries)
    details, impacts, column_views, diffs = {}, {}, {}, {}
    for item in whole["nodes"]:
        details[item["id"]] = detail = node_detail(queries, item["id"])
        impacts[item["id"]] = impact(queries, item["id"])
        if item["kind"] == "dataset":
            for column in detail["lineageColumns"]:
                ref = f"{item['id']}.{column}"
                column_views[ref] = columns(queries, ref)
        else:
            run_ids = [run["id"] for run in detail["runs"][:DIFFED_RUNS]]
            for index, newer in enumerate(run_ids):
                for older in run_ids[index + 1 :]:
                    diffs[f"{older}|{newer}"] = diff(queries, older, newer)
    return {"graph": whole, "details": details, "impact": impacts, "columns": column_views, "diffs": diffs}
