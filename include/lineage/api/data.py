"""What the lineage page shows, read from the lineage store: the whole graph, a node's details, impact, columns, diffs.

The same functions answer the page's HTTP requests inside Airflow (``include/lineage/api/app.py``) and fill the
exported single-file page (``include/lineage/api/report.py``), so both show the same thing.
"""

from __future__ import annotations

from sqlalchemy import func, or_, select

from include.core import settings
from include.core.jsontext import field_reader, loads

# DISCARD_JOB, PUBLISH_JOB, audit_runs: re-exported, as include/quality/review.py imports them from here
from include.lineage.api.audits import DISCARD_JOB as DISCARD_JOB
from include.lineage.api.audits import PUBLISH_JOB as PUBLISH_JOB
from include.lineage.api.audits import audit_runs as audit_runs
from include.lineage.api.audits import blocked_of, blocked_spans, blocked_summary, blocked_tables
from include.lineage.queries import DEFAULT_DEPTH, LineageQueries, Node, closure_downstream, parse_instant
from include.lineage.queries.problems import facet_problems
from include.lineage.queries.sql import chunks, newest_runs, run_start
from include.lineage.queries.walks import as_of_edges
from include.lineage.store import iter_events
from include.lineage.store.schema import (
    column_edges_table,
    dataset_versions_table,
    datasets_table,
    edges_table,
    events_table,
    jobs_table,
    nodes_table,
    run_datasets_table,
    runs_table,
)

RECENT_RUNS = 10
RECENT_VERSIONS = 10
DIFFED_RUNS = 5  # the exported page carries the diff of every pair among a job's newest runs
PICKER_RUNS = 30  # the DAG runs the "as of a run" picker offers
_SPARK_JOB_TYPES = {"APPLICATION", "SQL_JOB", "RDD_JOB", "JOB"}


# the members of a job's and a dataset's facets the page's graph reads (jsontext.field_reader: the rest is not decoded)
_job_type_facet = field_reader("jobType")
_table_facets = field_reader("symlinks", "catalog")


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


def graph(queries: LineageQueries, as_of: str | None = None) -> dict:
    """Every job and dataset as a node, every lineage edge; a task sits inside its DAG, a Spark job is marked.

    ``as_of`` (ISO-8601 with its offset): the graph as it was then, by the same rule as ``GET /api/v1/lineage?asOf=``
    (``queries.walks.as_of_edges``: each job as the version of its latest run started by then, datasets first seen by
    then), with each job's state and each dataset's version of then. ``runs`` lists the newest DAG runs (the page's
    "as of a run" picker) in both forms."""
    as_of = parse_instant(as_of) if as_of is not None else None
    with queries.store.engine.connect() as conn:
        nodes = [Node(**row._mapping) for row in conn.execute(select(nodes_table))]
        if as_of is None:
            edges = conn.execute(select(edges_table.c.source, edges_table.c.target)).all()
        else:
            edges_then, latest_then = as_of_edges(conn, as_of)
            edges = list(edges_then)
            seen = {
                row.node_id
                for table in (jobs_table, datasets_table)
                for row in conn.execute(
                    select(table.c.node_id).where(or_(table.c.created_at.is_(None), table.c.created_at <= as_of))
                )
            }
            nodes = [node for node in nodes if node.id in seen]
        # the jobs read once, for their level, state and the picker's DAGs: a year of updates leaves PostgreSQL's
        # table of 1,200 jobs 37 MB of pages (each transaction rewrites its jobs' rows), and each read is all of them
        j = jobs_table.c
        jobs = conn.execute(select(j.id, j.node_id, j.name, j.facets, j.latest_run_id)).all()
        job_facets = {row.node_id: _job_type_facet(row.facets or "{}") for row in jobs}
        dataset_info = {
            row.node_id: row
            for row in conn.execute(
                select(datasets_table.c.node_id, datasets_table.c.facets, dataset_versions_table.c.version).outerjoin(
                    dataset_versions_table, dataset_versions_table.c.id == datasets_table.c.current_version_id
                )
            )
        }
        if as_of is None:
            latest_state = _latest_states(conn, {row.latest_run_id: row.node_id for row in jobs if row.latest_run_id})
        else:
            latest_state = _states_then(conn, latest_then, as_of)
            dataset_info = _versions_then(conn, dataset_info, as_of)
        picker = _recent_dag_runs(
            conn, {row.id: row.name for row in jobs if _job_level(job_facets[row.node_id]) == "dag"}
        )
    blocked = blocked_tables(queries.store, as_of)
    keys = {node.id: node.key for node in nodes}
    dag_keys = {
        node.name: node.key for node in nodes if node.kind == "job" and _job_level(job_facets.get(node.id, {})) == "dag"
    }
    out = []
    for node in sorted(nodes, key=lambda n: n.key):
        if node.kind == "job":
            out.append(_graph_job(node, job_facets.get(node.id, {}), latest_state.get(node.id), dag_keys))
        else:
            out.append(_graph_dataset(node, dataset_info.get(node.id), blocked))
    return {
        "asOf": as_of,
        "nodes": out,
        "edges": sorted(
            ({"source": keys[s], "target": keys[t]} for s, t in edges if s in keys and t in keys),
            key=lambda edge: (edge["source"], edge["target"]),
        ),
        "runs": picker,
    }


