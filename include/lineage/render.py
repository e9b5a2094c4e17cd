"""Answers of the lineage store as people read them: trees, impact lists, run tables, diffs, columns, and the
JSON shapes of the CLI's ``--json``; plus the demo's two example questions. Builds on ``queries``, never the reverse."""

from __future__ import annotations

import json
from collections.abc import Callable

from include.core import settings
from include.lineage.events import discover_event_files
from include.lineage.queries import LineageQueries, Node, Subgraph
from include.lineage.store import LineageStore, default_store_url


def _short(value: str | None, width: int = 12) -> str:
    """A version or run id cut to ``width`` for a line of text: its first characters tell it apart, a whole one would
    break the columns."""
    return "—" if value is None else (value if len(value) <= width else value[:width] + "…")


def _node_line(node: Node, depth: int | None = None) -> str:
    kind = "job" if node.kind == "job" else "dataset"
    is_table_name = node.kind == "dataset" and node.label not in (
        node.name,
        f"{node.namespace}:{node.name}",
        node.namespace + node.name,
    )
    where = f"  <{node.namespace}:{node.name}>" if is_table_name else ""
    return f"{node.label}  [{kind}{'' if depth is None else f', {depth} hop' + ('s' if depth != 1 else '')}]{where}"


def render_tree(sub: Subgraph) -> str:
    """The subgraph as an indented tree from the focus node; a node reached twice is expanded once."""
    if sub.direction == "downstream":
        children: dict[int, list[int]] = {}
        for source, target in sub.edges:
            children.setdefault(source, []).append(target)
    else:
        children = {}
        for source, target in sub.edges:
            children.setdefault(target, []).append(source)
    arrow = "↓ downstream" if sub.direction == "downstream" else "↑ upstream"
    when = f"; as of {sub.as_of}" if sub.as_of else ""
    when += "; every edge ever seen" if sub.edge_times is not None else ""
    lines = [f"{_node_line(sub.focus)}   ({arrow}: {len(sub.datasets())} datasets, {len(sub.jobs())} jobs{when})"]
    expanded = {sub.focus.id}

    def seen_between(parent: int, kid: int) -> str:
        if sub.edge_times is None:
            return ""
        edge = (parent, kid) if sub.direction == "downstream" else (kid, parent)
        first, last = sub.edge_times.get(edge, (None, None))
        return f"  [seen {first or '?'} … {last or '?'}]"

    def walk(node_id: int, prefix: str) -> None:
        kids = sorted(set(children.get(node_id, [])) - {node_id}, key=lambda k: (sub.nodes[k].kind, sub.nodes[k].label))
        for index, kid in enumerate(kids):
            last = index == len(kids) - 1
            seen = kid in expanded
            lines.append(
                f"{prefix}{'└── ' if last else '├── '}{_node_line(sub.nodes[kid])}{seen_between(node_id, kid)}"
                f"{'  (see above)' if seen else ''}"
            )
            if not seen:
                expanded.add(kid)
                walk(kid, prefix + ("    " if last else "│   "))

    walk(sub.focus.id, "")
    if sub.direction == "upstream":
        lines.append("origins: " + (", ".join(n.label for n in origins(sub)) or "(none)"))
    return "\n".join(lines)


def origins(sub: Subgraph) -> list[Node]:
    """The upstream datasets nothing else feeds: where the focus node's data comes from."""
    fed = {target for source, target in sub.edges if source != target}
    return sorted((n for n in sub.datasets() if n.id not in fed), key=lambda n: n.label)


