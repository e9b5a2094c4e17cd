"""``upstream``/``downstream``/``neighbourhood``: the walks of the three graphs.

The current graph is walked through the closure table (one indexed query for all ancestors or descendants); with
``as_of`` the graph as it was at an instant (each job as the version of its latest run started by then, datasets first
seen by then), from the node outward; with ``all_history`` every edge ever seen, with when.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import bindparam, func, inspect, select, text
from sqlalchemy.engine import Connection

from include.lineage.queries.names import Node, Subgraph, check_existed, edges_among, nodes_of
from include.lineage.queries.sql import chunks, closure_downstream, closure_upstream, fetch_rows, run_start
from include.lineage.store.schema import datasets_table, edges_table, jobs_table, run_datasets_table, runs_table


def walk(
    conn: Connection, focus: Node, direction: str, depth: int, as_of: str | None = None, all_history: bool = False
) -> Subgraph:
    """The subgraph around ``focus`` (``direction``: upstream, downstream or both) within ``depth`` edges, of the
    current graph, of the graph at ``as_of`` (already parsed), or of every edge ever seen (``all_history``)."""
    if as_of is None and not all_history:
        return _current_walk(conn, focus, direction, depth)
    if as_of is not None:
        check_existed(conn, focus, as_of)
    if as_of is not None and not all_history and direction != "both":
        depths, among = as_of_walk(conn, focus, direction, depth, as_of)
        return Subgraph(focus, direction, nodes_of(conn, depths), depths, among, as_of=as_of)
    edges = history_edges(conn, as_of) if all_history else as_of_edges(conn, as_of)[0]
    depths = {}
    if direction in ("upstream", "both"):
        depths.update(directed_depths(edges, focus.id, False, depth))
    if direction in ("downstream", "both"):
        for node, distance in directed_depths(edges, focus.id, True, depth).items():
            depths[node] = min(distance, depths.get(node, distance))
    nodes = nodes_of(conn, depths)
    among = sorted(edge for edge in edges if edge[0] in depths and edge[1] in depths)
    times = {edge: edges[edge] for edge in among} if all_history else None
    return Subgraph(focus, direction, nodes, depths, among, as_of=as_of, edge_times=times)


def _current_walk(conn: Connection, focus: Node, direction: str, depth: int) -> Subgraph:
    if direction != "both":
        depths, nodes, among = closure_subgraph(conn, focus, direction, depth)
        return Subgraph(focus, direction, nodes, depths, among)
    depths = dict(closure_upstream(conn, focus.id, depth))
    for node, distance in closure_downstream(conn, focus.id, depth):
        depths[node] = min(distance, depths.get(node, distance))
    depths[focus.id] = 0
    return Subgraph(focus, direction, nodes_of(conn, depths), depths, edges_among(conn, set(depths)))


def directed_depths(edges: Iterable[tuple[int, int]], start: int, forward: bool, depth: int) -> dict[int, int]:
    """Shortest distance in edges from ``start`` along (forward) or against the edges, at most ``depth``."""
    adjacent: dict[int, list[int]] = {}
    for source, target in edges:
        if forward:
            adjacent.setdefault(source, []).append(target)
        else:
            adjacent.setdefault(target, []).append(source)
    return _breadth_first(adjacent, start, depth)


def _breadth_first(following: dict[int, list[int]], start: int, depth: int) -> dict[int, int]:
    """node -> its distance from ``start`` through ``following``, at most ``depth``."""
    depths = {start: 0}
    frontier = [start]
    for distance in range(1, depth + 1):
        next_frontier = []
        for near in frontier:
            for node in following.get(near, ()):
                if node not in depths:
                    depths[node] = distance
                    next_frontier.append(node)
        frontier = next_frontier
        if not frontier:
            break
    return depths


def closure_subgraph(
    conn: Connection, focus: Node, direction: str, depth: int
) -> tuple[dict[int, int], dict[int, Node], list[tuple[int, int]]]:
    """The current graph's upstream (downstream) of ``focus`` from the closure table: the nodes with their
    distances, and the edges among them, in two indexed queries joined to the closure (no list of ids sent)."""
    near, far = ("descendant", "ancestor") if direction == "upstream" else ("ancestor", "descendant")
    params = {"focus": focus.id, "depth": depth}
    depths: dict[int, int] = {focus.id: 0}
    nodes: dict[int, Node] = {focus.id: focus}
    for node, key, kind, namespace, name, label, distance in fetch_rows(
        conn,
        "SELECT n.id, n.key, n.kind, n.namespace, n.name, n.label, c.depth FROM lineage_closure c"
        f" JOIN lineage_nodes n ON n.id = c.{far} WHERE c.{near} = :focus AND c.depth <= :depth",
        params,
    ):
        depths[node] = distance
        nodes[node] = Node(node, key, kind, namespace, name, label)
    # The edges reaching each node (upstream: into it; downstream: out of it) whose other end is in the answer too.
    end = "target" if direction == "upstream" else "source"
    among = sorted(
        (source, target)
        for source, target in fetch_rows(  # CROSS JOIN: SQLite keeps this order (closure rows, then their edges)
            conn,
            "SELECT e.source, e.target FROM lineage_closure a CROSS JOIN lineage_edges e"
            f" WHERE a.{near} = :focus AND a.depth <= :depth AND e.{end} = a.{far}",
            params,
        )
        if (source if direction == "upstream" else target) in depths
    )
    return depths, nodes, among


# ------------------------------------------------------------------------- the graph at an instant, and ever
def as_of_edges(conn: Connection, as_of: str) -> tuple[dict[tuple[int, int], None], dict[int, tuple]]:
    """The graph at ``as_of``: each job as the version of its latest run started at or before it (the run's inputs
    and outputs, which are what its job version records), datasets first seen at or before it. Also returns,
    per job node, (start, run id) of that run."""
    r, rd, d, j = runs_table, run_datasets_table, datasets_table, jobs_table
    started = run_start()
    latest: dict[int, tuple[str, str]] = {}
    for run_id, job_id, time in conn.execute(select(r.c.id, r.c.job_id, started).where(started <= as_of)):
        if job_id not in latest or (time, run_id) > latest[job_id]:
            latest[job_id] = (time, run_id)
    job_nodes = dict(conn.execute(select(j.c.id, j.c.node_id)).all())
    run_job = {run_id: job_nodes[job_id] for job_id, (_, run_id) in latest.items()}
    edges: dict[tuple[int, int], None] = {}
    for chunk in chunks(run_job):
        for run_id, direction, dataset_node, created in conn.execute(
            select(rd.c.run_id, rd.c.direction, d.c.node_id, d.c.created_at)
            .join(d, d.c.id == rd.c.dataset_id)
            .where(rd.c.run_id.in_(chunk))
        ):
            if created is not None and created > as_of:
                continue
            job_node = run_job[run_id]
            edges[(dataset_node, job_node) if direction == "input" else (job_node, dataset_node)] = None
    return edges, {job_nodes[job_id]: value for job_id, value in latest.items()}


def history_edges(conn: Connection, as_of: str | None = None) -> dict[tuple[int, int], tuple]:
    """Every edge ever seen, (source, target) -> (first seen, last seen): the store's ``lineage_edge_history``
    when it has one, else derived from runs x their datasets x the runs' times (plus the current edges)."""
    if inspect(conn).has_table("lineage_edge_history"):
        rows = conn.execute(text("SELECT source, target, first_seen, last_seen FROM lineage_edge_history")).all()
        found = {(source, target): (first, last) for source, target, first, last in rows}
    else:
        found = _history_edges_of_runs(conn)
    if as_of is not None:
        found = {edge: when for edge, when in found.items() if when[0] is None or when[0] <= as_of}
    return found


