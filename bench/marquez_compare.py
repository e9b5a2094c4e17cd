"""The real Marquez 0.51 beside ``lineage serve``: the same generated history (``bench/history.py``) posted to both,
then ``GET /api/v1/lineage?nodeId=...&depth=20`` asked of each, timed and compared answer by answer.

Three servers, each over a fresh store, filled one after the other so that none competes with another for the CPU:

- **Marquez**, built from its 0.51 sources with ``bench/marquez/pom.xml`` (see ``bench/marquez/README.md``), started
  here from its jar over a database of a throwaway PostgreSQL cluster on loopback (or one already running, given
  ``--marquez-url``, which must be empty);
- ``lineage serve`` on **SQLite**, and ``lineage serve`` on **PostgreSQL** (another database of the same cluster).

Each takes the ``--size`` events in event order, one per ``POST /api/v1/lineage``, from ``--clients`` threads (one by
default: with more, a run's events can arrive out of order, and the answers would differ for that reason alone):
events/s, and the events refused (status >= 400, with the first bodies). Then, for the hub dataset and ``--nodes``
random generated datasets and jobs, each server answers ``GET /api/v1/lineage?nodeId=<id>&depth=20`` once (the first
answer apart: ``lineage serve`` builds its Marquez model then) and ``--repetitions`` times more (p50/p95 ms), and
``compare_graphs`` lists what differs between its answer and Marquez's: node ids, edges, and per node the ``data``
fields (``IGNORED`` names the fields left out: ids Marquez makes itself).

Figures go to ``var/bench/marquez_compare.json``, a markdown table to stdout.

    python -m bench.marquez_compare --size 8000 [--marquez-jar var/marquez-build/target/marquez-api-0.51.2-SNAPSHOT.jar]
    python -m bench.marquez_compare --size 8000 --marquez-url http://127.0.0.1:5000   # a fresh Marquez of your own
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path

import requests

from bench.history import DAYS, History, table_key
from bench.ingest_throughput import serve
from bench.store_scale import in_shares, percentiles, postgres_server
from include.core import ports, settings
from include.core.errors import ServiceError
from include.services.local_service import wait_until_healthy

DEFAULT_JAR = settings.PROJECT_ROOT / "var/marquez-build/target/marquez-api-0.51.2-SNAPSHOT.jar"
DEFAULT_WORK = settings.PROJECT_ROOT / "var/marquez-build/work"
DEPTH = 20
FIRST_REFUSALS = 5
RESULTS = "marquez_compare.json"  # in var/bench/
ANSWERS = "answers.json"  # in --work: every answer, for --recompare

# Fields of a node's ``data`` left out of the comparison: ids Marquez derives itself (its row UUIDs, and the version
# UUIDs it computes from a job's or a dataset's content), which no other server can reproduce. Paths as
# ``diff_data`` writes them, list items as ``[]``. Timestamps are compared, as instants: Marquez takes them from
# the events' ``eventTime``, as ``lineage serve`` does.
IGNORED = frozenset(
    {
        "uuid",
        "parentJobUuid",
        "currentVersion",
        "latestRun.jobVersion.version",
        "latestRun.inputDatasetVersions[].datasetVersionId.version",
        "latestRun.outputDatasetVersions[].datasetVersionId.version",
    }
)
MISSING = "<missing>"
ORDER = "<order>"  # suffix of a list's path when only the order of its items differs
_INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")
_ITEM = re.compile(r"\[[^\]]*\]")


def _progress(message: str) -> None:
    print(f"bench [{time.strftime('%H:%M:%S')}] marquez_compare: {message}", flush=True)


# ---------------------------------------------------------------------------------------------------- comparison
def _scalar(value):
    """Timestamps as UTC instants (``2025-01-01T00:00:00Z`` and ``2025-01-01T00:00:00.000+00:00`` are the same)."""
    if isinstance(value, str) and _INSTANT.match(value):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC).isoformat()
        except ValueError:
            return value
    return value


def _item_key(item) -> str | None:
    """What identifies an item of a list of objects (a schema field, a dataset, a dataset version), if anything."""
    if not isinstance(item, dict):
        return None
    for holder in (item, item.get("id"), item.get("datasetVersionId")):
        if isinstance(holder, dict) and isinstance(holder.get("name"), str):
            namespace = holder.get("namespace")
            return f"{namespace}:{holder['name']}" if isinstance(namespace, str) else holder["name"]
    return None


def _keyed(items: list) -> dict | None:
    """A list of named objects by name (in their order), or None when its items are not all named, uniquely."""
    keys = [_item_key(item) for item in items]
    if not all(keys) or len(set(keys)) != len(keys):
        return None
    return dict(zip(keys, items, strict=True))


def _canonical(value):
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    return _scalar(value)


def general_path(path: str) -> str:
    """``fields[col_01_id].type`` -> ``fields[].type``: one path for every item of a list."""
    return _ITEM.sub("[]", path)


def ignored(path: str) -> bool:
    general = general_path(path)
    return general in IGNORED or general.endswith("Uuids")


def diff_data(ours, theirs, path: str = "") -> dict[str, tuple]:
    """{path: (ours, theirs)} of what differs between two values of ``data``: objects key by key (a key on one side
    only is one difference, its whole value against ``MISSING``), lists of named objects name by name (the names in
    order, if they differ, at the list's path; then the items both have), other lists as sets, timestamps as
    instants. ``IGNORED`` paths are left out; a list of the same named items in another order is reported at
    ``<path><order>``."""
    if path and ignored(path):
        return {}
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out: dict[str, tuple] = {}
        for key in sorted(ours.keys() | theirs.keys(), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in ours or key not in theirs:
                if not ignored(where):
                    out[where] = (ours.get(key, MISSING), theirs.get(key, MISSING))
            else:
                out.update(diff_data(ours[key], theirs[key], where))
        return out
    if isinstance(ours, list) and isinstance(theirs, list):
        mine, other = _keyed(ours), _keyed(theirs)
        if mine is not None and other is not None and (mine or other):
            out = {}
            if mine.keys() != other.keys():
                out[path] = (list(mine), list(other))
            elif list(mine) != list(other):  # the same items in another order: for a set (a job's inputs) no matter
                out[f"{path}{ORDER}"] = (list(mine), list(other))
            for key in mine.keys() & other.keys():
                out.update(diff_data(mine[key], other[key], f"{path}[{key}]"))
            return out
        as_set = [sorted(json.dumps(_canonical(item), sort_keys=True) for item in side) for side in (ours, theirs)]
        return {} if as_set[0] == as_set[1] else {path: (ours, theirs)}
    return {} if _scalar(ours) == _scalar(theirs) else {path: (ours, theirs)}


def _edges(graph: list[dict]) -> set[tuple[str, str]]:
    return {
        (edge["origin"], edge["destination"])
        for node in graph
        for edge in (node.get("inEdges") or []) + (node.get("outEdges") or [])
    }


def compare_graphs(ours: dict, theirs: dict) -> dict:
    """What differs between two ``GET /api/v1/lineage`` answers (``{"graph": [...]}``): node ids and edges (origin,
    destination) on one side only, and per field path of ``data`` (``general_path``) how many nodes of both differ
    there (``diff_data``), with the first such node as an example. Fields of ``IGNORED`` are left out."""
    our_nodes = {node["id"]: node for node in ours.get("graph", [])}
    their_nodes = {node["id"]: node for node in theirs.get("graph", [])}
    our_edges, their_edges = _edges(list(our_nodes.values())), _edges(list(their_nodes.values()))
    fields: dict[str, dict] = {}
    for node_id in sorted(our_nodes.keys() & their_nodes.keys()):
        mine, other = our_nodes[node_id], their_nodes[node_id]
        differing = diff_data(mine.get("data"), other.get("data"))
        if mine.get("type") != other.get("type"):
            differing["<type>"] = (mine.get("type"), other.get("type"))
        firsts: dict[str, tuple] = {}
        for path, (a, b) in differing.items():
            firsts.setdefault(general_path(path), (path, a, b))
        for general, (path, a, b) in firsts.items():
            entry = fields.setdefault(
                general, {"nodes": 0, "example": {"node": node_id, "path": path, "ours": a, "theirs": b}}
            )
            entry["nodes"] += 1
    return {
        "nodes": {"ours": len(our_nodes), "theirs": len(their_nodes)},
        "edges": {"ours": len(our_edges), "theirs": len(their_edges)},
        "only_ours": {
            "nodes": sorted(our_nodes.keys() - their_nodes.keys()),
            "edges": sorted(our_edges - their_edges),
        },
        "only_theirs": {
            "nodes": sorted(their_nodes.keys() - our_nodes.keys()),
            "edges": sorted(their_edges - our_edges),
        },
        "data": fields,
        "same": our_nodes.keys() == their_nodes.keys() and our_edges == their_edges and not fields,
    }


def merge_comparisons(comparisons: dict[str, dict]) -> dict:
    """The comparisons of several answers (by the node asked) in one: how many answers had each difference, and an
    example (the node asked and the node that differs)."""
    merged: dict = {"answers": len(comparisons), "same": 0, "only_ours": {}, "only_theirs": {}, "data": {}}
    for asked, comparison in comparisons.items():
        merged["same"] += bool(comparison["same"])
        for side in ("only_ours", "only_theirs"):
            for kind in ("nodes", "edges"):
                items = comparison[side][kind]
                if items:
                    entry = merged[side].setdefault(kind, {"answers": 0, "items": 0, "example": None})
                    entry["answers"] += 1
                    entry["items"] += len(items)
                    entry["example"] = entry["example"] or {"asked": asked, "item": items[0]}
        for path, difference in comparison["data"].items():
            entry = merged["data"].setdefault(path, {"answers": 0, "nodes": 0, "example": None})
            entry["answers"] += 1
            entry["nodes"] += difference["nodes"]
            entry["example"] = entry["example"] or {"asked": asked, **difference["example"]}
    return merged


def comparisons(answers: dict[str, dict[str, dict]], asked: list[str]) -> dict:
    """Each ``lineage serve`` against Marquez (and the two against each other), over the answers of every node asked:
    merged, and per node against Marquez."""
    out: dict = {}
    for ours, theirs in (
        ("lineage_sqlite", "marquez"),
        ("lineage_postgresql", "marquez"),
        ("lineage_sqlite", "lineage_postgresql"),
    ):
        if ours in answers and theirs in answers:
            per_node = {node_id: compare_graphs(answers[ours][node_id], answers[theirs][node_id]) for node_id in asked}
            out[f"{ours}_vs_{theirs}"] = {"merged": merge_comparisons(per_node)}
            if theirs == "marquez":
                out[f"{ours}_vs_{theirs}"]["per_node"] = per_node
    return out


# ---------------------------------------------------------------------------------------------------- summaries
def ingest_summary(events: int, seconds: float, statuses: list[int], refusals: list[str], clients: int) -> dict:
    """Events/s of wall clock, and the events refused (status >= 400) with the first bodies."""
    refused = sum(1 for status in statuses if status >= 400)
    return {
        "events": events,
        "clients": clients,
        "seconds": round(seconds, 2),
        "events_per_second": round(events / seconds, 1) if seconds > 0 else None,
        "refused": refused,
        "first_refusals": refusals[:FIRST_REFUSALS],
    }


def latency_summary(first_ms: float | None, repeated_ms: list[float], nodes: int | None, status: int | None) -> dict:
    """One node asked of one server: the first answer apart, p50/p95 of the others, and the answer's size."""
    return {
        **percentiles(repeated_ms),
        "first_ms": None if first_ms is None else round(first_ms, 1),
        "nodes": nodes,
        "status": status,
    }


# ---------------------------------------------------------------------------------------------------- servers
def jdbc_of(sqlalchemy_url: str) -> tuple[str, str, str]:
    """(JDBC URL, user, password) of a ``postgresql+psycopg2://user:password@host:port/name`` URL."""
    from sqlalchemy.engine import make_url

    url = make_url(sqlalchemy_url)
    return f"jdbc:postgresql://{url.host}:{url.port}/{url.database}", url.username, url.password


def marquez_config(jdbc: str, user: str, password: str, port: int, admin_port: int) -> str:
    """Marquez's configuration (as ``marquez.example.yml``, on loopback): no search, no GraphQL, warnings only."""
    return f"""\
server:
  applicationConnectors:
  - type: http
    bindHost: 127.0.0.1
    port: {port}
    httpCompliance: RFC7230_LEGACY
  adminConnectors:
  - type: http
    bindHost: 127.0.0.1
    port: {admin_port}
  requestLog:
    appenders: []
db:
  driverClass: org.postgresql.Driver
  url: {jdbc}
  user: {user}
  password: {password}
migrateOnStartup: true
graphql:
  enabled: false
search:
  enabled: false
logging:
  level: WARN
  appenders:
  - type: console
"""


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).ok
    except requests.ConnectionError:
        return False