def render_impact(result: dict) -> str:
    sub: Subgraph = result["subgraph"]
    datasets, jobs, runs, total = sub.datasets(), sub.jobs(), result["runs"], result["runsTotal"]
    lines = [f"impact of {sub.focus.label}: {len(datasets)} datasets, {len(jobs)} jobs, {total} runs downstream"]
    lines.append("datasets to recompute or roll back:")
    lines += [f"  {sub.depths[n.id]:>3} hops  {n.label}" for n in datasets] or ["  (none)"]
    lines.append("jobs to re-run:")
    lines += [f"  {sub.depths[n.id]:>3} hops  {n.label}" for n in jobs] or ["  (none)"]
    since = result.get("since")
    listed = f", the newest {len(runs)} of {total}" if len(runs) < total else ""
    lines.append(f"runs that read affected data{f' (started since {since})' if since else ''}{listed}:")
    lines += [
        f"  {r['id']}  {r['job']['name']}  {r['state']}  {r['startedAt'] or r['endedAt'] or ''}" for r in runs
    ] or ([] if total else ["  (none)"])
    if len(runs) < total:
        lines.append(f"  … {total - len(runs)} older: --runs N lists more, --runs all every one, --since TIME fewer")
    return "\n".join(lines)


def render_run_impact(result: dict) -> str:
    run = result["run"]
    sub: Subgraph = result["subgraph"]
    lines = [f"impact of run {run['id']} ({run['job']['name']}, {run['state']}):"]
    lines.append(f"dataset versions it wrote or that were derived from them ({len(result['datasetVersions'])}):")
    lines += [
        f"  {v['label']}  version {v['version'] or '(unversioned)'}  by run {v['writtenBy']}"
        for v in result["datasetVersions"]
    ] or ["  (none)"]
    lines.append(
        f"runs touched ({len(result['runs'])}: the run, its child runs, and every run that read what they wrote):"
    )
    lines += [f"  {r['id']}  {r['job']['name']}  {r['state']}" for r in result["runs"]]
    lines.append(f"downstream in the graph: {len(sub.datasets())} datasets, {len(sub.jobs())} jobs")
    lines += [
        f"  {sub.depths[n.id]:>3} hops  {n.label}  [{n.kind}]"
        for n in sorted(sub.nodes.values(), key=lambda n: (sub.depths[n.id], n.label))
        if sub.depths[n.id] > 0
    ]
    return "\n".join(lines)


def render_runs(result: dict) -> str:
    node: Node = result["node"]
    title = f"runs of {node.label}" if node.kind == "job" else f"runs that wrote {node.label}"
    lines = [f"{title} (newest first):"]
    for run in result["runs"]:
        lines.append(
            f"  {run['id']}  {run['state'] or '—':<9}  {run['startedAt'] or '—'} → {run['endedAt'] or '—'}  "
            f"job version {_short(run['jobVersion'])}"
        )
        io = [f"in {i['label']}@{_short(i['version'])}" for i in run["inputs"]] + [
            f"out {o['label']}@{_short(o['version'])}" for o in run["outputs"]
        ]
        if node.kind != "job":
            io.insert(0, f"job {run['job']['name']}")
        if io:
            lines.append("      " + "; ".join(io))
        if run["errorMessage"]:
            lines.append(f"      error: {run['errorMessage'].splitlines()[0][:200]}")
    if not result["runs"]:
        lines.append("  (none)")
    return "\n".join(lines)


