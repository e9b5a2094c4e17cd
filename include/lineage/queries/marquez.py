"""``GET /api/v1/lineage`` as Marquez 0.51 answers it (``LineageService.lineage``): the start job of the node, then
every job whose *current version* shares a dataset with the jobs reached so far, from a replay of the stored events
in Marquez's terms (``model.MarquezModel``), whatever the closure table holds; beyond Marquez, the same of the graph
at an instant or of every edge ever seen."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlalchemy.engine import Connection

from include.lineage.queries.model import MarquezModel, Ref, marquez_walk
from include.lineage.queries.names import check_existed, node_id, nodes_by_ref, parse_node_id, refs_of, resolve
from include.lineage.queries.shape import node_data
from include.lineage.queries.walks import as_of_edges, history_edges

JobIo = dict[Ref, tuple[frozenset[Ref], frozenset[Ref]]]  # job -> (inputs, outputs)
EdgeTimes = dict[tuple[str, str], tuple]  # (origin id, destination id) -> (first seen, last seen)


def marquez_lineage(
    conn: Connection,
    model: MarquezModel,
    ref: str,
    depth: int,
    as_of: str | None,
    all_history: bool,
    store_url: str,
) -> dict:
    """The answer of ``LineageQueries.marquez_lineage``, ``as_of`` already parsed."""
    kind, focus = marquez_focus(conn, ref, model, store_url)
    times = None
    if as_of is None and not all_history:
        job_io = model.job_io()
        start = model.start_job(focus) if kind == "dataset" else focus
    else:
        job_io, start_of, times = marquez_io(conn, model, as_of, all_history)
        focus_node = nodes_by_ref(conn, {(kind, *focus)}).get((kind, *focus))
        if as_of is not None and focus_node is not None:
            check_existed(conn, focus_node, as_of)
        start = start_of(focus) if kind == "dataset" else focus
    if start is None:  # a dataset no job version reads or writes: the dataset alone
        return marquez_orphan(conn, focus)
    jobs = marquez_walk(job_io, start, depth)
    return marquez_graph_of(conn, jobs, job_io, focus if kind == "dataset" else None, times)


def marquez_focus(conn: Connection, ref: str, model: MarquezModel, store_url: str) -> tuple[str, Ref]:
    """(kind, (namespace, name)) of the node: a dataset by its primary name, whichever of its names ``ref`` used
    (Marquez finds a dataset by any of its symlinks: ``datasets_view.dataset_symlinks``)."""
    parsed = parse_node_id(ref)
    if parsed:
        kind, namespace, name = parsed
        if kind == "dataset" and (namespace, name) in model.registry:
            return kind, model.registry[(namespace, name)]
        if kind == "job" and (namespace, name) in model.jobs:
            return kind, (namespace, name)
    node = resolve(conn, ref, store_url)
    if node.kind == "dataset":
        return "dataset", model.registry.get((node.namespace, node.name), (node.namespace, node.name))
    return "job", (node.namespace, node.name)


def marquez_io(
    conn: Connection, model: MarquezModel, as_of: str | None, all_history: bool
) -> tuple[JobIo, Callable[[Ref], Ref | None], EdgeTimes | None]:
    """Job -> (inputs, outputs) of the graph at ``as_of`` or of every edge ever seen, in Marquez's terms (datasets by
    primary name), the start-job rule of that graph and, for history, the edges' times by node id."""
    if all_history:
        edges = history_edges(conn, as_of)
        rank: dict[int, tuple] = {}
    else:
        edges, rank = as_of_edges(conn, as_of)
    refs = refs_of(conn, {node for edge in edges for node in edge})
    io = _GraphIo(model, rank, all_history)
    for (source, target), when in edges.items():
        if source in refs and target in refs:
            io.add(refs[source], refs[target], source, target, when)
    return io.job_io(), io.start_of, (io.times if all_history else None)


class _GraphIo:
    """``marquez_io``'s answer, edge by edge."""

    def __init__(self, model: MarquezModel, rank: dict[int, tuple], all_history: bool):
        self.model, self.rank, self.all_history = model, rank, all_history
        self.inputs: dict[Ref, set[Ref]] = {}
        self.outputs: dict[Ref, set[Ref]] = {}
        self.best: dict[tuple[str, Ref], tuple] = {}  # (direction, dataset) -> (rank, job)
        self.times: EdgeTimes = {}

    def add(self, source_ref: tuple, target_ref: tuple, source: int, target: int, when: tuple | None) -> None:
        if source_ref[0] == "dataset":
            direction, dataset, job, job_node = "input", source_ref[1:], target_ref[1:], target
        else:
            direction, dataset, job, job_node = "output", target_ref[1:], source_ref[1:], source
        dataset = self.model.registry.get(dataset, dataset)
        (self.inputs if direction == "input" else self.outputs).setdefault(job, set()).add(dataset)
        order = (when[1] or "", when[0] or "") if self.all_history else self.rank.get(job_node, ("", ""))
        if (direction, dataset) not in self.best or (order, job) > self.best[(direction, dataset)]:
            self.best[(direction, dataset)] = (order, job)
        if self.all_history:
            job_id, dataset_id = node_id("job", *job), node_id("dataset", *dataset)
            pair = (dataset_id, job_id) if direction == "input" else (job_id, dataset_id)
            first, last = self.times.get(pair, (None, None))
            self.times[pair] = (_earliest(first, when[0]), _latest(last, when[1]))

    def job_io(self) -> JobIo:
        return {
            job: (frozenset(self.inputs.get(job, ())), frozenset(self.outputs.get(job, ())))
            for job in set(self.inputs) | set(self.outputs)
        }

    def start_of(self, dataset: Ref) -> Ref | None:
        found = self.best.get(("output", dataset)) or self.best.get(("input", dataset))
        return found[1] if found else None


