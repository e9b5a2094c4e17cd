"""A self-contained HTML lineage report (no external assets): the dataset graph as SVG plus the runs."""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path

import networkx as nx

from include import config
from include.lineage.graph import build_graph, load_events

NODE_WIDTH, NODE_HEIGHT, COLUMN_GAP, ROW_GAP = 250, 44, 90, 22


def _label(data: dict) -> str:
    name = data["name"]
    if data["kind"] == "dataset" and "/" in name:
        name = name.rstrip("/").rsplit("/", 1)[-1]
    return name if len(name) <= 34 else "…" + name[-33:]


def _layout(graph: nx.DiGraph) -> dict[str, tuple[int, int]]:
    layers = {}
    acyclic = graph if nx.is_directed_acyclic_graph(graph) else nx.DiGraph(nx.dfs_tree(graph))
    for depth, generation in enumerate(nx.topological_generations(acyclic)):
        for row, node in enumerate(sorted(generation)):
            layers[node] = (depth * (NODE_WIDTH + COLUMN_GAP) + 20, row * (NODE_HEIGHT + ROW_GAP) + 20)
    return layers


def render_svg(graph: nx.DiGraph) -> str:
    positions = _layout(graph)
    if not positions:
        return "<p>No lineage events yet.</p>"
    width = max(x for x, _ in positions.values()) + NODE_WIDTH + 40
    height = max(y for _, y in positions.values()) + NODE_HEIGHT + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" id="lineage-graph">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
             'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#666"/></marker></defs>']
    for source, target in graph.edges:
        if source in positions and target in positions:
            (x1, y1), (x2, y2) = positions[source], positions[target]
            parts.append(f'<line x1="{x1 + NODE_WIDTH}" y1="{y1 + NODE_HEIGHT // 2}" x2="{x2}" y2="{y2 + NODE_HEIGHT // 2}" '
                         'stroke="#999" marker-end="url(#arrow)"/>')
    for node, (x, y) in positions.items():
        data = graph.nodes[node]
        fill = "#e3f2fd" if data["kind"] == "dataset" else "#fff3e0"
        parts.append(
            f'<g class="node {data["kind"]}" data-id="{html.escape(node)}"><title>{html.escape(node)}</title>'
            f'<rect x="{x}" y="{y}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="8" fill="{fill}" stroke="#555"/>'
            f'<text x="{x + 10}" y="{y + 27}" font-family="sans-serif" font-size="13">{html.escape(_label(data))}</text></g>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(events: list[dict], spark_events: list[dict]) -> str:
    graph = build_graph(events)
    counts = Counter((e["job"]["name"], e["eventType"]) for e in events if "job" in e)
    rows = "\n".join(
        f"<tr><td>{html.escape(job)}</td><td>{html.escape(kind)}</td><td>{n}</td></tr>" for (job, kind), n in sorted(counts.items())
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Lineage report</title>
<style>body{{font-family:sans-serif;margin:24px}} table{{border-collapse:collapse}} td,th{{border:1px solid #ccc;padding:4px 8px}}</style>
</head><body>
<h1>Lineage report</h1>
<p id="summary">{len(events)} Airflow events, {len(spark_events)} Spark listener events,
{sum(1 for _, d in graph.nodes(data=True) if d['kind'] == 'dataset')} datasets,
{sum(1 for _, d in graph.nodes(data=True) if d['kind'] == 'job')} jobs.</p>
<h2>Graph (datasets blue, jobs orange)</h2>
<div style="overflow:auto">{render_svg(graph)}</div>
<h2>Events by job and type</h2>
<table id="event-counts"><tr><th>job</th><th>event</th><th>count</th></tr>
{rows}
</table>
</body></html>
"""


def write_report(paths: config.Paths | None = None) -> Path:
    paths = paths or config.Paths.current()
    events = load_events(paths.lineage_events)
    spark_events = load_events(paths.spark_lineage_events)
    target = paths.lineage / "index.html"
    target.write_text(render_html(events, spark_events))
    return target
