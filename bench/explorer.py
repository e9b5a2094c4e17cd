"""``make bench``, section ``explorer``: the lineage store on a generated graph of real-pipeline shape.

A generated lineage graph of ``BENCH_EXPLORER_NODES`` nodes (default 100,000 datasets and jobs) is ingested as
OpenLineage events (a START and a COMPLETE per job run) into a fresh SQLite store; then the upstream and downstream
of ``BENCH_EXPLORER_QUERIES`` random datasets (default 300) are asked twice, alternating: from the closure table
(one indexed query) and from a recursive CTE over the edge table (how Marquez walks lineage), on the same data in the
same run. Both answers are compared (they must be equal); the figures are p50/p95 latencies and the ingest rate.
Nothing here asserts a timing.

Graph shape, like real pipelines: chains of 16 to 40 stages (depth >= 32 edges, dataset -> job -> dataset), a stage
reading its predecessor and sometimes an earlier stage (diamonds), shared reference datasets read by many pipelines
(fan-out hubs), "core" pipelines whose final tables other pipelines join (cross-pipeline fan-in), side outputs.

    python -m bench.explorer     # this section alone, merged into var/bench/results.json
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from include.core import settings
from include.lineage.queries import recursive_walk_sql

PRODUCER = "https://github.com/lineage-aware-pipelines/bench-explorer"
NAMESPACE = "bench"


def _progress(message: str) -> None:
    print(f"bench [{time.strftime('%H:%M:%S')}] explorer: {message}", flush=True)


def _dataset(name: str, version: str | None = None) -> dict:
    facets = {}
    if version is not None:
        facets["version"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json",
            "datasetVersion": version,
        }
        facets["schema"] = {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json",
            "fields": [{"name": "id", "type": "long"}, {"name": "value", "type": "double"}],
        }
    return {"namespace": "s3://lake", "name": name, "facets": facets}


def generate_events(target_nodes: int, seed: int = 7) -> tuple[list[dict], dict]:
    """OpenLineage events of a generated graph with about ``target_nodes`` nodes; returns (events, shape)."""
    rng = random.Random(seed)
    hubs = [f"reference/dim_{h}" for h in range(max(5, target_nodes // 2000))]
    nodes = len(hubs)
    core_outputs: list[str] = []
    events: list[dict] = []
    started = datetime(2025, 1, 1, tzinfo=UTC)
    pipeline = 0
    jobs = 0
    written: dict[str, str] = {}  # dataset -> the version its latest writer reported (what a reader reads)
    rollups = max(3, target_nodes // 20000)
    while nodes < target_nodes - 2 * rollups:
        stages = rng.randint(16, 40)
        core = pipeline < 20 or rng.random() < 0.05
        outputs_so_far = [f"landing/p{pipeline}/source"]
        nodes += 1
        for stage in range(stages):
            inputs = [outputs_so_far[-1]]
            if len(outputs_so_far) > 2 and rng.random() < 0.3:
                inputs.append(rng.choice(outputs_so_far[:-1]))
            if rng.random() < 0.1:
                inputs.append(rng.choice(hubs))
            if not core and core_outputs and rng.random() < 0.02:
                inputs.append(rng.choice(core_outputs))
            outputs = [f"p{pipeline}/stage{stage}"]
            if rng.random() < 0.15:
                outputs.append(f"p{pipeline}/stage{stage}_rejects")
            job = f"p{pipeline}.stage{stage}"
            run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            time_start = started + timedelta(seconds=jobs)
            for event_type, at, with_versions in (
                ("START", time_start, False),
                ("COMPLETE", time_start + timedelta(milliseconds=500), True),
            ):
                events.append(
                    {
                        "eventType": event_type,
                        "eventTime": at.isoformat(),
                        "producer": PRODUCER,
                        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                        "run": {"runId": run_id, "facets": {}},
                        "job": {"namespace": NAMESPACE, "name": job, "facets": {}},
                        "inputs": [
                            _dataset(name, written.get(name) if with_versions else None)
                            for name in dict.fromkeys(inputs)
                        ],
                        "outputs": [_dataset(name, str(jobs) if with_versions else None) for name in outputs],
                    }
                )
            for name in outputs:
                written[name] = str(jobs)
            outputs_so_far.append(outputs[0])
            nodes += 1 + len(outputs)
            jobs += 1
        if core:
            core_outputs.append(outputs_so_far[-1])
        pipeline += 1
    # Roll-ups: a report joining many core pipelines' final tables: nodes with thousands of ancestors.
    for rollup in range(rollups):
        inputs = rng.sample(core_outputs, min(len(core_outputs), 40))
        run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        time_start = started + timedelta(seconds=jobs)
        for event_type, at, with_versions in (
            ("START", time_start, False),
            ("COMPLETE", time_start + timedelta(milliseconds=500), True),
        ):
            events.append(
                {
                    "eventType": event_type,
                    "eventTime": at.isoformat(),
                    "producer": PRODUCER,
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                    "run": {"runId": run_id, "facets": {}},
                    "job": {"namespace": NAMESPACE, "name": f"rollup{rollup}", "facets": {}},
                    "inputs": [_dataset(name, written.get(name) if with_versions else None) for name in inputs],
                    "outputs": [_dataset(f"reports/rollup{rollup}", str(jobs) if with_versions else None)],
                }
            )
        jobs += 1
    shape = {"pipelines": pipeline, "jobs": jobs, "hubs": len(hubs), "core_pipelines": len(core_outputs)}
    return events, shape | {"rollups": rollups, "end_time": (started + timedelta(seconds=jobs)).isoformat()}


# The baselines: recursive CTEs on the same tables, all built by ``queries.recursive_walk_sql`` (the current graph's
# walk is ``queries.cte_walk``), fetched through the same driver cursor as the store's own queries (``fetch_rows``).
#
# The as-of upstream of a node in SQL alone (beside ``queries.walks.as_of_walk``): each job as its latest run
# started by then (an indexed ORDER BY ... LIMIT 1 per job), its inputs first seen by then; a dataset's writers are
# the jobs whose latest run then wrote it.
_RUN_START = "COALESCE({r}.started_at, {r}.first_event_time, {r}.state_time)"
_LATEST_RUN = (
    f"(SELECT x.id FROM lineage_runs x WHERE x.job_id = {{job}} AND {_RUN_START.format(r='x')} <= :as_of"
    f" ORDER BY {_RUN_START.format(r='x')} DESC, x.id DESC LIMIT 1)"
)
ASOF_UPSTREAM_CTE = recursive_walk_sql(
    "SELECT d.node_id, w.depth + 1 FROM walk w JOIN lineage_jobs j ON j.node_id = w.node"
    f"  JOIN lineage_run_datasets rd ON rd.run_id = {_LATEST_RUN.format(job='j.id')} AND rd.direction = 'input'"
    "  JOIN lineage_datasets d ON d.id = rd.dataset_id"
    "  WHERE w.depth < :max_depth AND (d.created_at IS NULL OR d.created_at <= :as_of)"
    " UNION SELECT j.node_id, w.depth + 1 FROM walk w JOIN lineage_datasets d ON d.node_id = w.node"
    "  JOIN lineage_run_datasets rd ON rd.dataset_id = d.id AND rd.direction = 'output'"
    "  JOIN lineage_runs r ON r.id = rd.run_id JOIN lineage_jobs j ON j.id = r.job_id"
    f"  WHERE w.depth < :max_depth AND r.id = {_LATEST_RUN.format(job='r.job_id')}"
)
# Run provenance in SQL alone, answered as Marquez's LineageDao.getUpstreamRuns answers it (0.51): the versions a
# run read, the runs that wrote them, and so on (no self loop, depth < :max_depth), then each run with its job, times,
# state and every input version with the run that produced it, ORDER BY depth, job name.
RUN_UPSTREAM_CTE = recursive_walk_sql(
    "SELECT dv.created_by_run_id, w.depth + 1 FROM walk w"
    "  JOIN lineage_run_datasets rd ON rd.run_id = w.node AND rd.direction = 'input'"
    "  JOIN lineage_dataset_versions dv ON dv.id = rd.dataset_version_id"
    "  WHERE w.depth < :max_depth AND dv.created_by_run_id IS NOT NULL AND dv.created_by_run_id <> w.node",
    start="CAST(:start AS TEXT)",
    answer="SELECT w.node, w.depth, j.namespace, j.name, r.started_at, r.ended_at, r.state, d.namespace, d.name,"
    " dv.version, dv.created_by_run_id FROM (SELECT node, MIN(depth) AS depth FROM walk GROUP BY node) w"
    " JOIN lineage_runs r ON r.id = w.node JOIN lineage_jobs j ON j.id = r.job_id"
    " LEFT JOIN lineage_run_datasets rd ON rd.run_id = w.node AND rd.direction = 'input'"
    " LEFT JOIN lineage_datasets d ON d.id = rd.dataset_id"
    " LEFT JOIN lineage_dataset_versions dv ON dv.id = rd.dataset_version_id ORDER BY w.depth, j.name",
)


def _timed(run) -> tuple[object, float, float]:
    """(answer, wall ms, CPU ms of this process: SQLite runs in it)."""
    begin, cpu_begin = time.perf_counter(), time.process_time()
    answer = run()
    return answer, (time.perf_counter() - begin) * 1000, (time.process_time() - cpu_begin) * 1000


def _side_by_side(cases: list, ours, baseline, same) -> dict[str, list[float]]:
    """Each case asked of ours and of the baseline, alternating which goes first; the answers must agree."""
    timings: dict[str, list[float]] = {"ours": [], "cte": [], "ours_cpu": [], "cte_cpu": []}
    for index, case in enumerate(cases):
        variants = [("ours", ours), ("cte", baseline)]
        answers = {}
        for name, run in variants[::-1] if index % 2 else variants:
            answers[name], wall, cpu = _timed(lambda r=run, c=case: r(c))
            timings[name].append(wall)
            timings[f"{name}_cpu"].append(cpu)
        if not same(answers["ours"], answers["cte"]):
            raise RuntimeError(f"the store's answer and the recursive CTE's disagree on {case!r}")
    return timings


def _percentiles(values_ms: list[float]) -> tuple[float, float]:
    ordered = sorted(values_ms)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered), p95


def explorer(work_dir: Path, target_nodes: int | None = None, queries: int | None = None) -> dict:
    """Run the section; returns the figures that go under ``explorer`` in results.json."""
    from sqlalchemy import func, select

    from include.lineage.queries import LineageQueries, closure_downstream, closure_upstream, cte_walk
    from include.lineage.store import LineageStore
    from include.lineage.store.schema import closure_table, edges_table, nodes_table

    target_nodes = target_nodes or settings.BENCH_EXPLORER_NODES.integer()
    queries = queries or settings.BENCH_EXPLORER_QUERIES.integer()
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True)
    database = work_dir / "explorer.db"
    _progress(f"generating a lineage graph of about {target_nodes:,} nodes")
    events, shape = generate_events(target_nodes)
    store = LineageStore(f"sqlite:///{database}")
    try:
        _progress(f"ingesting {len(events):,} events")
        load_before = os.getloadavg()[0]
        started, cpu_started = time.perf_counter(), time.process_time()
        step = 10_000
        for done in range(0, len(events), step):  # the store's own ingest, 1,000 events a transaction
            store.ingest(events[done : done + step], batch_size=1000)
            elapsed = time.perf_counter() - started
            _progress(f"{min(done + step, len(events)):,} events in {elapsed:.0f} s ({(done + step) / elapsed:,.0f}/s)")
        ingest_seconds, ingest_cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        load_after_ingest = os.getloadavg()[0]
        with store.engine.connect() as conn:
            node_count = conn.execute(select(func.count()).select_from(nodes_table)).scalar_one()
            edge_count = conn.execute(select(func.count()).select_from(edges_table)).scalar_one()
            closure_rows = conn.execute(select(func.count()).select_from(closure_table)).scalar_one()
            max_depth = conn.execute(select(func.max(closure_table.c.depth))).scalar_one()
            dataset_ids = (
                conn.execute(select(nodes_table.c.id).where(nodes_table.c.kind == "dataset").order_by(nodes_table.c.id))
                .scalars()
                .all()
            )
        rng = random.Random(11)
        sample = [rng.choice(dataset_ids) for _ in range(queries)]
        depth = 10**6  # every ancestor / descendant, however deep
        timings: dict[str, list[float]] = {"closure_up": [], "cte_up": [], "closure_down": [], "cte_down": []}
        cpu: dict[str, list[float]] = {key: [] for key in timings}  # CPU time of this process: SQLite runs in it
        sizes = {"up": [], "down": []}
        _progress(
            f"{node_count:,} nodes, {edge_count:,} edges, {closure_rows:,} closure rows, max depth {max_depth}; "
            f"{queries} upstream and downstream queries each way"
        )
        with store.engine.connect() as conn:
            for index, node_id in enumerate(sample):
                for direction, closure_query in (("up", closure_upstream), ("down", closure_downstream)):
                    walk = "upstream" if direction == "up" else "downstream"
                    variants = [
                        ("closure", lambda q=closure_query, n=node_id: q(conn, n, depth)),
                        ("cte", lambda n=node_id, w=walk: cte_walk(conn, n, w, depth)),
                    ]
                    if index % 2:
                        variants.reverse()  # alternate which goes first
                    answers = {}
                    for name, run in variants:
                        begin, cpu_begin = time.perf_counter(), time.process_time()
                        answers[name] = run()
                        timings[f"{name}_{direction}"].append((time.perf_counter() - begin) * 1000)
                        cpu[f"{name}_{direction}"].append((time.process_time() - cpu_begin) * 1000)
                    if sorted(answers["closure"]) != sorted(answers["cte"]):
                        raise RuntimeError(
                            f"closure table and recursive CTE disagree on the {direction}stream of node {node_id}"
                        )
                    sizes[direction].append(len(answers["closure"]) - 1)
            # Impact of a shared reference dataset (thousands of descendants): where walking the graph costs most.
            hubs = conn.execute(select(nodes_table.c.id).where(nodes_table.c.name.like("reference/%"))).scalars().all()
            hub_cpu: dict[str, list[float]] = {"closure": [], "cte": []}
            for index, node_id in enumerate(hubs[:20]):
                variants = [
                    ("closure", lambda n=node_id: closure_downstream(conn, n, depth)),
                    ("cte", lambda n=node_id: cte_walk(conn, n, "downstream", depth)),
                ]
                for name, run in variants[::-1] if index % 2 else variants:
                    cpu_begin = time.process_time()
                    run()
                    hub_cpu[name].append((time.process_time() - cpu_begin) * 1000)
            hub_sizes = [len(closure_downstream(conn, node_id, depth)) - 1 for node_id in hubs[:20]]
        lineage = LineageQueries(store)
        with store.engine.connect() as conn:
            keys = dict(
                conn.execute(
                    select(nodes_table.c.id, nodes_table.c.key).where(nodes_table.c.id.in_(sample[:100]))
                ).all()
            )
        full = []
        for node_id in sample[:100]:
            begin = time.perf_counter()
            lineage.upstream(keys[node_id], depth)
            full.append((time.perf_counter() - begin) * 1000)
        extra = _beyond_the_current_graph(store, lineage, shape, min(queries, 100), depth)
    finally:
        store.close()
    figures = {
        "nodes": node_count,
        "edges": edge_count,
        "closure_rows": closure_rows,
        "max_depth_edges": max_depth,
        **shape,
        "events": len(events),
        "ingest_seconds": ingest_seconds,
        "store_ingest_events_per_second": len(events) / ingest_seconds,  # straight into the store, no server
        "ingest_cpu_seconds": ingest_cpu_seconds,
        "ingest_events_per_cpu_second": len(events) / ingest_cpu_seconds,
        "load_average_1min": [load_before, load_after_ingest],  # other work on the machine skews wall-clock figures
        "load_average_1min_queries": [load_after_ingest, os.getloadavg()[0]],
        "store_bytes": sum(p.stat().st_size for p in work_dir.glob("explorer.db*")),
        "queries": queries,
        "mean_upstream_nodes": statistics.mean(sizes["up"]),
        "mean_downstream_nodes": statistics.mean(sizes["down"]),
        "max_downstream_nodes": max(sizes["down"]),
    }
    for label, key in (
        ("upstream", "closure_up"),
        ("cte_upstream", "cte_up"),
        ("downstream", "closure_down"),
        ("cte_downstream", "cte_down"),
    ):
        figures[f"{label}_p50_ms"], figures[f"{label}_p95_ms"] = _percentiles(timings[key])
        figures[f"{label}_cpu_p50_ms"], figures[f"{label}_cpu_p95_ms"] = _percentiles(cpu[key])
    figures["hub_downstream_cpu_p50_ms"], figures["hub_downstream_cpu_p95_ms"] = _percentiles(hub_cpu["closure"])
    figures["cte_hub_downstream_cpu_p50_ms"], figures["cte_hub_downstream_cpu_p95_ms"] = _percentiles(hub_cpu["cte"])
    figures["mean_hub_downstream_nodes"] = statistics.mean(hub_sizes)
    figures["upstream_full_query_p50_ms"], figures["upstream_full_query_p95_ms"] = _percentiles(full)
    figures["cte_over_closure_upstream_p95"] = figures["cte_upstream_p95_ms"] / figures["upstream_p95_ms"]
    figures["cte_over_closure_downstream_p95"] = figures["cte_downstream_p95_ms"] / figures["downstream_p95_ms"]
    figures.update(extra)
    return figures


def _beyond_the_current_graph(store, lineage, shape: dict, count: int, depth: int) -> dict:
    """Upstream as of an instant (half the jobs had run), run provenance, and the upstream of the nodes with >= 1,000
    ancestors, each beside a recursive CTE on the same data, answers compared."""
    from sqlalchemy import func, select

    from include.lineage.queries import closure_upstream, closure_upstream_rows, cte_walk, fetch_rows, parse_instant
    from include.lineage.store.schema import closure_table, datasets_table, nodes_table, runs_table

    figures: dict = {}
    rng = random.Random(13)
    as_of = parse_instant((datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=shape["jobs"] // 2)).isoformat())
    with store.engine.connect() as conn:
        seen = conn.execute(
            select(nodes_table.c.id, nodes_table.c.key)
            .join(datasets_table, datasets_table.c.node_id == nodes_table.c.id)
            .where(datasets_table.c.created_at <= as_of)
            .order_by(nodes_table.c.id)
        ).all()
        run_ids = conn.execute(select(runs_table.c.id).order_by(runs_table.c.id)).scalars().all()
        widest = conn.execute(
            select(closure_table.c.descendant, func.count())
            .group_by(closure_table.c.descendant)
            .order_by(func.count().desc())
            .limit(20)
        ).all()
        # the nodes with >= 1,000 ancestors (a node's own row counted: > 1,000 rows); a small graph has none: its widest
        big = [row for row in widest if row[1] > 1000] or widest[:6]
        big_keys = dict(
            conn.execute(
                select(nodes_table.c.id, nodes_table.c.key).where(nodes_table.c.id.in_([n for n, _ in big]))
            ).all()
        )
    _progress(
        f"as of {as_of}: {count} upstream queries; {count} run provenance queries; {len(big)} nodes with >1,000 ancestors"
    )
    asof_cases = [seen[rng.randrange(len(seen))] for _ in range(count)]
    with store.engine.connect() as conn:
        asof = _side_by_side(
            asof_cases,
            lambda case: lineage.upstream(case[1], depth, as_of=as_of).depths,
            lambda case: dict(
                fetch_rows(conn, ASOF_UPSTREAM_CTE, {"start": case[0], "max_depth": depth, "as_of": as_of})
            ),
            lambda ours, baseline: ours == baseline,
        )
        run_cases = [run_ids[rng.randrange(len(run_ids))] for _ in range(count)]
        runs = _side_by_side(
            run_cases,
            lambda case: {entry["run"]["id"]: entry["depth"] for entry in lineage.run_lineage(case, depth)["runs"]},
            lambda case: {
                row[0]: row[1] for row in fetch_rows(conn, RUN_UPSTREAM_CTE, {"start": case, "max_depth": depth})
            },
            lambda ours, baseline: ours == baseline,
        )
        biggest = [node for node, _ in big]
        closure = _side_by_side(
            biggest * 5,
            lambda node: dict(closure_upstream(conn, node, depth)),
            lambda node: dict(cte_walk(conn, node, "upstream", depth)),
            lambda ours, baseline: ours == baseline,
        )
        # the same nodes from the closure table's rows, one per ancestor: what the packed row saves
        closure_rows = _side_by_side(
            biggest * 5,
            lambda node: dict(closure_upstream_rows(conn, node, depth)),
            lambda node: dict(cte_walk(conn, node, "upstream", depth)),
            lambda ours, baseline: ours == baseline,
        )
    big_full = [_timed(lambda k=big_keys[node]: lineage.upstream(k, depth))[1] for node in biggest * 5]
    for label, timings in (
        ("asof_upstream", asof),
        ("run_upstream", runs),
        ("big_upstream", closure),
        ("big_upstream_rows", closure_rows),
    ):
        figures[f"{label}_p50_ms"], figures[f"{label}_p95_ms"] = _percentiles(timings["ours"])
        figures[f"cte_{label}_p50_ms"], figures[f"cte_{label}_p95_ms"] = _percentiles(timings["cte"])
        figures[f"{label}_cpu_p50_ms"], figures[f"{label}_cpu_p95_ms"] = _percentiles(timings["ours_cpu"])
        figures[f"cte_{label}_cpu_p50_ms"], figures[f"cte_{label}_cpu_p95_ms"] = _percentiles(timings["cte_cpu"])
        figures[f"cte_over_{label}_p50"] = figures[f"cte_{label}_p50_ms"] / max(figures[f"{label}_p50_ms"], 1e-9)
        figures[f"cte_over_{label}_p95"] = figures[f"cte_{label}_p95_ms"] / max(figures[f"{label}_p95_ms"], 1e-9)
    figures["asof_instant"] = as_of
    figures["big_upstream_nodes"] = len(big)
    figures["big_upstream_mean_ancestors"] = statistics.mean(c - 1 for _, c in big) if big else 0
    figures["big_upstream_min_ancestors"] = min(c - 1 for _, c in big) if big else 0
    figures["big_upstream_full_query_p50_ms"], figures["big_upstream_full_query_p95_ms"] = _percentiles(big_full)
    return figures


def to_markdown(figures: dict) -> str:
    f = figures
    lines = [
        "",
        f"Explorer: generated lineage graph of {f['nodes']:,} nodes ({f['jobs']:,} jobs in {f['pipelines']:,} pipelines), "
        f"{f['edges']:,} edges, max depth {f['max_depth_edges']} edges, {f['closure_rows']:,} closure rows; "
        f"{f['queries']} random datasets (mean {f['mean_upstream_nodes']:.0f} upstream, {f['mean_downstream_nodes']:.0f} downstream nodes).",
        "",
        "| figure | closure table | recursive CTE | CTE ÷ closure |",
        "|---|---|---|---|",
        f"| upstream p50 / p95 (ms) | {f['upstream_p50_ms']:.2f} / {f['upstream_p95_ms']:.2f} | "
        f"{f['cte_upstream_p50_ms']:.2f} / {f['cte_upstream_p95_ms']:.2f} | {f['cte_over_closure_upstream_p95']:.1f}× (p95) |",
        f"| downstream p50 / p95 (ms) | {f['downstream_p50_ms']:.2f} / {f['downstream_p95_ms']:.2f} | "
        f"{f['cte_downstream_p50_ms']:.2f} / {f['cte_downstream_p95_ms']:.2f} | {f['cte_over_closure_downstream_p95']:.1f}× (p95) |",
        f"| upstream CPU time p50 / p95 (ms) | {f['upstream_cpu_p50_ms']:.2f} / {f['upstream_cpu_p95_ms']:.2f} | "
        f"{f['cte_upstream_cpu_p50_ms']:.2f} / {f['cte_upstream_cpu_p95_ms']:.2f} | "
        f"{f['cte_upstream_cpu_p95_ms'] / max(f['upstream_cpu_p95_ms'], 1e-9):.1f}× (p95) |",
        f"| downstream CPU time p50 / p95 (ms) | {f['downstream_cpu_p50_ms']:.2f} / {f['downstream_cpu_p95_ms']:.2f} | "
        f"{f['cte_downstream_cpu_p50_ms']:.2f} / {f['cte_downstream_cpu_p95_ms']:.2f} | "
        f"{f['cte_downstream_cpu_p95_ms'] / max(f['downstream_cpu_p95_ms'], 1e-9):.1f}× (p95) |",
        f"| downstream of the shared reference datasets "
        f"(mean {f['mean_hub_downstream_nodes']:.0f} nodes), CPU p50 / p95 (ms) | "
        f"{f['hub_downstream_cpu_p50_ms']:.2f} / {f['hub_downstream_cpu_p95_ms']:.2f} | "
        f"{f['cte_hub_downstream_cpu_p50_ms']:.2f} / {f['cte_hub_downstream_cpu_p95_ms']:.2f} | "
        f"{f['cte_hub_downstream_cpu_p95_ms'] / max(f['hub_downstream_cpu_p95_ms'], 1e-9):.1f}× (p95) |",
        f"| `lineage upstream` whole query, p50 / p95 (ms) | {f['upstream_full_query_p50_ms']:.2f} / {f['upstream_full_query_p95_ms']:.2f} | | |",
        f"| upstream of the {f['big_upstream_nodes']} nodes with "
        f"{'≥ 1,000 ancestors' if f.get('big_upstream_min_ancestors', 1000) >= 1000 else 'the most ancestors'} "
        f"(mean {f['big_upstream_mean_ancestors']:.0f}), "
        f"p50 / p95 (ms) | {f['big_upstream_p50_ms']:.2f} / {f['big_upstream_p95_ms']:.2f} | "
        f"{f['cte_big_upstream_p50_ms']:.2f} / {f['cte_big_upstream_p95_ms']:.2f} | "
        f"{f['cte_over_big_upstream_p50']:.1f}× (p50), {f['cte_over_big_upstream_p95']:.1f}× (p95) |",
        f"| the same from the closure table's rows (one per ancestor), p50 / p95 (ms) | "
        f"{f['big_upstream_rows_p50_ms']:.2f} / {f['big_upstream_rows_p95_ms']:.2f} | "
        f"{f['cte_big_upstream_rows_p50_ms']:.2f} / {f['cte_big_upstream_rows_p95_ms']:.2f} | "
        f"{f['cte_over_big_upstream_rows_p50']:.1f}× (p50), {f['cte_over_big_upstream_rows_p95']:.1f}× (p95) |",
        f"| the same, `lineage upstream` whole query, p50 / p95 (ms) | {f['big_upstream_full_query_p50_ms']:.2f} / "
        f"{f['big_upstream_full_query_p95_ms']:.2f} | | |",
        f"| `lineage upstream --as-of` (whole query; as of {f['asof_instant']}), p50 / p95 (ms) | "
        f"{f['asof_upstream_p50_ms']:.2f} / {f['asof_upstream_p95_ms']:.2f} | "
        f"{f['cte_asof_upstream_p50_ms']:.2f} / {f['cte_asof_upstream_p95_ms']:.2f} | {f['cte_over_asof_upstream_p95']:.1f}× (p95) |",
        f"| run provenance (`lineage upstream --run`), p50 / p95 (ms) | "
        f"{f['run_upstream_p50_ms']:.2f} / {f['run_upstream_p95_ms']:.2f} | "
        f"{f['cte_run_upstream_p50_ms']:.2f} / {f['cte_run_upstream_p95_ms']:.2f} | {f['cte_over_run_upstream_p95']:.1f}× (p95) |",
        f"| ingest (events/s) | {f['store_ingest_events_per_second']:,.0f} ({f['events']:,} events in {f['ingest_seconds']:.0f} s; "
        f"{f['ingest_events_per_cpu_second']:,.0f} per CPU-second) | | |",
        f"| machine load (1-min average, before → after ingest) | {f['load_average_1min'][0]:.1f} → {f['load_average_1min'][1]:.1f} | | |",
        f"| machine load (1-min average, before → after the queries) | "
        f"{f.get('load_average_1min_queries', f['load_average_1min'])[0]:.1f} → "
        f"{f.get('load_average_1min_queries', f['load_average_1min'])[1]:.1f} | | |",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    out = settings.Paths.current().bench
    figures = explorer(settings.Paths.current().var / "bench-state" / "explorer")
    out.mkdir(parents=True, exist_ok=True)
    results_file = out / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    results["explorer"] = figures
    results_file.write_text(json.dumps(results, indent=2))
    markdown = to_markdown(figures)
    (out / "explorer.md").write_text(markdown)
    print(markdown)
    _progress(f"results in {results_file} (key explorer) and {out / 'explorer.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
