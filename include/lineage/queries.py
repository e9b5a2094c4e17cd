"""Questions asked of the lineage store: where did this come from, who is affected, what changed between two runs.

Every query resolves a node the way a user names it (``namespace:name``, a dataset's table name such as
``nyc_taxi.yellow_rides_hourly_forecast``, a URL, a job name, or Marquez's ``dataset:<ns>:<name>``), answers from
the closure table (one indexed query for all ancestors or descendants) and renders as a readable tree or, for
``--json``, in Marquez's lineage response shape (``{"graph": [{"id", "type", "data", "inEdges", "outEdges"}]}``).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import func, or_, select, text
from sqlalchemy.engine import Connection

from include.lineage.errors import EmptyStoreError, LineageError, UnknownNodeError
from include.lineage.store import LineageStore
from include.lineage.store.schema import (
    aliases_table,
    closure_table,
    column_edges_table,
    dataset_versions_table,
    datasets_table,
    edges_table,
    job_versions_table,
    jobs_table,
    nodes_table,
    run_datasets_table,
    runs_table,
)

DEFAULT_DEPTH = 20  # Marquez's default
_CHUNK = 500


@dataclass(frozen=True)
class Node:
    id: int
    key: str
    kind: str
    namespace: str
    name: str
    label: str


@dataclass
class Subgraph:
    focus: Node
    direction: str  # upstream | downstream | both
    nodes: dict[int, Node]
    depths: dict[int, int]
    edges: list[tuple[int, int]]

    def datasets(self) -> list[Node]:
        return sorted(
            (n for n in self.nodes.values() if n.kind == "dataset" and n.id != self.focus.id),
            key=lambda n: (self.depths[n.id], n.label),
        )

    def jobs(self) -> list[Node]:
        return sorted(
            (n for n in self.nodes.values() if n.kind == "job" and n.id != self.focus.id),
            key=lambda n: (self.depths[n.id], n.label),
        )


# ------------------------------------------------------------------------- the two ways of walking the graph
def closure_upstream(conn: Connection, node_id: int, depth: int = DEFAULT_DEPTH) -> list[tuple[int, int]]:
    """(ancestor, distance) of every ancestor within ``depth`` edges, the node itself at 0: one indexed query."""
    c = closure_table
    return conn.execute(select(c.c.ancestor, c.c.depth).where(c.c.descendant == node_id, c.c.depth <= depth)).all()


def closure_downstream(conn: Connection, node_id: int, depth: int = DEFAULT_DEPTH) -> list[tuple[int, int]]:
    c = closure_table
    return conn.execute(select(c.c.descendant, c.c.depth).where(c.c.ancestor == node_id, c.c.depth <= depth)).all()


_CTE = {
    "upstream": text(
        "WITH RECURSIVE walk(node, depth) AS ("
        " SELECT CAST(:start AS INTEGER), 0"
        " UNION SELECT e.source, w.depth + 1 FROM lineage_edges e JOIN walk w ON e.target = w.node WHERE w.depth < :max_depth)"
        " SELECT node, MIN(depth) FROM walk GROUP BY node"
    ),
    "downstream": text(
        "WITH RECURSIVE walk(node, depth) AS ("
        " SELECT CAST(:start AS INTEGER), 0"
        " UNION SELECT e.target, w.depth + 1 FROM lineage_edges e JOIN walk w ON e.source = w.node WHERE w.depth < :max_depth)"
        " SELECT node, MIN(depth) FROM walk GROUP BY node"
    ),
}


def cte_walk(conn: Connection, node_id: int, direction: str, depth: int = DEFAULT_DEPTH) -> list[tuple[int, int]]:
    """The same answer as the closure table, from a recursive CTE over the edge table (how Marquez walks lineage)."""
    return conn.execute(_CTE[direction], {"start": node_id, "max_depth": depth}).all()


def _chunks(values: Iterable, size: int = _CHUNK):
    values = list(values)
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _short(value: str | None, width: int = 12) -> str:
    return "—" if value is None else (value if len(value) <= width else value[:width] + "…")


class LineageQueries:
    def __init__(self, store: LineageStore):
        self.store = store

    # ------------------------------------------------------------------------- names
    def resolve(self, ref: str, conn: Connection | None = None) -> Node:
        """The node a user means by ``ref``; UnknownNodeError with close names, or EmptyStoreError."""
        with self.store.engine.connect() as own:
            conn = conn or own
            n, a = nodes_table, aliases_table
            rows = conn.execute(select(n).where(n.c.key == ref)).all()
            if not rows:
                rows = conn.execute(select(n).join(a, a.c.node_id == n.c.id).where(a.c.alias == ref).distinct()).all()
            if len(rows) == 1:
                return Node(**rows[0]._mapping)
            if len(rows) > 1:
                raise LineageError(
                    f"{ref!r} names {len(rows)} nodes; use one of: " + ", ".join(sorted(r.key for r in rows))
                )
            if conn.execute(select(n.c.id).limit(1)).first() is None:
                raise EmptyStoreError(self.store.url)
            raise UnknownNodeError(ref, self._suggest(conn, ref))

    def _suggest(self, conn: Connection, ref: str, limit: int = 5) -> list[str]:
        a = aliases_table
        last = ref.replace(":", "/").rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[-1]
        like = [
            r
            for r in conn.execute(
                select(a.c.alias)
                .where(func.lower(a.c.alias).like(f"%{last.lower()}%"))
                .where(~a.c.alias.like("dataset:%"), ~a.c.alias.like("job:%"))
                .limit(200)
            ).scalars()
        ]
        candidates = like or list(
            conn.execute(select(a.c.alias).where(~a.c.alias.like("dataset:%"), ~a.c.alias.like("job:%"))).scalars()
        )
        close = difflib.get_close_matches(ref, candidates, n=limit, cutoff=0.5)
        for alias in sorted(like, key=len):
            if len(close) >= limit:
                break
            if alias not in close:
                close.append(alias)
        return close

    def _nodes(self, conn: Connection, ids: Iterable[int]) -> dict[int, Node]:
        out = {}
        for chunk in _chunks(ids):
            for row in conn.execute(select(nodes_table).where(nodes_table.c.id.in_(chunk))):
                out[row.id] = Node(**row._mapping)
        return out

    def _edges_among(self, conn: Connection, ids: set[int]) -> list[tuple[int, int]]:
        edges = []
        for chunk in _chunks(ids):
            for source, target in conn.execute(
                select(edges_table.c.source, edges_table.c.target).where(edges_table.c.target.in_(chunk))
            ):
                if source in ids:
                    edges.append((source, target))
        return sorted(edges)

    # ------------------------------------------------------------------------- graph queries
    def upstream(self, ref: str, depth: int = DEFAULT_DEPTH) -> Subgraph:
        return self._walk(ref, "upstream", depth)

    def downstream(self, ref: str, depth: int = DEFAULT_DEPTH) -> Subgraph:
        return self._walk(ref, "downstream", depth)

    def neighbourhood(self, ref: str, depth: int = DEFAULT_DEPTH) -> Subgraph:
        """Upstream and downstream together, as Marquez's ``GET /api/v1/lineage`` returns them."""
        return self._walk(ref, "both", depth)

    def _walk(self, ref: str, direction: str, depth: int) -> Subgraph:
        with self.store.engine.connect() as conn:
            focus = self.resolve(ref, conn)
            depths: dict[int, int] = {}
            if direction in ("upstream", "both"):
                depths.update(closure_upstream(conn, focus.id, depth))
            if direction in ("downstream", "both"):
                for node_id, distance in closure_downstream(conn, focus.id, depth):
                    depths[node_id] = min(distance, depths.get(node_id, distance))
            depths[focus.id] = 0
            nodes = self._nodes(conn, depths)
            return Subgraph(focus, direction, nodes, depths, self._edges_among(conn, set(depths)))

    def marquez_graph(self, subgraph: Subgraph) -> dict:
        """Marquez's lineage response: ``{"graph": [{"id", "type", "data", "inEdges", "outEdges"}]}``."""
        in_edges: dict[int, list] = {}
        out_edges: dict[int, list] = {}
        for source, target in subgraph.edges:
            edge = {"origin": subgraph.nodes[source].key, "destination": subgraph.nodes[target].key}
            out_edges.setdefault(source, []).append(edge)
            in_edges.setdefault(target, []).append(edge)
        with self.store.engine.connect() as conn:
            data = self._node_data(conn, list(subgraph.nodes.values()))
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

    def _node_data(self, conn: Connection, nodes: list[Node]) -> dict[int, dict]:
        data: dict[int, dict] = {}
        dataset_ids = [n.id for n in nodes if n.kind == "dataset"]
        job_ids = [n.id for n in nodes if n.kind == "job"]
        d, dv = datasets_table, dataset_versions_table
        for chunk in _chunks(dataset_ids):
            rows = conn.execute(
                select(d, dv.c.version, dv.c.schema)
                .outerjoin(dv, dv.c.id == d.c.current_version_id)
                .where(d.c.node_id.in_(chunk))
            ).all()
            for row in rows:
                facets = json.loads(row.facets or "{}")
                schema = (
                    json.loads(row.schema)
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
        j, r, jv = jobs_table, runs_table, job_versions_table
        for chunk in _chunks(job_ids):
            rows = conn.execute(
                select(j, jv.c.version).outerjoin(jv, jv.c.id == j.c.current_version_id).where(j.c.node_id.in_(chunk))
            ).all()
            latest_ids = [row.latest_run_id for row in rows if row.latest_run_id]
            latest = (
                {run.id: run for run in conn.execute(select(r).where(r.c.id.in_(latest_ids)))} if latest_ids else {}
            )
            io: dict[int, dict[str, list]] = {}
            for source, target, ns, name in conn.execute(
                select(edges_table.c.source, edges_table.c.target, nodes_table.c.namespace, nodes_table.c.name)
                .join(
                    nodes_table, or_(nodes_table.c.id == edges_table.c.source, nodes_table.c.id == edges_table.c.target)
                )
                .where(
                    or_(edges_table.c.source.in_(chunk), edges_table.c.target.in_(chunk)),
                    nodes_table.c.kind == "dataset",
                )
            ):
                if target in chunk:
                    io.setdefault(target, {"inputs": [], "outputs": []})["inputs"].append(
                        {"namespace": ns, "name": name}
                    )
                if source in chunk:
                    io.setdefault(source, {"inputs": [], "outputs": []})["outputs"].append(
                        {"namespace": ns, "name": name}
                    )
            for row in rows:
                facets = json.loads(row.facets or "{}")
                run = latest.get(row.latest_run_id)
                data[row.node_id] = {
                    "id": {"namespace": row.namespace, "name": row.name},
                    "type": "BATCH",
                    "name": row.name,
                    "simpleName": row.name.rsplit(".", 1)[-1],
                    "parentJobName": row.name.rsplit(".", 1)[0] if "." in row.name else None,
                    "createdAt": row.created_at,
                    "updatedAt": row.updated_at,
                    "namespace": row.namespace,
                    "inputs": sorted(
                        io.get(row.node_id, {}).get("inputs", []), key=lambda x: (x["namespace"], x["name"])
                    ),
                    "outputs": sorted(
                        io.get(row.node_id, {}).get("outputs", []), key=lambda x: (x["namespace"], x["name"])
                    ),
                    "location": (facets.get("sourceCodeLocation") or {}).get("url"),
                    "description": (facets.get("documentation") or {}).get("description"),
                    "currentVersion": row.version,
                    "latestRun": _marquez_run(run) if run is not None else None,
                }
        return data

    # ------------------------------------------------------------------------- impact
    def impact(self, ref: str, depth: int = DEFAULT_DEPTH) -> dict:
        """Every dataset, job and run downstream of a node: what to recompute, re-run or roll back."""
        sub = self.downstream(ref, depth)
        dataset_node_ids = [n.id for n in sub.nodes.values() if n.kind == "dataset"]
        job_node_ids = [n.id for n in sub.jobs()]
        runs: list[dict] = []
        with self.store.engine.connect() as conn:
            if job_node_ids:
                d, rd, r, j = datasets_table, run_datasets_table, runs_table, jobs_table
                dataset_ids = [
                    row
                    for chunk in _chunks(dataset_node_ids)
                    for row in conn.execute(select(d.c.id).where(d.c.node_id.in_(chunk))).scalars()
                ]
                seen = set()
                for chunk in _chunks(job_node_ids):
                    query = (
                        select(r, j.c.namespace, j.c.name)
                        .join(j, j.c.id == r.c.job_id)
                        .join(rd, rd.c.run_id == r.c.id)
                        .where(
                            j.c.node_id.in_(chunk), rd.c.direction == "input", rd.c.dataset_id.in_(dataset_ids or [-1])
                        )
                    )
                    for row in conn.execute(query):
                        if row.id not in seen:
                            seen.add(row.id)
                            runs.append(_run_summary(row))
        runs.sort(key=lambda run: run["startedAt"] or run["endedAt"] or "", reverse=True)
        return {"subgraph": sub, "runs": runs}

    def impact_of_run(self, run_ref: str) -> dict:
        """What a run (and its child runs) wrote, every later run that read it, transitively, and what lies
        downstream of it in the graph."""
        with self.store.engine.connect() as conn:
            run = self._resolve_run(conn, run_ref)
            r, rd, d, dv, j = runs_table, run_datasets_table, datasets_table, dataset_versions_table, jobs_table
            family = self._descendant_runs(conn, [run.id])
            touched_runs = dict.fromkeys(family)
            written: dict[tuple[int, int | None], str] = {}
            frontier = list(family)
            since = run.started_at or run.state_time or ""
            while frontier:
                outputs = []
                for chunk in _chunks(frontier):
                    outputs += conn.execute(
                        select(rd.c.run_id, rd.c.dataset_id, rd.c.dataset_version_id).where(
                            rd.c.run_id.in_(chunk), rd.c.direction == "output"
                        )
                    ).all()
                frontier = []
                for writer, dataset_id, version_id in outputs:
                    if (dataset_id, version_id) in written:
                        continue
                    written[(dataset_id, version_id)] = writer
                    readers = (
                        select(rd.c.run_id)
                        .join(r, r.c.id == rd.c.run_id)
                        .where(rd.c.dataset_id == dataset_id, rd.c.direction == "input")
                    )
                    if version_id is not None:
                        readers = readers.where(rd.c.dataset_version_id == version_id)
                    else:
                        readers = readers.where(func.coalesce(r.c.started_at, r.c.state_time) >= since)
                    for reader in conn.execute(readers).scalars():
                        if reader not in touched_runs:
                            touched_runs[reader] = None
                            frontier.append(reader)
            run_rows = []
            for chunk in _chunks(touched_runs):
                run_rows += conn.execute(
                    select(r, j.c.namespace, j.c.name).join(j, j.c.id == r.c.job_id).where(r.c.id.in_(chunk))
                ).all()
            versions = []
            for (dataset_id, version_id), writer in written.items():
                row = conn.execute(
                    select(d.c.namespace, d.c.name, d.c.node_id, dv.c.version)
                    .select_from(d)
                    .outerjoin(dv, dv.c.id == version_id)
                    .where(d.c.id == dataset_id)
                ).first()
                versions.append(
                    {
                        "namespace": row.namespace,
                        "name": row.name,
                        "nodeId": row.node_id,
                        "version": row.version,
                        "writtenBy": writer,
                    }
                )
            node_ids: dict[int, int] = {}
            for version in versions:
                for node_id, distance in closure_downstream(conn, version["nodeId"]):
                    node_ids[node_id] = min(distance, node_ids.get(node_id, distance))
            nodes = self._nodes(conn, node_ids)
        labels = {n.id: n.label for n in nodes.values()}
        for version in versions:
            version["label"] = labels.get(version.pop("nodeId"))
        focus = Node(-1, f"run:{run.id}", "run", "", run.id, run.id)
        sub = Subgraph(focus, "downstream", nodes, node_ids, [])
        with self.store.engine.connect() as conn:
            sub.edges = self._edges_among(conn, set(node_ids))
        summaries = sorted(
            (_run_summary(row) for row in run_rows),
            key=lambda s: (s["id"] != run.id, s["startedAt"] or s["endedAt"] or ""),
        )
        return {
            "run": _run_summary(next(row for row in run_rows if row.id == run.id)),
            "runs": summaries,
            "datasetVersions": sorted(versions, key=lambda v: (v["label"] or "", v["version"] or "")),
            "subgraph": sub,
        }

    # ------------------------------------------------------------------------- runs
    def _resolve_run(self, conn: Connection, ref: str):
        r = runs_table
        row = conn.execute(select(r).where(r.c.id == ref)).first()
        if row is not None:
            return row
        rows = conn.execute(select(r).where(r.c.id.like(f"{ref}%")).limit(3)).all() if len(ref) >= 4 else []
        if len(rows) == 1:
            return rows[0]
        if len(rows) > 1:
            raise LineageError(f"run id prefix {ref!r} is ambiguous: " + ", ".join(row.id for row in rows) + ", …")
        if conn.execute(select(r.c.id).limit(1)).first() is None:
            raise EmptyStoreError(self.store.url)
        recent = conn.execute(select(r.c.id).order_by(r.c.state_time.desc()).limit(200)).scalars().all()
        raise UnknownNodeError(ref, difflib.get_close_matches(ref, recent, n=3, cutoff=0.6), what="run")

    def _descendant_runs(self, conn: Connection, run_ids: list[str]) -> list[str]:
        found = list(run_ids)
        frontier = list(run_ids)
        while frontier:
            children = []
            for chunk in _chunks(frontier):
                children += (
                    conn.execute(select(runs_table.c.id).where(runs_table.c.parent_run_id.in_(chunk))).scalars().all()
                )
            frontier = [c for c in children if c not in found]
            found += frontier
        return found

    def runs(self, ref: str, limit: int = 20) -> dict:
        """Runs of a job, newest first (for a dataset: the runs that wrote it)."""
        with self.store.engine.connect() as conn:
            node = self.resolve(ref, conn)
            r, j, rd, d = runs_table, jobs_table, run_datasets_table, datasets_table
            query = select(r, j.c.namespace, j.c.name).join(j, j.c.id == r.c.job_id)
            if node.kind == "job":
                query = query.where(j.c.node_id == node.id)
            else:
                query = (
                    query.join(rd, rd.c.run_id == r.c.id)
                    .join(d, d.c.id == rd.c.dataset_id)
                    .where(d.c.node_id == node.id, rd.c.direction == "output")
                )
            rows = conn.execute(query.order_by(func.coalesce(r.c.started_at, r.c.state_time).desc()).limit(limit)).all()
            return {"node": node, "runs": [self._run_details(conn, row) for row in rows]}

    def run_details(self, run_ref: str) -> dict:
        with self.store.engine.connect() as conn:
            row = self._resolve_run(conn, run_ref)
            job = conn.execute(
                select(jobs_table.c.namespace, jobs_table.c.name).where(jobs_table.c.id == row.job_id)
            ).first()
            merged = dict(row._mapping) | {"namespace": job.namespace, "name": job.name}
            return self._run_details(conn, _Row(merged))

    def _run_details(self, conn: Connection, row) -> dict:
        rd, d, dv, n, jv = run_datasets_table, datasets_table, dataset_versions_table, nodes_table, job_versions_table
        io = conn.execute(
            select(rd.c.direction, d.c.namespace, d.c.name, n.c.label, dv.c.version, dv.c.schema, dv.c.schema_producer)
            .join(d, d.c.id == rd.c.dataset_id)
            .join(n, n.c.id == d.c.node_id)
            .outerjoin(dv, dv.c.id == rd.c.dataset_version_id)
            .where(rd.c.run_id == row.id)
        ).all()
        version = (
            conn.execute(select(jv.c.version).where(jv.c.id == row.job_version_id)).scalar()
            if row.job_version_id
            else None
        )
        facets = json.loads(row.facets or "{}")
        children = conn.execute(
            select(func.count()).select_from(runs_table).where(runs_table.c.parent_run_id == row.id)
        ).scalar()

        def side(direction):
            return [
                {
                    "namespace": ns,
                    "name": name,
                    "label": label,
                    "version": ver,
                    "schema": json.loads(schema) if schema else None,
                    "schemaProducer": producer,
                }
                for dirn, ns, name, label, ver, schema, producer in sorted(io, key=lambda x: x[3])
                if dirn == direction
            ]

        return {
            **_run_summary(row),
            "jobVersion": version,
            "codeHash": row.code_hash,
            "codeVersion": row.code_version,
            "parentRunId": row.parent_run_id,
            "rootRunId": row.root_run_id,
            "errorMessage": row.error_message,
            "nominalStartTime": row.nominal_start,
            "nominalEndTime": row.nominal_end,
            "parameters": _parameters(facets),
            "inputs": side("input"),
            "outputs": side("output"),
            "childRuns": children,
        }

    # ------------------------------------------------------------------------- diff
    def diff(self, run_a: str, run_b: str) -> dict:
        """Two runs side by side: job and code version, parameters, state, error, input and output versions, schema
        changes. A run without datasets of its own (a DAG run) is compared through its child runs."""
        with self.store.engine.connect() as conn:
            a, b = (self._resolve_run(conn, ref) for ref in (run_a, run_b))
            details = []
            for row in (a, b):
                job = conn.execute(
                    select(jobs_table.c.namespace, jobs_table.c.name).where(jobs_table.c.id == row.job_id)
                ).first()
                info = self._run_details(
                    conn, _Row(dict(row._mapping) | {"namespace": job.namespace, "name": job.name})
                )
                info["tasks"] = {}
                if not info["inputs"] and not info["outputs"]:  # a DAG run: its task runs (not their Spark jobs)
                    children = conn.execute(
                        select(runs_table, jobs_table.c.namespace, jobs_table.c.name)
                        .join(jobs_table, jobs_table.c.id == runs_table.c.job_id)
                        .where(runs_table.c.parent_run_id == row.id)
                    ).all()
                    for child in children:
                        child_info = self._run_details(conn, child)
                        info["tasks"][child_info["job"]["name"]] = child_info
                        info["inputs"] += child_info["inputs"]
                        info["outputs"] += child_info["outputs"]
                details.append(info)
        first, second = details
        changes: dict = {}
        for label, keyname in (
            ("job", "job"),
            ("jobVersion", "jobVersion"),
            ("codeHash", "codeHash"),
            ("codeVersion", "codeVersion"),
            ("state", "state"),
            ("errorMessage", "errorMessage"),
        ):
            if first[keyname] != second[keyname]:
                changes[label] = [first[keyname], second[keyname]]
        params = {
            k: [first["parameters"].get(k), second["parameters"].get(k)]
            for k in sorted(set(first["parameters"]) | set(second["parameters"]))
            if first["parameters"].get(k) != second["parameters"].get(k)
        }
        if params:
            changes["parameters"] = params
        schema_changes: dict = {}
        for direction in ("inputs", "outputs"):
            changes[direction] = _compare_datasets(first[direction], second[direction], schema_changes)
        if schema_changes:
            changes["schema"] = schema_changes
        tasks = {}
        for name in sorted(set(first["tasks"]) | set(second["tasks"])):
            x, y = first["tasks"].get(name), second["tasks"].get(name)
            if x is None or y is None or x["jobVersion"] != y["jobVersion"] or x["state"] != y["state"]:
                tasks[name] = {
                    "jobVersion": [x and x["jobVersion"], y and y["jobVersion"]],
                    "codeHash": [x and x["codeHash"], y and y["codeHash"]],
                    "state": [x and x["state"], y and y["state"]],
                }
        if tasks:
            changes["tasks"] = tasks
        for info in details:
            info["tasks"] = sorted(info["tasks"])
        return {"runs": details, "changes": changes}

    # ------------------------------------------------------------------------- columns
    def columns(self, ref: str, depth: int = DEFAULT_DEPTH) -> dict:
        """Column-level upstream of ``DATASET.COLUMN`` from the columnLineage facets."""
        with self.store.engine.connect() as conn:
            dataset_node, column = self._resolve_column(conn, ref)
            d, ce = datasets_table, column_edges_table
            dataset_id = conn.execute(select(d.c.id).where(d.c.node_id == dataset_node.id)).scalar()
            start = (dataset_id, column)
            levels = {start: 0}
            edges: list[tuple[tuple[int, str], tuple[int, str], list]] = []
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
            info = {}
            for chunk in _chunks({ds for ds, _ in levels}):
                for row in conn.execute(
                    select(d.c.id, d.c.namespace, d.c.name, d.c.facets, nodes_table.c.label)
                    .join(nodes_table, nodes_table.c.id == d.c.node_id)
                    .where(d.c.id.in_(chunk))
                ):
                    facets = json.loads(row.facets or "{}")
                    types = {f.get("name"): f.get("type") for f in (facets.get("schema") or {}).get("fields") or []}
                    info[row.id] = (row.namespace, row.name, row.label, types)
        return {"focus": start, "levels": levels, "edges": edges, "datasets": info}

    def _resolve_column(self, conn: Connection, ref: str) -> tuple[Node, str]:
        if "." not in ref:
            raise LineageError(
                f"{ref!r}: give a column as DATASET.COLUMN, e.g. nyc_taxi.yellow_rides_hourly_forecast.forecasted_total_rides"
            )
        dataset_ref, column = ref.rsplit(".", 1)
        node = self.resolve(dataset_ref, conn)
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

    def column_graph(self, result: dict) -> dict:
        """Marquez's column-lineage response shape (``DATASET_FIELD`` nodes)."""
        datasets = result["datasets"]

        def node_id(key):
            ns, name, _, _ = datasets[key[0]]
            return f"datasetField:{ns}:{name}:{key[1]}"

        in_edges: dict = {}
        out_edges: dict = {}
        inputs: dict = {}
        for source, target, transformations in result["edges"]:
            edge = {"origin": node_id(source), "destination": node_id(target)}
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
        for key in sorted(result["levels"], key=lambda k: (result["levels"][k], node_id(k))):
            ns, name, _, types = datasets[key[0]]
            graph.append(
                {
                    "id": node_id(key),
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


class _Row:
    """A mapping with attribute access, like a SQLAlchemy row."""

    def __init__(self, values: dict):
        self.__dict__.update(values)
        self._mapping = values


def _marquez_run(row) -> dict:
    return {
        "id": row.id,
        "state": row.state,
        "startedAt": row.started_at,
        "endedAt": row.ended_at,
        "nominalStartTime": row.nominal_start,
        "nominalEndTime": row.nominal_end,
    }


def _run_summary(row) -> dict:
    return {
        "id": row.id,
        "job": {"namespace": row.namespace, "name": row.name},
        "state": row.state,
        "startedAt": row.started_at,
        "endedAt": row.ended_at,
    }


def _parameters(facets: dict) -> dict:
    """What a run was asked to do: the DAG run's conf and logical date, a Spark job's application arguments."""
    params: dict = {}
    for facet in ("airflow", "airflowDagRun"):
        dag_run = (facets.get(facet) or {}).get("dagRun") or {}
        for key, value in (dag_run.get("conf") or {}).items():
            params[f"conf.{key}"] = value
        if dag_run.get("logical_date"):
            params["logical_date"] = dag_run["logical_date"]
    nominal = facets.get("nominalTime") or {}
    if nominal.get("nominalStartTime"):
        params["nominal_start"] = nominal["nominalStartTime"]
    return params


def _compare_datasets(first: list[dict], second: list[dict], schema_changes: dict) -> dict:
    def by_key(items):
        out: dict = {}
        for item in items:
            out[(item["namespace"], item["name"])] = item
        return out

    a, b = by_key(first), by_key(second)
    result: dict = {"added": [], "removed": [], "changed": [], "same": []}
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x is None:
            result["added"].append(
                {"dataset": y["label"], "namespace": key[0], "name": key[1], "version": y["version"]}
            )
        elif y is None:
            result["removed"].append(
                {"dataset": x["label"], "namespace": key[0], "name": key[1], "version": x["version"]}
            )
        elif x["version"] and y["version"] and x["version"] != y["version"]:  # unknown on one side is no change
            result["changed"].append(
                {"dataset": x["label"], "namespace": key[0], "name": key[1], "from": x["version"], "to": y["version"]}
            )
        else:
            result["same"].append(
                {"dataset": x["label"], "namespace": key[0], "name": key[1], "version": x["version"] or y["version"]}
            )
        comparable = x is not None and y is not None and x["schema"] and y["schema"]
        if comparable and x["schemaProducer"] == y["schemaProducer"] and x["schema"] != y["schema"]:
            old, new = dict(map(tuple, x["schema"])), dict(map(tuple, y["schema"]))
            schema_changes[x["label"]] = {
                "added": [f"{c} {t}" for c, t in new.items() if c not in old],
                "removed": [f"{c} {t}" for c, t in old.items() if c not in new],
                "changed": [f"{c} {old[c]} -> {new[c]}" for c in new if c in old and old[c] != new[c]],
            }
    return result


# ----------------------------------------------------------------------------- rendering
