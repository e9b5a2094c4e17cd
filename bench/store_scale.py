"""The lineage store at a platform's scale (issue 52): a generated year of lineage (``bench/history.py``) at several
sizes, on PostgreSQL (a throwaway cluster the bench starts on loopback) and on SQLite, side by side in one run.

For each size and each database, into a fresh store:

- **backlog**: ``lineage ingest`` (the real command, a subprocess) of the history written as one gzip-compressed
  JSON-lines file per day (``<day>.jsonl.gz``), each file one transaction: events/s of wall clock and of the
  command's CPU;
- **storage**: bytes on disk per event, tables and indexes, and the largest tables;
- **answers**, p50/p95 in ms over ``queries`` questions each (in this process, through ``LineageQueries`` as the CLI
  and the server call it): ``lineage upstream`` and ``impact`` of random datasets, upstream of a hub, ``--as-of`` the
  middle of the year, run provenance, ``lineage diff --upstream`` of a job's two latest runs, Marquez's
  ``GET /api/v1/lineage`` at depth 20 from a hub (first answer, which builds the Marquez model, apart; then split into
  the walk, the response's building and its JSON), and the lineage page's first graph;
- **served ingest**: a real ``lineage serve`` over the filled store takes the history's next events, one per POST
  and in batches of 100, from ``clients`` clients at once;
- **retention** (the largest size only): ``lineage prune --older-than 90d`` (90 days before the history's end) while
  a reader asks upstream questions: the prune's time, the readers' p95 before and during.

Nothing is asserted. Figures go to ``var/bench/results.json`` under ``store_scale`` (keyed
``<database>_<events>``) and to ``var/bench/store-scale.md``.

    python -m bench.store_scale --sizes 100000,1000000 [--databases postgresql,sqlite] [--queries 40]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import json
import multiprocessing
import os
import random
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests

from bench.history import History, table_key
from bench.ingest_throughput import serve, with_store
from include.core import ports, settings

SECTION = "store_scale"
DATABASES = ("postgresql", "sqlite")
DEFAULT_SIZES = (100_000,)
DEFAULT_QUERIES = 40
CLIENTS = 4
BATCH = 100
POST_EVENTS = 2_000
RETENTION = timedelta(days=90)
WEEK_DAYS = 7
# gzip level of the day files. Measured on 5,000 generated events (23.8 MB of JSON lines): level 1 wrote 1.62 MB
# (14.7x, 312 MB/s compressing, 439 MB/s decompressing), level 6 0.75 MB (31.6x, 151 MB/s, 519 MB/s); writing the
# day files took 96 ms at 1 and 178 ms at 6 against 460 ms to generate the events. Level 6: a year at 10^7 events is
# ~1.7 GB on disk instead of ~3.6 GB (~53 GB uncompressed), for ~3 minutes more of writing, and reads no slower.
GZIP_LEVEL = 6
MANIFEST = "history.json"


def _progress(message: str) -> None:
    print(f"bench [{time.strftime('%H:%M:%S')}] store_scale: {message}", flush=True)


def _mean(values: list[float]) -> float:
    return round(statistics.mean(values), 1) if values else 0


def percentiles(values_ms: list[float]) -> dict:
    """p50 and p95 (nearest rank) of a list of milliseconds, with how many there were."""
    if not values_ms:
        return {"p50_ms": None, "p95_ms": None, "count": 0}
    ordered = sorted(values_ms)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"p50_ms": round(statistics.median(ordered), 3), "p95_ms": round(p95, 3), "count": len(ordered)}


def timed(call: Callable[[], object]) -> tuple[object, float]:
    started = time.perf_counter()
    result = call()
    return result, (time.perf_counter() - started) * 1000


def _day_parts(history: History, day: int) -> list[tuple[str, bytes, int, str]]:
    """Generated day ``day`` as gzip members by event date (a day's last runs may end after midnight): each
    (date, compressed lines, how many, the last event time)."""
    parts: list[tuple[str, list[str]]] = []
    for line in history.day_lines(day):
        date = line[14:24]  # "eventTime":"..." is the first key of every generated event
        if not parts or parts[-1][0] != date:
            parts.append((date, []))
        parts[-1][1].append(line)
    return [
        (
            date,
            gzip.compress("".join(f"{line}\n" for line in lines).encode(), GZIP_LEVEL),
            len(lines),
            max(line[14:38] for line in lines),
        )
        for date, lines in parts
    ]


_WORKER_HISTORY: History | None = None  # the history a writing process generates days of (set by ``_start_worker``)


def _start_worker(history: History) -> None:
    global _WORKER_HISTORY
    _WORKER_HISTORY = history


def _worker_day(day: int) -> list[tuple[str, bytes, int, str]]:
    return _day_parts(_WORKER_HISTORY, day)


def write_days(history: History, folder: Path, workers: int | None = None) -> tuple[list[Path], str]:
    """The history as one gzip-compressed JSON-lines file per event day, ``<day>.jsonl.gz`` (a day's backlog: what
    ``lineage ingest`` takes in one transaction); the files in order and the last event time.

    Days are generated by ``workers`` processes at once (default: one per core; a 10^7-event year took 18 minutes in
    one), each ``History.day_lines`` alone, and appended in order as gzip members, which read back as one stream;
    the day that reaches the history's size is cut at its last event. Written afresh on every run: the day files an
    earlier run left in ``folder`` are deleted first, the plain ``<day>.jsonl`` of the runs before the files were
    compressed as well (some thirty times the disk), so that the folder holds this history only."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in [*folder.glob("????-??-??.jsonl"), *folder.glob("????-??-??.jsonl.gz")]:
        stale.unlink()
    workers = workers or os.cpu_count() or 1
    files: list[Path] = []
    written, last = 0, ""
    context = multiprocessing.get_context("fork")  # the history's DAGs go to each worker with the process
    with context.Pool(workers, initializer=_start_worker, initargs=(history,)) as pool:
        for parts in pool.imap(_worker_day, itertools.count(), chunksize=1):
            for date, compressed, count, part_last in parts:
                if written + count > history.total:  # the history ends inside this part: keep its first lines
                    count = history.total - written
                    lines = gzip.decompress(compressed).decode("utf-8").splitlines(keepends=True)[:count]
                    compressed = gzip.compress("".join(lines).encode(), GZIP_LEVEL)
                    part_last = max(line[14:38] for line in lines)
                if not files or files[-1].name != f"{date}.jsonl.gz":
                    files.append(folder / f"{date}.jsonl.gz")
                with files[-1].open("ab") as out:
                    out.write(compressed)
                written, last = written + count, max(last, part_last)
                if written == history.total:
                    pool.terminate()  # days generated ahead are not wanted
                    return files, last
    raise AssertionError("unreachable: the days go on until the history's size")


def history_identity(history: History) -> dict:
    """What makes two histories the same events: their size, seed, days and start, and the generator's source."""
    source = Path(__file__).with_name("history.py").read_bytes()
    return {
        "events": history.total,
        "seed": history.seed,
        "days": history.days,
        "start": history.start.isoformat(),
        "generator_sha256": hashlib.sha256(source).hexdigest(),
    }


def kept_days(history: History, folder: Path) -> tuple[list[Path], str]:
    """``write_days``, unless ``folder`` already holds this very history (a 10^7-event year is ~20 minutes of
    writing): its manifest, written last, names the history and the files; files missing or a manifest of another
    history mean writing it again."""
    manifest = folder / MANIFEST
    identity = history_identity(history)
    try:
        kept = json.loads(manifest.read_text())
        files = [folder / name for name in kept["files"]]
        if kept["history"] == identity and all(path.exists() for path in files):
            return files, kept["end"]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no manifest, or one this code cannot read: the history is written again
    manifest.unlink(missing_ok=True)
    files, end = write_days(history, folder)
    manifest.write_text(json.dumps({"history": identity, "files": [path.name for path in files], "end": end}))
    return files, end


# ---------------------------------------------------------------------------------------------------- databases
class Databases:
    """The lineage role's databases in a cluster: ``databases(name, fresh=True)`` gives one's URL, made afresh
    (dropped first) unless ``fresh`` is false; ``drop(name)`` gives its disk back."""

    def __init__(self, cluster, password: str):
        self.cluster, self.password = cluster, password

    def __call__(self, name: str, fresh: bool = True) -> str:
        if fresh:
            self.drop(name)
        self.cluster.ensure_database(name, "lineage")
        return f"postgresql+psycopg2://lineage:{self.password}@127.0.0.1:{self.cluster.port}/{name}"

    def drop(self, name: str) -> None:
        self.cluster.sql(f'DROP DATABASE IF EXISTS "{name}"')


@contextmanager
def postgres_server(folder: Path, keep: bool = False) -> Iterator[Databases]:
    """A PostgreSQL cluster on loopback; yields its ``Databases``. A throwaway cluster is deleted at the end; a kept
    one (``keep``) is only stopped, its role's password in ``<folder>.password`` (mode 600), and is started again by
    the next run."""
    from include.services import postgres

    if folder.exists() and not keep:
        shutil.rmtree(folder, ignore_errors=True)
    cluster = postgres.Cluster(folder, ports.free_port()).init()
    if cluster.running():  # a kept cluster left running by an interrupted run: its port, not a new one
        cluster = postgres.Cluster(folder, cluster.running_port() or cluster.port)
    cluster.start(durable=False)
    password_file = folder.with_name(folder.name + ".password")
    password = password_file.read_text().strip() if keep and password_file.exists() else secrets.token_hex(16)
    if keep:
        password_file.write_text(password)
        password_file.chmod(0o600)
    cluster.ensure_role("lineage", password)

    try:
        yield Databases(cluster, password)
    finally:
        cluster.stop()
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def storage(store) -> dict:
    """Bytes on disk: tables (with their TOAST on PostgreSQL), indexes, and per table."""
    from sqlalchemy import text

    per_table: dict[str, dict] = {}
    with store.engine.connect() as conn:
        if store.dialect == "postgresql":
            rows = conn.execute(
                text(
                    "SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
                )
            ).all()
            for name, table, indexes in rows:
                per_table[name] = {"table": int(table), "indexes": int(indexes)}
        else:
            rows = conn.execute(
                text(
                    "SELECT s.name, m.type, m.tbl_name, sum(s.pgsize) FROM dbstat s JOIN sqlite_master m "
                    "ON m.name = s.name GROUP BY s.name"
                )
            ).all()
            for _name, kind, table, size in rows:
                entry = per_table.setdefault(table, {"table": 0, "indexes": 0})
                entry["table" if kind == "table" else "indexes"] += int(size)
    tables = sum(entry["table"] for entry in per_table.values())
    indexes = sum(entry["indexes"] for entry in per_table.values())
    largest = sorted(per_table.items(), key=lambda item: -(item[1]["table"] + item[1]["indexes"]))[:4]
    return {"table_bytes": tables, "index_bytes": indexes, "largest": dict(largest)}


# ---------------------------------------------------------------------------------------------------- ingest
def backlog_ingest(
    files: list[Path], url: str, env: dict, chunk: int = 100, after: Callable[[int, dict], None] | None = None
) -> dict:
    """``lineage ingest`` of the day files, ``chunk`` files a command (the store named in its environment,
    ``with_store``); wall and child CPU seconds. ``after(done, figures)`` is called after each command with the files
    done so far and the figures until then."""
    lineage = str(Path(sys.executable).with_name("lineage"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    figures = {"seconds": 0.0, "cpu_seconds": 0.0}
    for start in range(0, len(files), chunk):
        subprocess.run(
            [lineage, "ingest", *map(str, files[start : start + chunk])],
            env=with_store(env, url),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (now.ru_utime - before.ru_utime) + (now.ru_stime - before.ru_stime)
        figures = {"seconds": round(time.perf_counter() - started, 2), "cpu_seconds": round(cpu, 2)}
        if after:
            after(min(start + chunk, len(files)), figures)
    return figures


def day_file_events(files: list[Path]) -> int:
    """How many events (lines) the day files hold."""
    count = 0
    for path in files:
        with gzip.open(path, "rb") as day:
            count += sum(1 for line in day if line.strip())
    return count


# ---------------------------------------------------------------------------------------------------- kept stores
# A kept store (``--keep``) is built over as many runs as it takes (10^7 events are hours of ingest here): its record,
# ``build-<database>-<events>.json`` beside it, says which history it holds, how many of its day files are in, the
# seconds and CPU seconds they took, and each run's share. An interrupted run ingests again at most the last command's
# files, which the store keeps once (events are deduplicated). A measured store has had the week held back, more
# events and a prune: it is "spent", and the next run builds it again.
BUILD_CHUNK = 5


def read_build(record: Path, identity: dict) -> dict | None:
    """The build record of the store, or None when there is none, it is of another history, or the store is spent."""
    try:
        build = json.loads(record.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(build, dict) or build.get("history") != identity or build.get("state") != "building":
        return None
    return build


def resume_build(files: list[Path], url: str, env: dict, record: Path, build: dict) -> dict:
    """Ingest the files the record says are not in yet, writing the record after each command; the build's totals."""
    done = int(build["files_done"])
    if done >= len(files):
        return build
    segment = {"files_from": done, "seconds": 0.0, "cpu_seconds": 0.0, "load_average_start": os.getloadavg()}
    build["segments"].append(segment)
    base_seconds, base_cpu = build["seconds"], build["cpu_seconds"]

    def note(finished: int, figures: dict) -> None:
        build["files_done"] = done + finished
        build["seconds"] = round(base_seconds + figures["seconds"], 2)
        build["cpu_seconds"] = round(base_cpu + figures["cpu_seconds"], 2)
        segment.update(figures, files_to=done + finished, load_average_end=os.getloadavg())
        record.write_text(json.dumps(build, indent=1))

    _progress(f"{record.name}: {done} of {len(files)} day files in; ingesting the rest")
    backlog_ingest(files[done:], url, env, chunk=BUILD_CHUNK, after=note)
    return build


def in_shares(work: Callable[[list], None], items: list, clients: int) -> float:
    """``work(share)`` in ``clients`` threads at once, each given every ``clients``-th item (its share, in order);
    seconds of wall clock. The first error a thread raised is raised once all have ended."""
    errors: list[BaseException] = []

    def client(share: list) -> None:
        try:
            work(share)
        except BaseException as error:  # noqa: BLE001 - raised below, in the caller's thread
            errors.append(error)

    threads = [threading.Thread(target=client, args=(items[index::clients],)) for index in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started


def _post_all(base: str, token: str, bodies: list, path: str, clients: int) -> float:
    """Post ``bodies`` from ``clients`` threads (each its share, in order); seconds of wall clock."""

    def post(share: list) -> None:
        with requests.Session() as session:
            session.headers["Authorization"] = f"Bearer {token}"
            for body in share:
                session.post(f"{base}{path}", json=body, timeout=600).raise_for_status()

    return in_shares(post, bodies, clients)


def served_ingest(url: str, env: dict, token: str, events: list[dict], clients: int) -> dict:
    """The next events through a real ``lineage serve`` over the filled store: half one per POST, half in batches."""
    half = len(events) // 2
    singles, batched = events[:half], events[half:]
    process, base = serve(url, env)
    try:
        single_seconds = _post_all(base, token, singles, "/api/v1/lineage", clients)
        batches = [batched[start : start + BATCH] for start in range(0, len(batched), BATCH)]
        batch_seconds = _post_all(base, token, batches, "/api/v1/lineage/batch", clients)
    finally:
        process.terminate()
        process.wait(timeout=60)
    return {
        "clients": clients,
        "single_post_events_per_second": round(len(singles) / single_seconds, 1),
        "batch_post_events_per_second": round(len(batched) / batch_seconds, 1),
        "batch_size": BATCH,
        "events": len(events),
    }


# ---------------------------------------------------------------------------------------------------- answers
def _sample(store, history: History, count: int, seed: int) -> dict:
    """What the questions ask about: random generated tables that are in the store, a hub, jobs with two runs."""
    from sqlalchemy import select

    from include.lineage.store.schema import datasets_table, jobs_table, runs_table

    rng = random.Random(seed)
    with store.engine.connect() as conn:
        names = conn.execute(select(datasets_table.c.namespace, datasets_table.c.name)).all()
        tables = sorted(f"{ns}:{name}" for ns, name in names if "/warehouse/" in name and "/shared/" not in name)
        jobs = sorted(
            conn.execute(
                select(jobs_table.c.name, jobs_table.c.id).where(jobs_table.c.name.like("%.build_stage_%"))
            ).all()
        )
        pairs = []
        for _name, job_id in rng.sample(jobs, min(count, len(jobs))):
            # by the job's id, which its index finds: joined by name, SQLite scanned every run for each job (50
            # scans of a 7 GB table on the 10^7 year)
            rows = conn.execute(
                select(runs_table.c.id)
                .where(runs_table.c.job_id == job_id, runs_table.c.state == "COMPLETED")
                .order_by(runs_table.c.first_event_time.desc())
                .limit(2)
            ).all()
            if len(rows) == 2:
                pairs.append((rows[1].id, rows[0].id))
    hub_namespace, hub_name = table_key(history.hubs[0]).split("|", 1)
    return {
        "datasets": [rng.choice(tables) for _ in range(count)] if tables else [],
        "hub": f"dataset:{hub_namespace}:{hub_name}",
        "run_pairs": pairs,
    }


def answers(
    store, history: History, queries: int, as_of: str, seed: int = 7, measured: Callable[[dict], None] | None = None
) -> dict:
    """The answers' times; ``measured(figures)`` is called with the figures so far after each kind of question (at
    10^7 events they take tens of minutes: a stopped run keeps what it had)."""
    measured = measured or (lambda figures: None)
    from include.core.jsontext import json_bytes
    from include.lineage.api import data
    from include.lineage.queries import LineageQueries, marquez
    from include.lineage.queries.model import marquez_walk

    sample = _sample(store, history, queries, seed)
    lineage = LineageQueries(store)
    figures: dict = {"datasets_asked": len(sample["datasets"]), "run_pairs": len(sample["run_pairs"])}
    series: dict[str, list[float]] = {name: [] for name in ("upstream", "impact", "as_of_upstream")}
    sizes: dict[str, list[int]] = {"upstream": [], "impact": []}
    for ref in sample["datasets"]:
        sub, ms = timed(lambda ref=ref: lineage.upstream(ref))
        series["upstream"].append(ms)
        sizes["upstream"].append(len(sub.nodes))
        result, ms = timed(lambda ref=ref: lineage.impact(ref))
        series["impact"].append(ms)
        sizes["impact"].append(len(result["subgraph"].nodes))
        series["as_of_upstream"].append(timed(lambda ref=ref: lineage.upstream(ref, as_of=as_of))[1])
    for name, values in series.items():
        figures[name] = percentiles(values)
    for name, values in sizes.items():
        figures[name]["mean_nodes"] = _mean(values)
    measured(figures)

    # Marquez's GET /api/v1/lineage from the hub, depth 20: the first answer builds the model from every event
    _, first = timed(lambda: lineage.marquez_lineage(sample["hub"], depth=20))
    # ... and the first after a restart (a new process's model): from the snapshot the first one wrote
    _, restarted = timed(lambda: LineageQueries(store).marquez_lineage(sample["hub"], depth=20))
    walk_ms, build_ms, json_ms, whole_ms = [], [], [], []
    nodes = 0
    for _ in range(max(3, queries // 4)):
        answer, ms = timed(lambda: lineage.marquez_lineage(sample["hub"], depth=20))
        whole_ms.append(ms)
        nodes = len(answer["graph"])
        with store.engine.connect() as conn:
            started = time.perf_counter()
            model = lineage._models.model(conn)
            kind, focus = marquez.marquez_focus(conn, sample["hub"], model, store.url)
            job_io = model.job_io()
            jobs = marquez_walk(job_io, model.start_job(focus) if kind == "dataset" else focus, 20)
            walked = time.perf_counter()
            graph = marquez.marquez_graph_of(conn, jobs, job_io, focus if kind == "dataset" else None, None)
            built = time.perf_counter()
            json_bytes(graph)  # as lineage serve encodes it (api/answers.py)
            done = time.perf_counter()
        walk_ms.append((walked - started) * 1000)
        build_ms.append((built - walked) * 1000)
        json_ms.append((done - built) * 1000)
    figures["marquez_lineage_depth20"] = {
        **percentiles(whole_ms),
        "nodes": nodes,
        "first_answer_ms": round(first, 1),
        "first_answer_after_restart_ms": round(restarted, 1),
        "walk": percentiles(walk_ms),
        "response_building": percentiles(build_ms),
        "json": percentiles(json_ms),
    }
    measured(figures)

    # with each answer's size: a figure that grows with the platform (more DAGs reading each other's tables) rather
    # than with history shows as a larger answer in the same time per entry
    provenance, diffs, provenance_runs, diff_runs = [], [], [], []
    for run_a, run_b in sample["run_pairs"]:
        answer, ms = timed(lambda run=run_b: lineage.run_lineage(run, depth=20))
        provenance.append(ms)
        provenance_runs.append(len(answer["runs"]))
        answer, ms = timed(lambda a=run_a, b=run_b: lineage.diff(a, b, upstream=True))
        diffs.append(ms)
        diff_runs.append(sum(len(side) for side in answer["upstream"]["provenance"]))
    figures["run_provenance"] = {**percentiles(provenance), "mean_runs": _mean(provenance_runs)}
    figures["diff_upstream"] = {**percentiles(diffs), "mean_runs_compared": _mean(diff_runs)}
    measured(figures)
    # the first draw after a start reads every audit run (api/audits.py); later draws read only new events' runs
    first_page = timed(lambda: data.graph(lineage))[1]
    page = [timed(lambda: data.graph(lineage))[1] for _ in range(3)]
    figures["page_first_graph"] = {**percentiles(page), "first_after_start_ms": round(first_page, 1)}
    measured(figures)
    # last: it listed every run that read the hub's downstream, minutes a question on a year's store (6.4 x 10^6
    # events, docs/performance.md) until it listed the newest and counted the rest; if it is stopped here, what came
    # before is kept
    hub_ms = []
    for _ in range(max(3, queries // 4)):
        hub, ms = timed(lambda: lineage.impact(sample["hub"]))
        hub_ms.append(ms)
    figures["hub_impact"] = {**percentiles(hub_ms), "nodes": len(hub["subgraph"].nodes)}
    figures["hub_impact"]["runs"] = hub["runsTotal"]  # counted; the newest RUNS_LISTED of them listed
    return figures


def prune_while_reading(store, history: History, end: str, seed: int = 11) -> dict:
    """``lineage prune`` of what is older than 90 days before the history's end, while a reader asks upstream
    questions of random datasets; the readers' latencies before (as long as the prune) and during."""
    from include.lineage.queries import LineageQueries
    from include.lineage.store.retention import prune_store

    sample = _sample(store, history, 50, seed)["datasets"]
    lineage = LineageQueries(store)
    stop = threading.Event()
    during: list[float] = []

    def reader(into: list[float]) -> None:
        index = 0
        while True:  # at least one answer, however short the prune
            ref = sample[index % len(sample)]
            into.append(timed(lambda ref=ref: lineage.upstream(ref))[1])
            index += 1
            if stop.is_set():
                break

    now = datetime.fromisoformat(end.replace("Z", "+00:00")).astimezone(UTC)
    thread = threading.Thread(target=reader, args=(during,))
    thread.start()
    try:
        report, ms = timed(lambda: prune_store(store, RETENTION, now=now, vacuum=True))
    finally:
        stop.set()
        thread.join()
    before: list[float] = []
    stop.clear()
    thread = threading.Thread(target=reader, args=(before,))
    thread.start()
    time.sleep(min(ms / 1000, 30))
    stop.set()
    thread.join()
    return {
        "seconds": round(ms / 1000, 2),
        "horizon": report.horizon,
        "deleted": dict(report.counts),
        # what a writer waited for at most: the prune takes the writers' lock one bounded transaction at a time
        "transactions": report.transactions,
        "longest_transaction_seconds": round(report.longest_transaction, 2),
        "phases_seconds": report.seconds,  # the VACUUM (SQLite) is one transaction: writers wait for all of it
        "readers_during": percentiles(during),
        "readers_after": percentiles(before),
    }


def prune_room(store) -> str | None:
    """Why the prune cannot be measured on this disk, or None. SQLite's prune deletes in bounded transactions (its
    write-ahead log stays small), then a VACUUM writes the pruned copy, and the copy again through the log: up to a
    store's own size free is asked for, so that a year's store does not fill the disk it shares with everything
    else. PostgreSQL's deletes only mark rows, and its log is recycled at checkpoints."""
    from include.lineage.store.retention import sqlite_file, sqlite_size

    path = sqlite_file(store)
    if path is None:
        return None
    size = sqlite_size(path) or 0
    free = shutil.disk_usage(path.parent).free
    if free >= size:
        return None
    return f"{free / 1e9:.1f} GB free beside {path.name}, {size / 1e9:.1f} GB asked for (its own size)"


# ---------------------------------------------------------------------------------------------------- the run
def measure(
    work_dir: Path,
    sizes: list[int],
    databases: list[str],
    queries: int,
    clients: int,
    post_events: int,
    keep: bool = False,
    build_only: bool = False,
    as_built: bool = False,
) -> dict:
    from include.lineage.emit import tokens
    from include.lineage.store import LineageStore
    from include.lineage.store.schema import events_table
    from include.services import postgres

    if "postgresql" in databases and not postgres.available():
        _progress("PostgreSQL is not installed (include/setup/system_packages.sh installs it): SQLite only")
        databases = [db for db in databases if db != "postgresql"]
    work_dir.mkdir(parents=True, exist_ok=True)
    stores = work_dir / "kept" if keep else work_dir
    stores.mkdir(exist_ok=True)
    var = work_dir / "var"
    token_file = tokens.ensure_tokens(var / "secrets" / tokens.TOKENS_FILE_NAME)
    writer = next(token.value for token in tokens.load_tokens(token_file) if "write" in token.scopes)
    env = {**os.environ, "PIPELINE_VAR_DIR": str(var)}
    results: dict = {"load_average_start": os.getloadavg(), "cpus": os.cpu_count(), "sizes": sizes}
    server = postgres_server(stores / "postgres", keep=keep) if "postgresql" in databases else _none()
    with server as database:
        for size in sizes:
            history = History(size)
            _progress(f"{size:,} events: the history ({history.dag_count} DAGs, one file a day)")
            if keep:
                files, end = kept_days(history, work_dir / f"history-{size}")
            else:
                files, end = write_days(history, work_dir / f"history-{size}")
            # the last week is held back from the build and measured alone: a week's backlog into a store holding
            # the rest of the year (the whole backlog's figures are the build's and the week's together)
            held, week = files[: max(0, len(files) - WEEK_DAYS)], files[-WEEK_DAYS:]
            identity = history_identity(history)
            for db in databases:
                key = f"{db}_{size}"
                record = stores / f"build-{db}-{size}.json"
                build = read_build(record, identity) if keep else None
                if build is None:  # a new store
                    build = {"history": identity, "state": "building", "files_done": 0, "seconds": 0.0}
                    build.update(cpu_seconds=0.0, segments=[])
                    if db == "postgresql":
                        url = database(f"lineage_{size}")
                    else:
                        url = _fresh_sqlite(stores / f"store-{size}.db")
                elif db == "postgresql":
                    url = database(f"lineage_{size}", fresh=False)
                else:
                    url = f"sqlite:///{stores / f'store-{size}.db'}"
                if not _holds_events(url) and build["files_done"]:  # the record outlived its store
                    _progress(f"{key}: the record says {build['files_done']} day files are in, the store is empty")
                    build.update(files_done=0, seconds=0.0, cpu_seconds=0.0, segments=[])
                figures: dict = {"events": size, "dags": history.dag_count, "load_average": os.getloadavg()}
                partial = Partial(work_dir / f"partial-{key}.json", figures)
                if as_built:  # the year so far: what the record says is in, the week after it, the prune from there
                    held, week, end = _as_built(files, build)
                    figures["as_built"] = {"day_files": len(held), "of": len(files) - WEEK_DAYS}
                _progress(f"{key}: lineage ingest of {len(held)} day files (the week after them held back)")
                if keep and not as_built:
                    build = resume_build(held, url, env, record, build)
                elif not keep:
                    build.update(backlog_ingest(held, url, env))
                if build_only:
                    continue
                if keep:  # what follows changes the store: a later run builds it again
                    record.write_text(json.dumps({**build, "state": "spent"}, indent=1))
                week_events = day_file_events(week)
                figures["week_backlog"] = backlog_ingest(week, url, env)
                figures["week_backlog"]["events"] = week_events
                figures["week_backlog"]["events_per_second"] = _rate(week_events, figures["week_backlog"]["seconds"])
                partial.write("week_backlog")
                figures["backlog"] = {
                    "seconds": round(build["seconds"] + figures["week_backlog"]["seconds"], 2),
                    "cpu_seconds": round(build["cpu_seconds"] + figures["week_backlog"]["cpu_seconds"], 2),
                    "runs": max(1, len(build.get("segments", []))),
                }
                store = LineageStore(url)
                stored = figures["events"] = store.count(events_table) if as_built else size
                figures["backlog"]["events_per_second"] = _rate(stored, figures["backlog"]["seconds"])
                figures["backlog"]["events_per_cpu_second"] = _rate(stored, figures["backlog"]["cpu_seconds"])
                try:
                    figures["storage"] = storage(store)
                    total = figures["storage"]["table_bytes"] + figures["storage"]["index_bytes"]
                    figures["storage"]["bytes_per_event"] = round(total / stored, 1)
                    partial.write("storage")
                    _progress(f"{key}: answers")
                    middle = _middle(history, len(held) + len(week) if as_built else None)
                    figures["answers"] = answers(
                        store, history, queries, as_of=middle, measured=partial.part("answers")
                    )
                    partial.write("answers")  # with the hub's impact, measured last
                    following = _following(history, post_events, work_dir / f"history-{size}" if keep else None)
                    _progress(f"{key}: served ingest of {len(following):,} more events")
                    figures["served"] = served_ingest(url, env, writer, following, clients)
                    partial.write("served")
                    if size == max(sizes):
                        short = prune_room(store)
                        if short:
                            _progress(f"{key}: prune not measured: {short}")
                            figures["prune"] = {"skipped": short}
                        else:
                            _progress(f"{key}: prune older than 90 days while reading")
                            figures["prune"] = prune_while_reading(store, history, end)
                            partial.write("prune")
                finally:
                    store.close()
                if keep:  # spent: the next run builds it from the first file; its disk is the next store's room
                    if db == "postgresql":
                        database.drop(f"lineage_{size}")
                    else:
                        _fresh_sqlite(stores / f"store-{size}.db")
                figures["load_average_end"] = os.getloadavg()
                results[key] = figures
                _progress(f"{key}: {json.dumps(summary_row(figures))}")
    results["load_average_end"] = os.getloadavg()
    return results


class Partial:
    """A store's figures as they are measured, in ``path`` (``partial-<database>_<events>.json`` in the bench's
    folder) and the progress log: a 10^7 run's measuring takes most of an hour, and one stopped keeps what it had."""

    def __init__(self, path: Path, figures: dict):
        self.path, self.figures = path, figures

    def write(self, name: str) -> None:
        self.path.write_text(json.dumps(self.figures, indent=1))
        _progress(f"{self.path.stem.removeprefix('partial-')}: {name} {json.dumps(self.figures.get(name))}")

    def part(self, name: str) -> Callable[[dict], None]:
        def measured(so_far: dict) -> None:
            self.figures[name] = so_far
            self.write(name)

        return measured


def _holds_events(url: str) -> bool:
    """Whether the store at ``url`` holds any event; its tables are made first (before any clock starts)."""
    from sqlalchemy import func, select

    from include.lineage.store import LineageStore
    from include.lineage.store.schema import events_table

    store = LineageStore(url)
    try:
        with store.engine.connect() as conn:
            return conn.execute(select(func.max(events_table.c.id))).scalar() is not None
    finally:
        store.close()


def _rate(events: int, seconds: float) -> float:
    return round(events / seconds, 1) if seconds > 0 else 0.0


def _middle(history: History, days: int | None = None) -> str:
    """The middle of the history, or of its first ``days``."""
    return (history.start + timedelta(days=(days or history.days) // 2)).isoformat()


def _as_built(files: list[Path], build: dict) -> tuple[list[Path], list[Path], str]:
    """A kept store measured as far as it is built (``--as-built``): the day files in it, the week after them (held
    back, measured as the backlog it is), and the end of that week, from which the prune counts its 90 days."""
    done = int(build["files_done"])
    if done < 1:
        raise SystemExit("--as-built: the kept store holds no day file yet (make bench-scale-store-year-build first)")
    held, week = files[:done], files[done : done + WEEK_DAYS]
    last = (week or held)[-1].name.split(".")[0]  # <date>.jsonl.gz
    return held, week, f"{last}T23:59:59+00:00"


def _fresh_sqlite(path: Path) -> str:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return f"sqlite:///{path}"


def _following(history: History, count: int, kept: Path | None) -> list[dict]:
    """The ``count`` events after the history; kept beside a kept history, and generated from its last day file's
    last event on when there is one."""
    cache = kept / f"following-{count}.jsonl" if kept else None
    if cache and cache.exists():
        lines = cache.read_text(encoding="utf-8").splitlines()
        if len(lines) == count:
            return [json.loads(line) for line in lines]
    last_day_file = sorted(kept.glob("????-??-??.jsonl.gz"))[-1] if kept else None
    if last_day_file:  # from the history's last event on, not the whole history replayed
        with gzip.open(last_day_file, "rt", encoding="utf-8") as day:
            *_, last_line = day.read().splitlines()
        lines = history.after(last_line, count)
    else:
        lines = list(history.following(count))
    if cache:
        cache.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return [json.loads(line) for line in lines]


@contextmanager
def _none():
    yield None


def summary_row(figures: dict) -> dict:
    a = figures.get("answers", {})

    def p95(name: str):
        return (a.get(name) or {}).get("p95_ms")

    return {
        "backlog_events_per_second": figures["backlog"]["events_per_second"],
        "bytes_per_event": figures.get("storage", {}).get("bytes_per_event"),
        "upstream_p95_ms": p95("upstream"),
        "impact_p95_ms": p95("impact"),
        "marquez_p95_ms": p95("marquez_lineage_depth20"),
        "single_post_events_per_second": figures.get("served", {}).get("single_post_events_per_second"),
        "batch_post_events_per_second": figures.get("served", {}).get("batch_post_events_per_second"),
    }


def to_markdown(results: dict) -> str:
    keys = [key for key in results if isinstance(results[key], dict) and "backlog" in results[key]]
    lines = [
        f"# store_scale (load average {results['load_average_start'][0]:.1f} at the start, "
        f"{results['load_average_end'][0]:.1f} at the end; {results['cpus']} CPUs)",
        "",
        "| figure | " + " | ".join(keys) + " |",
        "|---|" + "---|" * len(keys),
    ]

    def row(label: str, get: Callable[[dict], object]) -> None:
        cells = []
        for key in keys:
            try:
                value = get(results[key])
            except (KeyError, TypeError):
                value = None
            cells.append("" if value is None else f"{value:,}" if isinstance(value, int | float) else str(value))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row(
        "backlog `lineage ingest`, events/s (per CPU-s)",
        lambda f: f"{f['backlog']['events_per_second']:,.0f} ({f['backlog']['events_per_cpu_second']:,.0f})",
    )
    row("served, single posts, events/s", lambda f: f["served"]["single_post_events_per_second"])
    row("served, batches of 100, events/s", lambda f: f["served"]["batch_post_events_per_second"])
    row("bytes per event (tables + indexes)", lambda f: f["storage"]["bytes_per_event"])
    row("largest table", lambda f: next(iter(f["storage"]["largest"])))
    for name in (
        "upstream",
        "impact",
        "hub_impact",
        "as_of_upstream",
        "run_provenance",
        "diff_upstream",
        "marquez_lineage_depth20",
        "page_first_graph",
    ):
        row(f"{name} p50 / p95 (ms)", lambda f, n=name: f"{f['answers'][n]['p50_ms']} / {f['answers'][n]['p95_ms']}")
    row(
        "marquez nodes; first answer; first after a restart (ms)",
        lambda f: (
            f"{f['answers']['marquez_lineage_depth20']['nodes']}; "
            f"{f['answers']['marquez_lineage_depth20']['first_answer_ms']}; "
            f"{f['answers']['marquez_lineage_depth20']['first_answer_after_restart_ms']}"
        ),
    )
    row(
        "page's graph, first draw after a start (ms)",
        lambda f: f["answers"]["page_first_graph"]["first_after_start_ms"],
    )
    row(
        "run provenance: runs per answer; diff: runs compared",
        lambda f: (
            f"{f['answers']['run_provenance']['mean_runs']}; {f['answers']['diff_upstream']['mean_runs_compared']}"
        ),
    )
    row(
        "a week's backlog into the filled store: events; events/s",
        lambda f: f"{f['week_backlog']['events']:,}; {f['week_backlog']['events_per_second']:,.0f}",
    )
    row(
        "hub impact: nodes; runs",
        lambda f: f"{f['answers']['hub_impact']['nodes']}; {f['answers']['hub_impact']['runs']}",
    )
    row(
        "marquez walk / building / JSON p50 (ms)",
        lambda f: " / ".join(
            str(f["answers"]["marquez_lineage_depth20"][part]["p50_ms"])
            for part in ("walk", "response_building", "json")
        ),
    )
    row(
        "prune 90 d: seconds; readers p95 during / after (ms)",
        lambda f: (
            f"not measured: {f['prune']['skipped']}"
            if "skipped" in f["prune"]
            else f"{f['prune']['seconds']}; "
            f"{f['prune']['readers_during']['p95_ms']} / {f['prune']['readers_after']['p95_ms']}"
        ),
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, project: settings.Paths | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.store_scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--databases", default=",".join(DATABASES))
    parser.add_argument("--queries", type=int, default=DEFAULT_QUERIES)
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--post-events", type=int, default=POST_EVENTS)
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the history, the stores and PostgreSQL under kept/ and resume their build where the last run "
        "stopped (10^7 events are hours of ingest)",
    )
    parser.add_argument("--build-only", action="store_true", help="with --keep: build the stores, measure nothing")
    parser.add_argument(
        "--as-built",
        action="store_true",
        help="with --keep: measure the kept stores as far as they are built (the year so far), building no more",
    )
    options = parser.parse_args(argv)
    if options.build_only and not options.keep:
        parser.error("--build-only builds kept stores: add --keep")
    if options.as_built and (not options.keep or options.build_only):
        parser.error("--as-built measures kept stores: add --keep, without --build-only")
    project = project or settings.Paths.current()
    sizes = [int(size) for size in options.sizes.split(",")]
    databases = [db for db in options.databases.split(",") if db]
    if set(databases) - set(DATABASES):
        parser.error(f"--databases: {', '.join(DATABASES)}")
    results = measure(
        project.var / "bench-state-store-scale",
        sizes,
        databases,
        options.queries,
        options.clients,
        options.post_events,
        keep=options.keep,
        build_only=options.build_only,
        as_built=options.as_built,
    )
    if options.build_only:
        return 0
    out = project.bench
    out.mkdir(parents=True, exist_ok=True)
    combined = out / "results.json"
    merged = json.loads(combined.read_text()) if combined.exists() else {}
    section = merged.get(SECTION, {})
    section.update(results)
    merged[SECTION] = section
    combined.write_text(json.dumps(merged, indent=2))
    (out / "store-scale.md").write_text(to_markdown(results))
    print(to_markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