def render_diff(result: dict) -> str:
    a, b = result["runs"]
    changes = result["changes"]
    lines = [
        f"A  {a['id']}  {a['job']['name']}  {a['state']}  {a['startedAt'] or ''}",
        f"B  {b['id']}  {b['job']['name']}  {b['state']}  {b['startedAt'] or ''}",
    ]

    def pair(label, values, width=None):
        x, y = values
        lines.append(
            f"  {label:<13} {x if width is None else _short(x, width)}  →  {y if width is None else _short(y, width)}"
        )

    if "job" in changes:
        pair("job", [job["name"] for job in changes["job"]])
    if "jobVersion" in changes:
        pair("job version", changes["jobVersion"], 16)
    else:
        lines.append(f"  {'job version':<13} same ({_short(a['jobVersion'], 16)})")
    if "codeHash" in changes:
        pair("source code", changes["codeHash"], 16)
        lines[-1] += "   (sourceCode sha256: the code version changed)"
    if "codeVersion" in changes:
        pair("git version", changes["codeVersion"], 16)
    elif a["codeVersion"]:
        lines.append(f"  {'git version':<13} same ({_short(a['codeVersion'], 16)})")
    for key, (x, y) in (changes.get("parameters") or {}).items():
        pair(f"param {key}", (json.dumps(x), json.dumps(y)))
    for direction in ("inputs", "outputs"):
        part = changes[direction]
        for item in part["added"]:
            lines.append(f"  {direction[:-1]:<13} + {item['dataset']} @ {_short(item['version'], 20)}   (only in B)")
        for item in part["removed"]:
            lines.append(f"  {direction[:-1]:<13} - {item['dataset']} @ {_short(item['version'], 20)}   (only in A)")
        for item in part["changed"]:
            lines.append(
                f"  {direction[:-1]:<13} ~ {item['dataset']}  version {_short(item['from'], 20)} → {_short(item['to'], 20)}"
            )
        for item in part["same"]:
            lines.append(f"  {direction[:-1]:<13} = {item['dataset']} @ {_short(item['version'], 20)}")
    for dataset, change in (changes.get("schema") or {}).items():
        detail = ", ".join(
            [f"+{c}" for c in change["added"]]
            + [f"-{c}" for c in change["removed"]]
            + [f"~{c}" for c in change["changed"]]
        )
        lines.append(f"  {'schema':<13} {dataset}: {detail}")
    for name, change in (changes.get("tasks") or {}).items():
        lines.append(
            f"  {'task':<13} {name}: job version {_short(change['jobVersion'][0], 12)} → {_short(change['jobVersion'][1], 12)}, "
            f"state {change['state'][0]} → {change['state'][1]}"
        )
    if "state" in changes:
        pair("state", changes["state"])
    if "errorMessage" in changes:
        x, y = changes["errorMessage"]
        pair("error", ((x or "—").splitlines()[0][:120], (y or "—").splitlines()[0][:120]))
    if "upstream" in result:
        lines += render_upstream_changes(result["upstream"])
    return "\n".join(lines)


def _version_change_text(change: dict | None) -> str:
    """``job version 1a2b… → 3c4d…: input + nyc.zones, code changed`` (or ``same job version``)."""
    if change is None:
        return "same job version"
    parts = [f"+ input {name}" for name in change["inputsAdded"]]
    parts += [f"- input {name}" for name in change["inputsRemoved"]]
    parts += [f"+ output {name}" for name in change["outputsAdded"]]
    parts += [f"- output {name}" for name in change["outputsRemoved"]]
    if change["codeChanged"]:
        parts.append("code changed")
    detail = ", ".join(parts) or "same inputs, outputs and code"
    return f"job version {_short(change['from'], 12)} → {_short(change['to'], 12)}: {detail}"