def _history_edges_of_runs(conn: Connection) -> dict[tuple[int, int], tuple]:
    """A store older than ``lineage_edge_history``: every edge from the runs' datasets, with the runs' times."""
    r, rd, d, j = runs_table, run_datasets_table, datasets_table, jobs_table
    started = run_start()
    ended = func.coalesce(r.c.ended_at, r.c.state_time, r.c.started_at)
    found = {}
    for direction, dataset_node, job_node, first, last in conn.execute(
        select(rd.c.direction, d.c.node_id, j.c.node_id, func.min(started), func.max(ended))
        .select_from(rd)
        .join(r, r.c.id == rd.c.run_id)
        .join(j, j.c.id == r.c.job_id)
        .join(d, d.c.id == rd.c.dataset_id)
        .group_by(rd.c.direction, d.c.node_id, j.c.node_id)
    ):
        found[(dataset_node, job_node) if direction == "input" else (job_node, dataset_node)] = (first, last)
    for source, target in conn.execute(select(edges_table.c.source, edges_table.c.target)):
        found.setdefault((source, target), (None, None))
    return found


# ------------------------------------------------------------------------- the as-of walk from the node
def as_of_walk(
    conn: Connection, focus: Node, direction: str, depth: int, as_of: str
) -> tuple[dict[int, int], list[tuple[int, int]]]:
    """The upstream or downstream of ``focus`` in the graph at ``as_of`` (the rule of ``as_of_edges``), walked
    from the node level by level with indexed queries instead of building the whole graph of then: per level,
    the jobs that ever wrote (read) the frontier's datasets (``lineage_edge_history``), each job's latest run started
    by then (a seek of ``ix_lineage_runs_job_start``), and that run's datasets first seen by then. Returns (node ->
    distance, the edges of that graph among the nodes).

    On both databases: SQLite's one recursive query (each job's latest run a correlated subquery per edge reached)
    answered a generated store of 3x10^4 events in 17 ms at the median, this walk in 1.2 ms."""
    return _LevelWalk(conn, focus, direction == "upstream", as_of).walk(depth)


