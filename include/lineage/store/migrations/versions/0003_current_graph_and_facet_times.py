"""The graph of current job versions, the history of every edge, facets merged per name.

- ``lineage_runs.first_event_time``: a run's earliest event time, its time among its job's runs;
- ``lineage_jobs.latest_run_id``/``latest_run_time``/``current_version_id`` recomputed: the latest run is the one of
  the greatest (first_event_time, run id), the current version is its version (a job without runs: the time of its
  latest runless job events);
- ``lineage_edges`` and ``lineage_closure`` hold the graph of the current versions only: the inputs and outputs of
  each job's latest run (a job without runs: of its latest runless job events). Recomputed here; when that differs
  from the stored edges, the edges are replaced and the closure rebuilt;
- ``lineage_edge_history(source, target, first_seen, last_seen)``: every edge any event showed, with the event times
  it was first and last seen at, filled from the stored events;
- ``facet_times`` on runs, jobs and datasets: per facet name, the (event time, event id) of the event it came from;
  facets are merged again from the stored events, per name: the latest event time wins, then the later-ingested
  event (greater id), as Marquez reads its ``*_facets`` tables back.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24

Written out by hand, never from the live ``schema.metadata``: a revision keeps describing its own moment.
"""

from __future__ import annotations

import json
from collections import deque

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lineage_edge_history",
        sa.Column("source", sa.Integer, nullable=False),
        sa.Column("target", sa.Integer, nullable=False),
        sa.Column("first_seen", sa.String(32), nullable=False),
        sa.Column("last_seen", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("source", "target"),
    )
    op.create_index("ix_lineage_edge_history_target", "lineage_edge_history", ["target", "source"])
    with op.batch_alter_table("lineage_datasets") as batch_op:
        batch_op.add_column(sa.Column("facet_times", sa.Text))
    with op.batch_alter_table("lineage_jobs") as batch_op:
        batch_op.add_column(sa.Column("facet_times", sa.Text))
    with op.batch_alter_table("lineage_runs") as batch_op:
        batch_op.add_column(sa.Column("first_event_time", sa.String(32)))
        batch_op.add_column(sa.Column("facet_times", sa.Text))
    _fill(op.get_bind())


def downgrade() -> None:
    with op.batch_alter_table("lineage_runs") as batch_op:
        batch_op.drop_column("facet_times")
        batch_op.drop_column("first_event_time")
    with op.batch_alter_table("lineage_jobs") as batch_op:
        batch_op.drop_column("facet_times")
    with op.batch_alter_table("lineage_datasets") as batch_op:
        batch_op.drop_column("facet_times")
    op.drop_index("ix_lineage_edge_history_target", table_name="lineage_edge_history")
    op.drop_table("lineage_edge_history")