def render_upstream_changes(upstream: dict) -> list[str]:
    """The ``--upstream`` part of ``lineage diff``: what differs in the two runs' provenance."""
    lines = ["upstream (what A and B read, who wrote it, how those runs differ):"]
    lines.append(f"  {'the runs':<13} {_version_change_text(upstream['jobVersion'])}")
    for item in upstream["jobs"]:
        runs_a, runs_b = (", ".join(_short(r, 12) for r in runs) or "—" for runs in item["runs"])
        where = (
            "a task of the run"  # a DAG run's task runs: compared through them (queries/provenance.py)
            if item["depth"] == 0
            else f"{item['depth']} level{'s' if item['depth'] != 1 else ''} up"
        )
        head = f"  {'job':<13} {item['job']}  ({where})"
        if item["change"] == "same runs":
            lines.append(f"{head}: same run {runs_a}")
            continue
        if item["change"] != "other runs":
            lines.append(f"{head}: {item['change']} (A: {runs_a}; B: {runs_b})")
            continue
        lines.append(f"{head}: run {runs_a} → {runs_b}")
        lines.append(f"  {'':<13}   {_version_change_text(item.get('jobVersion'))}")
        for key, (x, y) in (item.get("parameters") or {}).items():
            lines.append(f"  {'':<13}   param {key}: {json.dumps(x)} → {json.dumps(y)}")
        if item.get("state"):
            lines.append(f"  {'':<13}   state {item['state'][0]} → {item['state'][1]}")
    for item in upstream["datasetVersions"]:

        def versions(values):
            return (
                ", ".join(
                    f"{v['version'] or '(unversioned)'} by run {_short(v['producedByRunId'], 12)}" for v in values
                )
                or "not read"
            )

        lines.append(
            f"  {'read':<13} {item['dataset']} by {item['reader']}: {versions(item['A'])}  →  {versions(item['B'])}"
        )
    if not upstream["jobs"] and not upstream["datasetVersions"]:
        lines.append("  (no upstream runs, and the same dataset versions read)")
    return lines


# ----------------------------------------------------------------------------- run provenance
def run_lineage_json(result: dict) -> dict:
    """Marquez's ``GET /api/v1/runlineage/upstream`` response: ``{"runs": [{"job", "run", "inputs"}]}``."""
    return {
        "runs": [
            {
                "job": dict(entry["job"]),
                "run": dict(entry["run"]),
                "inputs": [
                    {key: item[key] for key in ("namespace", "name", "version", "producedByRunId")}
                    for item in entry["inputs"]
                ],
            }
            for entry in result["runs"]
        ]
    }


def _run_line(entry: dict) -> str:
    run, job = entry["run"], entry["job"]
    return (
        f"run {run['id']}  {job['name']}  {run['status'] or '—'}  {run['start'] or '—'} → {run['end'] or '—'}"
        f"  job version {_short(job['version'])}"
    )


def render_run_lineage(result: dict, depth: int | None = None, children: list[tuple[str, str]] = ()) -> str:
    """The provenance of a run as a tree: run → dataset version read → run that wrote it → …; a run that read
    nothing names its ``children`` (run id, job name), whose provenance is the answer."""
    entries = {entry["run"]["id"]: entry for entry in result["runs"]}
    root = result["runs"][0]
    lines = [_run_line(root) + "   (↑ provenance)"]
    expanded = {root["run"]["id"]}

    def walk(entry: dict, prefix: str) -> None:
        inputs = entry["inputs"]
        for index, item in enumerate(inputs):
            last = index == len(inputs) - 1
            version = f"version {item['version']}" if item["version"] else "unversioned"
            how = "  (latest write before the run)" if item["resolvedBy"] == "latest write before the run" else ""
            written = f"  written {item['versionTime']}" if item.get("versionTime") else ""
            lines.append(f"{prefix}{'└── ' if last else '├── '}read {item['label']}  {version}{how}{written}")
            inner = prefix + ("    " if last else "│   ")
            writer = item["producedByRunId"]
            if writer is None:
                lines.append(f"{inner}└── written by: no run in the store")
            elif writer == entry["run"]["id"]:
                lines.append(f"{inner}└── written by this run")
            elif writer not in entries:
                lines.append(f"{inner}└── written by run {writer}  (beyond --depth {depth})")
            elif writer in expanded:
                lines.append(f"{inner}└── written by {_run_line(entries[writer])}  (see above)")
            else:
                expanded.add(writer)
                lines.append(f"{inner}└── written by {_run_line(entries[writer])}")
                walk(entries[writer], inner + "    ")

    walk(root, "")
    if not root["inputs"]:
        lines.append("(it read no datasets)")
        if children:  # a DAG run: its task runs did the reading
            lines.append("its task runs read for it; ask one of them:")
            lines += [f"  lineage upstream --run {run_id}   # {job}" for run_id, job in children]
    return "\n".join(lines)