def _graph_item(node: Node) -> dict:
    return {
        "id": node.key,
        "kind": node.kind,
        "label": short_label(node),
        "fullName": node.label,
        "namespace": node.namespace,
        "name": node.name,
    }


def _graph_job(node: Node, facets: dict, state: str | None, dag_keys: dict[str, str]) -> dict:
    item = _graph_item(node)
    item["level"] = _job_level(facets)
    item["state"] = state
    dag_name = node.name.split(".", 1)[0]
    if item["level"] == "task" and dag_name in dag_keys:
        item["parent"] = dag_keys[dag_name]
        item["label"] = node.name.split(".", 1)[1]  # the task id: its DAG's box carries the DAG id
    return item


def _graph_dataset(node: Node, info, blocked: dict[str, dict]) -> dict:
    item = _graph_item(node)
    facets = _table_facets(info.facets or "{}") if info else {}
    item["level"] = "table" if (facets.get("symlinks") or facets.get("catalog")) else "file"
    item["version"] = info.version if info else None
    span = blocked_of(node, blocked)
    if span is not None:  # its newest audit kept the data on a branch: waiting for review
        item["blocked"] = blocked_summary(span)
    return item


_STATES = {"START": "RUNNING", "RUNNING": "RUNNING", "COMPLETE": "COMPLETED", "FAIL": "FAILED", "ABORT": "ABORTED"}


class _Info:
    def __init__(self, facets, version):
        self.facets, self.version = facets, version


def _states_then(conn, latest_then: dict[int, tuple], as_of: str) -> dict[int, str | None]:
    """Each job's state as of then: its latest run started by then, in the last state it reported by then."""
    e = events_table
    run_job = {run_id: job_node for job_node, (_, run_id) in latest_then.items()}
    states: dict[int, str] = {}
    for chunk in chunks(list(run_job)):
        for run_id, event_type, _time in conn.execute(
            select(e.c.run_id, e.c.event_type, e.c.event_time)
            .where(e.c.run_id.in_(chunk), e.c.event_time <= as_of, e.c.event_type.in_(list(_STATES)))
            .order_by(e.c.event_time, e.c.id)
        ):
            states[run_job[run_id]] = _STATES[event_type]  # the last one reported by then
    return states


def _versions_then(conn, dataset_info: dict, as_of: str) -> dict:
    """Each dataset's facets with its version of then: the latest version first reported by then."""
    dv = dataset_versions_table
    latest: dict[int, tuple[str, int, str]] = {}
    for node_id, created, version_id, version in conn.execute(
        select(datasets_table.c.node_id, dv.c.created_at, dv.c.id, dv.c.version)
        .join(dv, dv.c.dataset_id == datasets_table.c.id)
        .where(dv.c.created_at <= as_of)
    ):
        if node_id not in latest or (created or "", version_id) > latest[node_id][:2]:
            latest[node_id] = (created or "", version_id, version)
    return {
        node_id: _Info(info.facets, latest[node_id][2] if node_id in latest else None)
        for node_id, info in dataset_info.items()
    }


def _latest_states(conn, job_of_run: dict[str, int]) -> dict[int, str]:
    """job node -> the state of its latest run (``job_of_run``: latest run id -> its job's node), by the runs' key."""
    r = runs_table.c
    return {
        job_of_run[row.id]: row.state
        for chunk in chunks(sorted(job_of_run))
        for row in conn.execute(select(r.id, r.state).where(r.id.in_(chunk)))
    }