# The level-by-level walk's queries, prepared once: building a statement per level cost more than running it.
_RUN_START_SQL = "COALESCE(r.started_at, r.first_event_time, r.state_time)"
# Each job's runs of the latest start by then (one, but for a tie), the latest start found by a seek of
# ix_lineage_runs_job_start: a job's whole history of runs is never read.
_WALK_LATEST_RUNS_OF_JOBS = text(
    f"SELECT r.id, j.node_id FROM lineage_jobs j JOIN lineage_runs r ON r.job_id = j.id AND {_RUN_START_SQL} ="
    " (SELECT MAX(COALESCE(x.started_at, x.first_event_time, x.state_time)) FROM lineage_runs x"
    " WHERE x.job_id = j.id AND COALESCE(x.started_at, x.first_event_time, x.state_time) <= :as_of)"
    " WHERE j.node_id IN :jobs"
).bindparams(bindparam("jobs", expanding=True))
_WALK_DATASET_ROWS = text("SELECT node_id, id, created_at FROM lineage_datasets WHERE node_id IN :nodes").bindparams(
    bindparam("nodes", expanding=True)
)
_WALK_DATASETS_OF_RUNS = text(
    "SELECT rd.run_id, d.node_id, d.created_at FROM lineage_run_datasets rd JOIN lineage_datasets d"
    " ON d.id = rd.dataset_id WHERE rd.run_id IN :runs AND rd.direction = :direction"
).bindparams(bindparam("runs", expanding=True))
# The jobs that ever wrote (read) the datasets, from every edge ever seen (one row per job and dataset, whatever the
# history; the store keeps an edge there while any stored run has it: retention.py): reading them off the runs that
# touched each dataset (all of a hub's) is what made the walk grow with history.
_WALK_JOBS_OF_DATASETS = {
    "upstream": text("SELECT source, target FROM lineage_edge_history WHERE target IN :nodes").bindparams(
        bindparam("nodes", expanding=True)
    ),
    "downstream": text("SELECT target, source FROM lineage_edge_history WHERE source IN :nodes").bindparams(
        bindparam("nodes", expanding=True)
    ),
}
_WALK_ROWS_OF_RUNS = text(
    "SELECT run_id, dataset_id FROM lineage_run_datasets WHERE run_id IN :runs AND direction = :direction"
).bindparams(bindparam("runs", expanding=True))