def _earliest(a: str | None, b: str | None) -> str | None:
    return min(x for x in (a, b) if x is not None) if a is not None or b is not None else None


def _latest(a: str | None, b: str | None) -> str | None:
    return max(x for x in (a, b) if x is not None) if a is not None or b is not None else None


def marquez_orphan(conn: Connection, dataset: Ref) -> dict:
    """``LineageService.toLineageWithOrphanDataset``: the dataset alone, no edges."""
    node = nodes_by_ref(conn, {("dataset", *dataset)}).get(("dataset", *dataset))
    data = node_data(conn, [node]).get(node.id) if node else None
    return {
        "graph": [{"id": node_id("dataset", *dataset), "type": "DATASET", "data": data, "inEdges": [], "outEdges": []}]
    }


def marquez_graph_of(
    conn: Connection,
    jobs: set[Ref],
    job_io: JobIo,
    focus_dataset: Ref | None,
    times: EdgeTimes | None = None,
) -> dict:
    """``LineageService.toLineage``: a node per job reached (in-edges from its current inputs, out-edges to its
    current outputs) and per dataset of theirs (in-edges from the reached jobs writing it, out-edges to those
    reading it); nodes sorted by id, edges by (origin, destination). A dataset node no reached job touches any
    more gives the dataset alone ("no longer share lineage")."""
    empty: tuple[frozenset[Ref], frozenset[Ref]] = (frozenset(), frozenset())
    io = {job: job_io.get(job, empty) for job in jobs}
    writers: dict[Ref, set[Ref]] = {}
    readers: dict[Ref, set[Ref]] = {}
    for job, (ins, outs) in io.items():
        for dataset in ins:
            readers.setdefault(dataset, set()).add(job)
        for dataset in outs:
            writers.setdefault(dataset, set()).add(job)
    datasets = set(readers) | set(writers)
    if focus_dataset is not None and focus_dataset not in datasets:
        return marquez_orphan(conn, focus_dataset)
    refs = {("job", *job) for job in jobs} | {("dataset", *dataset) for dataset in datasets}
    nodes = nodes_by_ref(conn, refs)
    # each job's data lists the inputs and outputs of its current version here, not the closure's edges: given to
    # node_data, which then does not read those edges for nothing
    job_data_io = {
        nodes[("job", *job)].id: {
            side: [{"namespace": ns, "name": name} for ns, name in sorted(refs)]
            for side, refs in (("inputs", ins), ("outputs", outs))
        }
        for job, (ins, outs) in io.items()
        if ("job", *job) in nodes
    }
    data = node_data(conn, list(nodes.values()), job_data_io)
    # each node's id spelled once (a dataset read by hundreds of the reached jobs is an edge of each of them)
    job_ids = {job: node_id("job", *job) for job in jobs}
    dataset_ids = {dataset: node_id("dataset", *dataset) for dataset in datasets}
    graph = []
    for job in jobs:
        node = nodes.get(("job", *job))
        ins, outs = io[job]
        item = data.get(node.id) if node else None
        graph.append(_graph_node("JOB", job_ids[job], item, _ids(dataset_ids, ins), _ids(dataset_ids, outs), times))
    for dataset in datasets:
        node = nodes.get(("dataset", *dataset))
        ins, outs = _ids(job_ids, writers.get(dataset, ())), _ids(job_ids, readers.get(dataset, ()))
        graph.append(
            _graph_node("DATASET", dataset_ids[dataset], data.get(node.id) if node else None, ins, outs, times)
        )
    graph.sort(key=lambda n: n["id"])
    return {"graph": graph}


def _graph_node(
    kind: str, this: str, data: dict | None, origins: list[str], destinations: list[str], times: EdgeTimes | None
) -> dict:
    """One node of the response, ``this`` its id: edges from each of ``origins`` and to each of ``destinations``."""
    return {
        "id": this,
        "type": kind,
        "data": data,
        "inEdges": [_edge(origin, this, times) for origin in origins],
        "outEdges": [_edge(this, destination, times) for destination in destinations],
    }


def _ids(ids: dict[Ref, str], refs: Iterable[Ref]) -> list[str]:
    return sorted([ids[ref] for ref in refs])


def _edge(origin: str, destination: str, times: EdgeTimes | None) -> dict:
    item = {"origin": origin, "destination": destination}
    if times is not None:
        item["firstSeen"], item["lastSeen"] = times.get((origin, destination), (None, None))
    return item