def _recent_dag_runs(conn, dag_jobs: dict[int, str], limit: int = PICKER_RUNS) -> list[dict]:
    """The newest DAG runs: what "as of a run" offers. The runs of the DAG-level jobs (``dag_jobs``: id -> name),
    each job's newest in its index's order (``newest_runs``): every run without a parent sorted by its start, the
    answer read 166,224 runs of a year's store (2.6 s of each draw of the page) to find 30."""
    r = runs_table
    newest = newest_runs(conn, r.c.job_id, dag_jobs, limit, [r.c.parent_run_id.is_(None)])
    return [
        {"id": run.id, "job": dag_jobs[run.job_id], "state": run.state, "startedAt": run.start, "endedAt": run.ended_at}
        for run in newest
    ]


def provenance(queries: LineageQueries, run_ref: str, depth: int = DEFAULT_DEPTH) -> dict:
    """A run's provenance for the page: ``GET /api/v1/runlineage/upstream``'s answer (run -> dataset version read ->
    run that wrote it -> ...) with each input's table name, how its version was found and when it was written. A run
    that read nothing itself (a DAG run) lists its child runs (its tasks) to follow instead."""
    result = queries.run_lineage(run_ref, depth)
    root = result["runs"][0]
    children: list[dict] = []
    if not root["inputs"]:
        with queries.store.engine.connect() as conn:
            r, j = runs_table, jobs_table
            children = [
                {"id": row.id, "job": row.name, "state": row.state, "startedAt": row.started_at}
                for row in conn.execute(
                    select(r.c.id, r.c.state, r.c.started_at, j.c.name)
                    .join(j, j.c.id == r.c.job_id)
                    .where(r.c.parent_run_id == root["run"]["id"])
                    .order_by(j.c.name, r.c.started_at)
                )
            ]
    completeness = None
    if children:  # a DAG run: is its lineage complete, or what is missing (include/lineage/queries/completeness.py)
        (completeness,) = queries.completeness(dag_run=root["run"]["id"], torn=torn_event_files())
    return {
        "runId": root["run"]["id"],
        "completeness": completeness,
        "runs": [
            {
                "job": entry["job"],
                "run": entry["run"],
                "depth": entry["depth"],
                "parameters": entry["parameters"],
                "inputs": entry["inputs"],
            }
            for entry in result["runs"]
        ],
        "children": children,
    }


DATA_QUALITY_FACETS = ("dataQualityAssertions", "dataQualityMetrics")
RECENT_PROBLEMS = 20


def torn_event_files() -> list[tuple[str, bytes]]:
    """The Spark event files kept as torn (``include/lineage/emit/spark_forwarder.py``), for a DAG run's
    completeness: (name, content)."""
    from include.lineage.emit.spark_forwarder import outbox_dir

    folder = outbox_dir(settings.Paths.current())
    return [(path.name, path.read_bytes()) for path in sorted(folder.glob("*.torn"))] if folder.exists() else []


def _writer_statistics(queries: LineageQueries, run_id: str, namespace: str, name: str) -> dict:
    """The output statistics and data-quality facets a run reported for one dataset."""
    found: dict = {}
    for lineage_event in iter_events(queries.store, run_id):
        for output in lineage_event.get("outputs") or []:
            if output.get("namespace") == namespace and output.get("name") == name:
                stats = (output.get("outputFacets") or {}).get("outputStatistics")
                if stats:
                    found["outputStatistics"] = {k: v for k, v in stats.items() if not k.startswith("_")}
                for facet in DATA_QUALITY_FACETS:
                    if (output.get("facets") or {}).get(facet):
                        found[facet] = {k: v for k, v in output["facets"][facet].items() if not k.startswith("_")}
    return found


def _reader_data_quality(queries: LineageQueries, dataset_id: int, namespace: str, name: str) -> dict:
    """The data-quality input facets the latest run that read one dataset reported for it: where OpenLineage puts an
    input's checks and metrics (a landed file's row checks), not among the dataset's own facets."""
    rd, r = run_datasets_table, runs_table
    with queries.store.engine.connect() as conn:
        run_id = conn.execute(
            select(rd.c.run_id)
            .join(r, r.c.id == rd.c.run_id)
            .where(rd.c.dataset_id == dataset_id, rd.c.direction == "input")
            .order_by(r.c.first_event_time.desc(), r.c.id.desc())
            .limit(1)
        ).scalar()
    found: dict = {}
    for lineage_event in iter_events(queries.store, run_id) if run_id else ():
        for dataset in lineage_event.get("inputs") or []:
            if dataset.get("namespace") == namespace and dataset.get("name") == name:
                for facet in DATA_QUALITY_FACETS:
                    value = (dataset.get("inputFacets") or {}).get(facet)
                    if isinstance(value, dict):
                        found[facet] = {k: v for k, v in value.items() if not k.startswith("_")}
    return found