@contextmanager
def marquez_server(jar: Path, database_url: str, folder: Path, heap: str = "2g") -> Iterator[str]:
    """Marquez from its jar over ``database_url`` (migrated on start), once ``/api/v1/namespaces`` answers: its URL.
    Its log is ``folder/marquez.log``."""
    folder.mkdir(parents=True, exist_ok=True)
    port, admin = ports.free_port(), ports.free_port()
    while admin == port:
        admin = ports.free_port()
    config = folder / "marquez.yml"
    config.write_text(marquez_config(*jdbc_of(database_url), port, admin))
    log = (folder / "marquez.log").open("w")
    process = subprocess.Popen(
        ["java", f"-Xmx{heap}", "-jar", str(jar), "server", str(config)], stdout=log, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(
            process,
            lambda: _answers(f"{base}/api/v1/namespaces"),
            started=time.monotonic(),
            timeout=300,  # the first start runs Marquez's ~90 Flyway migrations
            poll=1,
            name="Marquez",
            address=base,
            log_path=folder / "marquez.log",
            error=ServiceError,
        )
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@contextmanager
def lineage_server(store_url: str, env: dict) -> Iterator[str]:
    process, base = serve(store_url, env)
    try:
        yield base
    finally:
        process.terminate()
        process.wait(timeout=60)


# ---------------------------------------------------------------------------------------------------- ingest and ask
def post_events(base: str, bodies: list[dict], token: str | None, clients: int) -> dict:
    """``bodies`` one per ``POST /api/v1/lineage`` from ``clients`` threads (each its share, in order); refusals are
    counted, not raised."""
    statuses: list[int] = []
    refusals: list[str] = []
    lock = threading.Lock()

    def post(share: list[dict]) -> None:
        with requests.Session() as session:
            if token:
                session.headers["Authorization"] = f"Bearer {token}"
            for body in share:
                response = session.post(f"{base}/api/v1/lineage", json=body, timeout=600)
                with lock:
                    statuses.append(response.status_code)
                    if response.status_code >= 400 and len(refusals) < FIRST_REFUSALS:
                        refusals.append(f"{response.status_code} {response.text[:300]}")

    seconds = in_shares(post, bodies, clients)
    return ingest_summary(len(bodies), seconds, statuses, refusals, clients)


def ask(base: str, node_id: str, token: str | None, repetitions: int) -> tuple[dict, dict]:
    """``GET /api/v1/lineage?nodeId=...&depth=20`` once, then ``repetitions`` times timed: (summary, last answer)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    params = {"nodeId": node_id, "depth": DEPTH}
    timings: list[float] = []
    first_ms = None
    answer: dict = {}
    status = None
    for index in range(repetitions + 1):
        started = time.perf_counter()
        response = requests.get(f"{base}/api/v1/lineage", params=params, headers=headers, timeout=600)
        elapsed = (time.perf_counter() - started) * 1000
        status = response.status_code
        if index == 0:
            first_ms = elapsed
        else:
            timings.append(elapsed)
        if not response.ok:
            answer = {"error": f"{response.status_code} {response.text[:300]}", "graph": []}
            break
        answer = response.json()
    nodes = len(answer.get("graph", [])) if "error" not in answer else None
    return latency_summary(first_ms, timings, nodes, status), answer


def sample_nodes(events: list[dict], hub: str, count: int, seed: int) -> list[str]:
    """The hub, then ``count`` random node ids of the history, half datasets of the warehouse, half jobs."""
    datasets: set[str] = set()
    jobs: set[str] = set()
    for event in events:
        job = event.get("job") or {}
        jobs.add(f"job:{job.get('namespace')}:{job.get('name')}")
        for dataset in (event.get("inputs") or []) + (event.get("outputs") or []):
            if "/warehouse/" in dataset.get("name", ""):
                datasets.add(f"dataset:{dataset['namespace']}:{dataset['name']}")
    rng = random.Random(seed)
    datasets.discard(hub)
    chosen = rng.sample(sorted(datasets), min(count - count // 2, len(datasets)))
    chosen += rng.sample(sorted(jobs), min(count // 2, len(jobs)))
    return [hub, *chosen]


# ---------------------------------------------------------------------------------------------------- the run
def measure(options: argparse.Namespace, work: Path) -> dict:
    from include.lineage.emit import tokens

    work.mkdir(parents=True, exist_ok=True)
    var = work / "var"
    token_file = tokens.ensure_tokens(var / "secrets" / tokens.TOKENS_FILE_NAME)
    loaded = tokens.load_tokens(token_file)
    writer = next(token.value for token in loaded if "write" in token.scopes)
    reader = next(token.value for token in loaded if "read" in token.scopes)
    env = {**os.environ, "PIPELINE_VAR_DIR": str(var)}

    history = History(options.size, days=options.days)
    events = list(history.events())
    hub_namespace, hub_name = table_key(history.hubs[0]).split("|", 1)
    hub = f"dataset:{hub_namespace}:{hub_name}"
    asked = sample_nodes(events, hub, options.nodes, options.seed)
    results: dict = {
        "size": options.size,
        "days": options.days,
        "dags": history.dag_count,
        "clients": options.clients,
        "depth": DEPTH,
        "repetitions": options.repetitions,
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
        "ignored_fields": sorted(IGNORED) + ["*Uuids"],
        "hub": hub,
        "asked": asked,
        "ingest": {},
        "lineage": {},
        "comparison": {},
    }
    answers: dict[str, dict[str, dict]] = {}
    sqlite_path = work / "store.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{sqlite_path}{suffix}").unlink(missing_ok=True)

    with postgres_server(work / "postgres") as database:
        marquez = (
            nullcontext(options.marquez_url.rstrip("/"))
            if options.marquez_url
            else marquez_server(options.marquez_jar, database("marquez"), work / "marquez")
        )
        servers = {
            "marquez": (lambda: nullcontext(marquez_base), None, None),
            "lineage_sqlite": (lambda: lineage_server(f"sqlite:///{sqlite_path}", env), writer, reader),
            "lineage_postgresql": (lambda: lineage_server(database("lineage"), env), writer, reader),
        }
        with marquez as marquez_base:
            for name, (start, write_token, read_token) in servers.items():
                with start() as base:
                    _progress(f"{name}: posting {len(events):,} events from {options.clients} client(s)")
                    results["ingest"][name] = post_events(base, events, write_token, options.clients)
                    results["ingest"][name]["load_average_after"] = os.getloadavg()
                    _progress(f"{name}: {json.dumps(results['ingest'][name])[:400]}")
                    answers[name] = {}
                    results["lineage"][name] = {}
                    for node_id in asked:
                        summary, answer = ask(base, node_id, read_token, options.repetitions)
                        results["lineage"][name][node_id] = summary
                        answers[name][node_id] = answer
                    hub_figures = results["lineage"][name][hub]
                    _progress(f"{name}: hub p50 {hub_figures['p50_ms']} ms, {hub_figures['nodes']} nodes")

    results["comparison"] = comparisons(answers, asked)
    results["errors"] = {
        name: {node_id: answer["error"] for node_id, answer in by_node.items() if "error" in answer}
        for name, by_node in answers.items()
    }
    results["load_average_end"] = os.getloadavg()
    (work / ANSWERS).write_text(json.dumps(answers))
    return results


# ---------------------------------------------------------------------------------------------------- report
def _cell(value) -> str:
    return "" if value is None else f"{value:,}" if isinstance(value, int | float) else str(value)


def to_markdown(results: dict) -> str:
    names = list(results["ingest"])
    lines = [
        f"# Marquez 0.51 vs lineage serve: {results['size']:,} events, {results['clients']} client(s), "
        f"depth {results['depth']} (load average {results['load_average_start'][0]:.2f} at the start, "
        f"{results['load_average_end'][0]:.2f} at the end; {results['cpus']} CPUs)",
        "",
        "| figure | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        "| ingest events/s | " + " | ".join(_cell(results["ingest"][n]["events_per_second"]) for n in names) + " |",
        "| refused | " + " | ".join(_cell(results["ingest"][n]["refused"]) for n in names) + " |",
    ]
    for node_id in results["asked"]:
        label = "hub " + node_id if node_id == results["hub"] else node_id
        cells = []
        for name in names:
            f = results["lineage"][name][node_id]
            cells.append(
                f"{_cell(f['p50_ms'])} / {_cell(f['p95_ms'])} ms; {_cell(f['nodes'])} nodes; first "
                f"{_cell(f['first_ms'])}"
                if f["status"] == 200
                else f"status {f['status']}"
            )
        lines.append(f"| `{label}` p50 / p95 | " + " | ".join(cells) + " |")
    for key, comparison in results["comparison"].items():
        merged = comparison["merged"]
        lines += ["", f"## {key}: {merged['same']} of {merged['answers']} answers the same", ""]
        for side in ("only_ours", "only_theirs"):
            for kind, entry in merged[side].items():
                lines.append(
                    f"- {kind} {side.replace('_', ' ')}: {entry['items']} in {entry['answers']} answers, "
                    f"e.g. `{entry['example']['item']}` (asked `{entry['example']['asked']}`)"
                )
        for path, entry in sorted(merged["data"].items(), key=lambda item: -item[1]["nodes"]):
            example = entry["example"]
            lines.append(
                f"- data `{path}`: {entry['nodes']} nodes in {entry['answers']} answers, e.g. "
                f"`{example['node']}` ours {json.dumps(example['ours'])[:120]} / "
                f"theirs {json.dumps(example['theirs'])[:120]}"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.marquez_compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=8000)
    parser.add_argument("--marquez-jar", type=Path, default=DEFAULT_JAR)
    parser.add_argument("--marquez-url", help="an empty Marquez already running, instead of starting the jar")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--nodes", type=int, default=10, help="random datasets and jobs asked, besides the hub")
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--days",
        type=int,
        default=DAYS,
        help="the generated history's days: fewer days give more DAGs for the same --size (more lineage across DAGs)",
    )
    parser.add_argument("--out", type=Path, help="where the JSON goes (default var/bench/marquez_compare.json)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="scratch: stores, cluster, Marquez's log")
    parser.add_argument(
        "--recompare",
        action="store_true",
        help="no servers: compare again the answers of the last run (in --work) into its marquez_compare.json",
    )
    options = parser.parse_args(argv)
    out = options.out or settings.Paths.current().bench / RESULTS
    if options.recompare:
        results = json.loads(out.read_text())
        answers = json.loads((options.work / ANSWERS).read_text())
        results["comparison"] = comparisons(answers, results["asked"])
        results["ignored_fields"] = sorted(IGNORED) + ["*Uuids"]
    else:
        results = measure(options, options.work)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    print(to_markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