def render_columns(result: dict) -> str:
    datasets = result["datasets"]

    def label(key):
        return f"{datasets[key[0]][2]}.{key[1]}"

    parents: dict = {}
    for source, target, transformations in result["edges"]:
        kinds = (
            ",".join(sorted({"/".join(x for x in (t.get("type"), t.get("subtype")) if x) for t in transformations}))
            or "?"
        )
        parents.setdefault(target, []).append((source, kinds))
    lines = [f"{label(result['focus'])}   (↑ column upstream: {len(result['levels']) - 1} columns)"]
    expanded = {result["focus"]}

    def walk(key, prefix):
        kids = sorted(set(parents.get(key, [])), key=lambda item: label(item[0]))
        for index, (kid, kinds) in enumerate(kids):
            last = index == len(kids) - 1
            seen = kid in expanded
            lines.append(
                f"{prefix}{'└── ' if last else '├── '}{label(kid)}  ({kinds}){'  (see above)' if seen else ''}"
            )
            if not seen:
                expanded.add(kid)
                walk(kid, prefix + ("    " if last else "│   "))

    walk(result["focus"], "")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- JSON forms
def impact_json(queries: LineageQueries, result: dict) -> dict:
    since = {"since": result["since"]} if result.get("since") else {}
    return {
        **queries.marquez_graph(result["subgraph"]),
        "runs": result["runs"],
        "runsTotalCount": result["runsTotal"],  # Marquez's pages of runs count them all as ``totalCount``
        **since,
    }


def run_impact_json(queries: LineageQueries, result: dict) -> dict:
    return {
        **queries.marquez_graph(result["subgraph"]),
        "run": result["run"],
        "runs": result["runs"],
        "datasetVersions": result["datasetVersions"],
    }


def runs_json(result: dict) -> dict:
    return {"node": result["node"].key, "runs": result["runs"]}


# ----------------------------------------------------------------------------- make demo's ending
def demo_summary(paths: settings.Paths | None = None, out: Callable[[str], None] = print) -> None:
    """Ingest the demo's events into the store and print two example queries with their answers."""
    paths = paths or settings.Paths.current()
    store = LineageStore(default_store_url(paths))
    try:
        files = discover_event_files(paths)
        result = store.ingest_files(files)
        out(f"demo: lineage ingest: {result.read} events from {len(files)} files, {result.new} new, into {store.url}")
        queries = LineageQueries(store)
        out("demo: $ lineage upstream nyc_taxi.yellow_rides_hourly_forecast   # where does the forecast come from?")
        upstream = queries.upstream("nyc_taxi.yellow_rides_hourly_forecast")
        out(f"{len(upstream.datasets())} datasets and {len(upstream.jobs())} jobs upstream; its origins:")
        for node in origins(upstream):
            out(f"  {upstream.depths[node.id]:>3} hops  {node.label}")
        out("demo: $ lineage impact nyc_taxi.yellow_taxi_raw   # what must be recomputed if raw taxi data was wrong?")
        out(render_impact(queries.impact("nyc_taxi.yellow_taxi_raw")))
    finally:
        store.close()


def render_drift(found: list[dict]) -> str:
    """``lineage drift``: each task whose newest run drifted, and how."""
    if not found:
        return "no drift: every task's latest run read and wrote what its DAG declares"
    labels = {
        "declaredNotRead": "declared, not read",
        "declaredNotWritten": "declared, not written",
        "readNotDeclared": "read, not declared",
        "writtenNotDeclared": "written, not declared",
    }
    lines = []
    for item in found:
        lines.append(f"{item['job']}   run {item['runId']} at {item['time']}")
        for key, label in labels.items():
            lines += [f"  {label}: {dataset}" for dataset in item[key]]
    return "\n".join(lines)