def node_detail(queries: LineageQueries, ref: str, blocked: dict[str, dict] | None = None) -> dict:
    """Schema, versions (Iceberg snapshots) with the statistics of the run that wrote each, data-quality results and
    recent runs with their state (of a job: its runs; of a dataset: the runs that wrote it); of a table waiting for
    review, its blocked audit. ``blocked``: ``blocked_tables(store)`` when the caller has it already."""
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
        detail.update(
            _dataset_detail(queries, conn, node, blocked) if node.kind == "dataset" else _job_detail(conn, node)
        )
        # the facets the spec refused in its events: kept with the events as received, named, not read
        detail["invalidFacets"] = facet_problems(conn, node, RECENT_PROBLEMS)
    return detail


def _dataset_detail(queries: LineageQueries, conn, node: Node, blocked: dict[str, dict] | None) -> dict:
    row = conn.execute(select(datasets_table).where(datasets_table.c.node_id == node.id)).first()
    facets = loads(row.facets or "{}")
    dv = dataset_versions_table
    versions = conn.execute(
        select(dv.c.version, dv.c.created_at, dv.c.created_by_run_id, dv.c.id)
        .where(dv.c.dataset_id == row.id)
        .order_by(dv.c.created_at.desc(), dv.c.id.desc())
        .limit(RECENT_VERSIONS)
    ).all()
    current = conn.execute(select(dv.c.version).where(dv.c.id == row.current_version_id)).scalar()
    detail: dict = {
        "schema": [
            {"name": f.get("name"), "type": f.get("type")} for f in (facets.get("schema") or {}).get("fields") or []
        ],
        "currentVersion": current,
        "versions": [
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
        ],
    }
    detail["dataQuality"] = {
        k: {x: y for x, y in facets[k].items() if not x.startswith("_")} for k in DATA_QUALITY_FACETS if facets.get(k)
    } or _reader_data_quality(queries, row.id, node.namespace, node.name)
    detail["statistics"] = next((v["outputStatistics"] for v in detail["versions"] if v.get("outputStatistics")), None)
    detail["storage"] = {
        k: (facets.get(k) or {}).get(f) for k, f in (("catalog", "framework"), ("storage", "storageLayer"))
    }
    detail["symlinks"] = [i.get("name") for i in (facets.get("symlinks") or {}).get("identifiers") or []]
    span = blocked_of(node, blocked_tables(queries.store) if blocked is None else blocked)
    detail["blocked"] = _review(span) if span is not None else None
    detail["lineageColumns"] = sorted(
        set(conn.execute(select(column_edges_table.c.field).where(column_edges_table.c.dataset_id == row.id)).scalars())
    )
    return detail


def _review(span: dict) -> dict:
    """A blocked audit as the node's panel shows it, with the commands that decide its branch."""
    return {
        **blocked_summary(span),
        "table": span["table"],
        "warnings": span["warnings"],
        "publish": f'pipeline publish --table {span["table"]} --branch {span["branch"]} --reason "..."',
        "discard": f"pipeline discard --table {span['table']} --branch {span['branch']}",
    }


def _job_detail(conn, node: Node) -> dict:
    row = conn.execute(select(jobs_table).where(jobs_table.c.node_id == node.id)).first()
    facets = loads(row.facets or "{}")
    return {
        "level": _job_level(facets),
        "sourceCodeLocation": (facets.get("sourceCodeLocation") or {}).get("url"),
        "documentation": (facets.get("documentation") or {}).get("description"),
        "runCount": conn.execute(
            select(func.count()).select_from(runs_table).where(runs_table.c.job_id == row.id)
        ).scalar(),
    }


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