# ----------------------------------------------------------------------------- the data, from the stored events
def _fill(conn) -> None:
    q = sa.text
    nodes = {
        (kind, ns, name): node
        for node, kind, ns, name in conn.execute(q("SELECT id, kind, namespace, name FROM lineage_nodes"))
    }
    jobs = {
        (ns, name): (job, node)
        for job, node, ns, name in conn.execute(q("SELECT id, node_id, namespace, name FROM lineage_jobs"))
    }
    datasets = {(ns, name): ds for ds, ns, name in conn.execute(q("SELECT id, namespace, name FROM lineage_datasets"))}
    runs = set(conn.execute(q("SELECT id FROM lineage_runs")).scalars())

    facets: dict[tuple[str, object], dict[str, tuple[tuple[str, int], object]]] = {}  # (table, id) -> name -> winner
    history: dict[tuple[int, int], list[str]] = {}
    runless: dict[int, tuple[str, set[tuple[int, int]]]] = {}  # job -> latest time of runless events, their edges

    def merge(entity: tuple[str, object], new, stamp: tuple[str, int]) -> None:
        won = facets.setdefault(entity, {})
        for name, value in (new or {}).items():
            if name not in won or stamp > won[name][0]:
                won[name] = (stamp, value)

    events = conn.execute(q("SELECT id, run_id, event_time, payload FROM lineage_events ORDER BY id"))
    for event_id, run_id, time, payload in events:
        event, stamp = json.loads(payload), (time, event_id)
        job = event.get("job") or {}
        job_row = jobs.get((job.get("namespace"), job.get("name")))
        if run_id and run_id in runs:
            merge(("lineage_runs", run_id), (event.get("run") or {}).get("facets"), stamp)
        if job_row:
            merge(("lineage_jobs", job_row[0]), job.get("facets"), stamp)
        sides = {"input": event.get("inputs") or [], "output": event.get("outputs") or []}
        for dataset in (
            sides["input"] + sides["output"] + ([event["dataset"]] if isinstance(event.get("dataset"), dict) else [])
        ):
            dataset_id = datasets.get((dataset.get("namespace"), dataset.get("name")))
            if dataset_id is not None:
                merge(("lineage_datasets", dataset_id), dataset.get("facets"), stamp)
        if not job_row:
            continue
        edges = [(nodes[("dataset", d["namespace"], d["name"])], job_row[1]) for d in sides["input"]]
        edges += [(job_row[1], nodes[("dataset", d["namespace"], d["name"])]) for d in sides["output"]]
        for edge in edges:
            seen = history.setdefault(edge, [time, time])
            seen[0], seen[1] = min(seen[0], time), max(seen[1], time)
        if not run_id:
            latest = runless.get(job_row[0])
            if latest is None or time > latest[0]:
                runless[job_row[0]] = (time, set(edges))
            elif time == latest[0]:
                latest[1].update(edges)

    for (table, entity), won in facets.items():
        if won:
            merged = json.dumps({name: value for name, (_, value) in won.items()}, sort_keys=True)
            times = json.dumps({name: list(stamp) for name, (stamp, _) in won.items()}, sort_keys=True)
            conn.execute(
                q(f"UPDATE {table} SET facets = :facets, facet_times = :times WHERE id = :id"),
                {"facets": merged, "times": times, "id": entity},
            )
    if history:
        conn.execute(
            q("INSERT INTO lineage_edge_history (source, target, first_seen, last_seen) VALUES (:s, :t, :f, :l)"),
            [{"s": s, "t": t, "f": f, "l": last} for (s, t), (f, last) in history.items()],
        )

    conn.execute(
        q(
            "UPDATE lineage_runs SET first_event_time = "
            "(SELECT min(e.event_time) FROM lineage_events e WHERE e.run_id = lineage_runs.id)"
        )
    )
    latest_runs: dict[int, tuple[str, str, int | None]] = {}
    for run_id, job_id, first, version in conn.execute(
        q("SELECT id, job_id, first_event_time, job_version_id FROM lineage_runs")
    ):
        if job_id not in latest_runs or (first, run_id) > latest_runs[job_id][:2]:
            latest_runs[job_id] = (first, run_id, version)
    graph: set[tuple[int, int]] = set()
    for job_id, node in jobs.values():
        if job_id in latest_runs:
            first, run_id, version = latest_runs[job_id]
            conn.execute(
                q(
                    "UPDATE lineage_jobs SET latest_run_id = :run, latest_run_time = :time, "
                    "current_version_id = :version WHERE id = :id"
                ),
                {"run": run_id, "time": first, "version": version, "id": job_id},
            )
            for direction, dataset_node in conn.execute(
                q(
                    "SELECT rd.direction, d.node_id FROM lineage_run_datasets rd "
                    "JOIN lineage_datasets d ON d.id = rd.dataset_id WHERE rd.run_id = :run"
                ),
                {"run": run_id},
            ):
                graph.add((dataset_node, node) if direction == "input" else (node, dataset_node))
        elif job_id in runless:
            time, edges = runless[job_id]
            conn.execute(
                q("UPDATE lineage_jobs SET latest_run_id = NULL, latest_run_time = :time WHERE id = :id"),
                {"time": time, "id": job_id},
            )
            graph |= edges
    stored = {tuple(edge) for edge in conn.execute(q("SELECT source, target FROM lineage_edges"))}
    if graph != stored:
        _rebuild_graph(conn, graph, list(nodes.values()))


def _rebuild_graph(conn, graph: set[tuple[int, int]], nodes: list[int]) -> None:
    """Replace the edges and rebuild the closure: shortest distances by a breadth-first walk from every node."""
    q = sa.text
    conn.execute(q("DELETE FROM lineage_edges"))
    if graph:
        conn.execute(
            q("INSERT INTO lineage_edges (source, target) VALUES (:s, :t)"),
            [{"s": s, "t": t} for s, t in sorted(graph)],
        )
    successors: dict[int, list[int]] = {}
    for source, target in sorted(graph):
        successors.setdefault(source, []).append(target)
    conn.execute(q("DELETE FROM lineage_closure WHERE ancestor <> descendant"))
    insert = q("INSERT INTO lineage_closure (ancestor, descendant, depth) VALUES (:a, :d, :depth)")
    for start in sorted(nodes):
        distance, queue = {start: 0}, deque([start])
        while queue:
            node = queue.popleft()
            for target in successors.get(node, ()):
                if target not in distance:
                    distance[target] = distance[node] + 1
                    queue.append(target)
        rows = [{"a": start, "d": node, "depth": depth} for node, depth in distance.items() if node != start]
        if rows:
            conn.execute(insert, rows)
