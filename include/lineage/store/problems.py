"""What the spec refused in a stored event, filed under the node it belongs to (``lineage_facet_problems``): a
dataset's facet under the dataset, a run's or a job's facet and the event's own fields under the job (a DatasetEvent's:
its dataset), so that a node's invalid facets are one indexed read (``queries/problems.py``)."""

from __future__ import annotations


def problem_rows(
    problems: list[dict],
    event_id: int,
    run_id: str | None,
    time: str,
    owner: tuple[int, int] | None,
    inputs: list[tuple[int, int]],
    outputs: list[tuple[int, int]],
) -> list[dict]:
    """The rows of ``problems`` (each ``{"path", "facet", "rule"}``) of the event ``event_id``: one per path (the
    rules of one path joined). ``owner``, ``inputs``, ``outputs``: (row id, node id) of the event's job (or
    dataset) and of its inputs and outputs, in order."""
    rows: dict[str, dict] = {}
    for problem in problems:
        path = problem["path"]
        node = owner[1] if owner else None
        side, _, rest = path.partition("[")
        index = rest[: rest.find("]")]
        if side in ("inputs", "outputs") and index.isdigit():
            datasets = inputs if side == "inputs" else outputs
            node = datasets[int(index)][1] if int(index) < len(datasets) else node
        if node is None:
            continue
        row = rows.setdefault(path, {"event_id": event_id, "node_id": node, "run_id": run_id, "path": path[:1024]})
        row["facet"] = problem.get("facet")
        row["rule"] = f"{row['rule']}; {problem['rule']}" if "rule" in row else problem["rule"]
        row["event_time"] = time
    return list(rows.values())