def as_of_data(queries: LineageQueries) -> dict:
    """What the exported page needs to draw the graph as of any time exactly as ``graph(queries, as_of)`` does
    (``lineage.js`` applies the same rule): each job and dataset's first-seen time, each run's job, start, inputs,
    outputs and reported states in order, each dataset's versions with when they were first reported."""
    r, j, rd, d, dv, e, n = (
        runs_table,
        jobs_table,
        run_datasets_table,
        datasets_table,
        dataset_versions_table,
        events_table,
        nodes_table,
    )
    started = run_start()
    with queries.store.engine.connect() as conn:
        keys = dict(conn.execute(select(n.c.id, n.c.key)).all())
        created = {
            keys[node_id]: when
            for table in (j, d)
            for node_id, when in conn.execute(select(table.c.node_id, table.c.created_at))
            if node_id in keys
        }
        runs: dict[str, dict] = {}
        for run_id, job_node, start in conn.execute(
            select(r.c.id, j.c.node_id, started).join(j, j.c.id == r.c.job_id).order_by(r.c.id)
        ):
            runs[run_id] = {"job": keys.get(job_node), "start": start, "inputs": [], "outputs": [], "states": []}
        for run_id, direction, dataset_node in conn.execute(
            select(rd.c.run_id, rd.c.direction, d.c.node_id)
            .join(d, d.c.id == rd.c.dataset_id)
            .order_by(rd.c.run_id, d.c.node_id)
        ):
            if run_id in runs and dataset_node in keys:
                runs[run_id]["inputs" if direction == "input" else "outputs"].append(keys[dataset_node])
        for run_id, event_type, time in conn.execute(
            select(e.c.run_id, e.c.event_type, e.c.event_time)
            .where(e.c.event_type.in_(list(_STATES)))
            .order_by(e.c.event_time, e.c.id)
        ):
            if run_id in runs:
                runs[run_id]["states"].append([time, _STATES[event_type]])
        versions: dict[str, list] = {}
        for dataset_node, when, _version_id, version in conn.execute(
            select(d.c.node_id, dv.c.created_at, dv.c.id, dv.c.version)
            .join(dv, dv.c.dataset_id == d.c.id)
            .where(dv.c.created_at.is_not(None))
            .order_by(dv.c.created_at, dv.c.id)
        ):
            if dataset_node in keys:
                versions.setdefault(keys[dataset_node], []).append([when, version])
    dataset_nodes = _dataset_nodes(queries)
    blocked = [
        [node.key, span["since"], span["until"], blocked_summary(span)]
        for span in blocked_spans(queries.store)
        for node in dataset_nodes
        if blocked_of(node, {span["label"]: span})
    ]
    return {
        "created": created,
        "runs": [[run_id, *info.values()] for run_id, info in runs.items() if info["job"] is not None],
        "versions": versions,
        "blocked": blocked,  # [dataset, since, until (null: still waiting), what was blocked]
    }


def _dataset_nodes(queries: LineageQueries) -> list[Node]:
    with queries.store.engine.connect() as conn:
        return [
            Node(**row._mapping) for row in conn.execute(select(nodes_table).where(nodes_table.c.kind == "dataset"))
        ]


def bundle(queries: LineageQueries) -> dict:
    """Everything the page can ask for, answered in advance: what the exported single-file page carries."""
    whole = graph(queries)
    details, impacts, column_views, diffs, provenances = {}, {}, {}, {}, {}
    run_ids = [run["id"] for run in whole["runs"]]
    blocked = blocked_tables(queries.store)
    for item in whole["nodes"]:
        details[item["id"]] = detail = node_detail(queries, item["id"], blocked)
        impacts[item["id"]] = impact(queries, item["id"])
        if item["kind"] == "dataset":
            for column in detail["lineageColumns"]:
                ref = f"{item['id']}.{column}"
                column_views[ref] = columns(queries, ref)
        else:
            compared = [run["id"] for run in detail["runs"][:DIFFED_RUNS]]
            for index, newer in enumerate(compared):
                for older in compared[index + 1 :]:
                    diffs[f"{older}|{newer}"] = diff(queries, older, newer)
            if item.get("level") != "spark":
                run_ids += [run["id"] for run in detail["runs"]]
    for run_id in dict.fromkeys(run_ids):
        provenances[run_id] = answer = provenance(queries, run_id)
        for child in answer["children"]:
            if child["id"] not in provenances and child["id"] not in run_ids:
                provenances[child["id"]] = provenance(queries, child["id"])
    return {
        "graph": whole,
        "details": details,
        "impact": impacts,
        "columns": column_views,
        "diffs": diffs,
        "provenance": provenances,
        "asOf": as_of_data(queries),
    }