class _LevelWalk:
    """``as_of_walk``'s state: what it learnt of the nodes met so far, asked of the store once each."""

    def __init__(self, conn: Connection, focus: Node, upstream: bool, as_of: str):
        self.conn, self.focus, self.upstream, self.as_of = conn, focus, upstream, as_of
        self.kinds: dict[int, str] = {focus.id: focus.kind}
        self.latest_run: dict[int, str | None] = {}  # job node -> its latest run started by then
        self.dataset_ids: dict[int, int] = {}  # dataset node -> dataset row id (of datasets first seen by then)

    def walk(self, depth: int) -> tuple[dict[int, int], list[tuple[int, int]]]:
        depths = {self.focus.id: 0}
        edges: set[tuple[int, int]] = set()
        frontier = [self.focus.id]
        level = 0
        while frontier:
            found = self.neighbours(frontier)
            edges.update(found)
            level += 1
            following = []
            for edge in found:
                other_end = edge[0] if self.upstream else edge[1]
                if other_end not in depths and level <= depth:
                    depths[other_end] = level
                    following.append(other_end)
            frontier = following
        among = sorted(edge for edge in edges if edge[0] in depths and edge[1] in depths)
        return depths, among

    def neighbours(self, nodes: list[int]) -> list[tuple[int, int]]:
        """The edges of the graph then that reach ``nodes`` (upstream: ending at them; downstream: leaving them)."""
        jobs = [n for n in nodes if self.kinds[n] == "job"]
        datasets = [n for n in nodes if self.kinds[n] == "dataset"]
        return self._edges_of_jobs(jobs) + self._edges_of_datasets(datasets)

    def _edges_of_jobs(self, jobs: list[int]) -> list[tuple[int, int]]:
        """Each job's edges then: the datasets its latest run read (wrote), first seen by then."""
        found = []
        self._latest_runs(jobs)
        runs_of = {self.latest_run[n]: n for n in jobs if self.latest_run[n] is not None}
        side = "input" if self.upstream else "output"
        for chunk in chunks(runs_of):
            for run_id, dataset_node, created in self.conn.execute(
                _WALK_DATASETS_OF_RUNS, {"runs": chunk, "direction": side}
            ):
                if created is None or created <= self.as_of:
                    self.kinds[dataset_node] = "dataset"
                    job_node = runs_of[run_id]
                    found.append((dataset_node, job_node) if self.upstream else (job_node, dataset_node))
        return found

    def _edges_of_datasets(self, datasets: list[int]) -> list[tuple[int, int]]:
        """Each dataset's edges then: the jobs whose latest run wrote (read) it."""
        found = []
        self._row_ids(datasets)
        by_row = {self.dataset_ids[n]: n for n in datasets if n in self.dataset_ids}
        other = "output" if self.upstream else "input"
        candidates: dict[int, set[int]] = {}  # job node -> datasets of the frontier it ever wrote (read)
        statement = _WALK_JOBS_OF_DATASETS["upstream" if self.upstream else "downstream"]
        for chunk in chunks(by_row.values()):
            for job_node, dataset_node in self.conn.execute(statement, {"nodes": chunk}):
                candidates.setdefault(job_node, set()).add(dataset_node)
        self._latest_runs(list(candidates))
        current = {self.latest_run[n]: n for n in candidates if self.latest_run[n] is not None}
        for chunk in chunks(current):
            for run_id, dataset_row in self.conn.execute(_WALK_ROWS_OF_RUNS, {"runs": chunk, "direction": other}):
                job_node = current[run_id]
                dataset_node = by_row.get(dataset_row)
                if dataset_node is not None and dataset_node in candidates[job_node]:
                    self.kinds[job_node] = "job"
                    found.append((job_node, dataset_node) if self.upstream else (dataset_node, job_node))
        return found

    def _latest_runs(self, job_nodes: list[int]) -> None:
        wanted = [node for node in job_nodes if node not in self.latest_run]
        for chunk in chunks(wanted):
            best: dict[int, str] = {}
            for run_id, job_node in self.conn.execute(_WALK_LATEST_RUNS_OF_JOBS, {"jobs": chunk, "as_of": self.as_of}):
                if job_node not in best or run_id > best[job_node]:  # of runs that started at once, the greatest id
                    best[job_node] = run_id
            for node in chunk:
                self.latest_run[node] = best.get(node)

    def _row_ids(self, dataset_nodes: list[int]) -> None:
        wanted = [node for node in dataset_nodes if node not in self.dataset_ids]
        for chunk in chunks(wanted):
            for node, row_id, created in self.conn.execute(_WALK_DATASET_ROWS, {"nodes": chunk}):
                if created is None or created <= self.as_of:  # a dataset first seen later has no edges then
                    self.dataset_ids[node] = row_id
