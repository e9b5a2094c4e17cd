"""The ``lineage`` command's arguments: one small function per command registers its own (``COMMANDS``), on the
shared option groups (``--store``; ``--json``; ``--depth``; ``--as-of``/``--all-history``). What each command does
is in ``include/lineage/cli/__init__.py``, which maps the command's name to its handler.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from include.core import naming

STORE_HELP = "SQLAlchemy URL of the store (default: $LINEAGE_STORE_URL or var/lineage/store.db)"


@dataclass(frozen=True)
class Options:
    """The option groups commands share (argparse parents)."""

    store: argparse.ArgumentParser  # --store, after the command too
    query: argparse.ArgumentParser  # --store, --json
    walk: argparse.ArgumentParser  # --store, --json, --depth
    when: argparse.ArgumentParser  # --as-of, --all-history


def shared_options() -> Options:
    from include.lineage.queries import DEFAULT_DEPTH

    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--store", metavar="URL", default=argparse.SUPPRESS, help=STORE_HELP)
    query = argparse.ArgumentParser(add_help=False, parents=[store])
    query.add_argument("--json", action="store_true", help="print JSON (Marquez's lineage response shape for graphs)")
    walk = argparse.ArgumentParser(add_help=False, parents=[query])
    walk.add_argument(
        "--depth", type=int, default=DEFAULT_DEPTH, help=f"at most this many edges away (default {DEFAULT_DEPTH})"
    )
    when = argparse.ArgumentParser(add_help=False)
    when.add_argument(
        "--as-of",
        metavar="TIME",
        default=None,
        help="the graph as it was at TIME, an ISO-8601 time with its UTC offset (2025-02-01T10:00:00+01:00, ...Z): "
        "each job as the version of its latest run started by then, datasets first seen by then",
    )
    when.add_argument(
        "--all-history",
        action="store_true",
        help="every edge ever seen (not only the current graph), each with when it was first and last seen",
    )
    return Options(store, query, walk, when)


def runs_listed(text: str) -> int | None:
    """``--runs``: a count of 0 or more, or ``all`` (None)."""
    if text == "all":
        return None
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a count of 0 or more, or all")
    return count


def positive_count(text: str) -> int:
    """A count of 1 or more (``--batch-runs``)."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a count of 1 or more")
    return count


# add(name, help, parents) -> the command's own parser
Add = Callable[..., argparse.ArgumentParser]


def ingest(add: Add, options: Options) -> None:
    sub = add(
        "ingest",
        "store OpenLineage events; the very same event again is recognised and skipped, different events of one run "
        "are all kept; each file all or nothing",
        [options.store],
    )
    sub.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="JSON-lines or JSON event files, gzip-compressed or not, or - for stdin (default: every event file under var/lineage/)",
    )


def serve(add: Add, options: Options) -> None:
    sub = add(
        "serve",
        "serve POST /api/v1/lineage (OpenLineage http transport), GET /api/v1/lineage and "
        "GET /api/v1/runlineage/upstream (Marquez's)",
        [options.store],
    )
    sub.add_argument("--port", type=int, default=5000, help="port (default 5000, Marquez's)")
    sub.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sub.add_argument(
        "--tokens", metavar="FILE", default=None, help="bearer tokens (default var/secrets/lineage-tokens.json)"
    )
    sub.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME", help="another name clients reach it by (Host)"
    )
    sub.add_argument("--docs", action="store_true", help="serve /docs and /openapi.json (off by default)")
    sub.add_argument("--no-auth", action="store_true", help="no token required (refused on a non-loopback address)")


def token(add: Add, options: Options) -> None:
    sub = add("token", "list, add or remove bearer tokens of `lineage serve` (rotation: add, move, remove)")
    sub.add_argument("token_action", choices=["list", "add", "remove"], nargs="?", default="list")
    sub.add_argument("name", nargs="?", default=None, metavar="NAME")
    sub.add_argument("--scope", action="append", choices=["read", "write"], default=None, help="read and/or write")


def prune(add: Add, options: Options) -> None:
    from include.lineage.store.retention import BATCH_RUNS

    sub = add(
        "prune",
        "delete events, runs and dataset versions older than a horizon, keeping every current version",
        [options.store],
    )
    sub.add_argument(
        "--older-than", metavar="AGE", default=None, help="e.g. 90d, 12h (default $LINEAGE_RETENTION: 395d)"
    )
    sub.add_argument("--dry-run", action="store_true", help="count what would go; change nothing")
    sub.add_argument(
        "--vacuum",
        action="store_true",
        help="SQLite: give the freed space back to the file system (writers wait while the store is rewritten)",
    )
    sub.add_argument(
        "--batch-runs",
        metavar="N",
        type=positive_count,
        default=BATCH_RUNS,
        help=f"old runs deleted in one transaction, the longest writers wait (default {BATCH_RUNS:,})",
    )


def upstream(add: Add, options: Options) -> None:
    sub = add(
        "upstream",
        "every dataset and job a node comes from, as a tree (--run: a run's provenance, run by run)",
        [options.walk, options.when],
    )
    sub.add_argument("node", metavar="NODE", nargs="?")
    sub.add_argument(
        "--run",
        metavar="RUN_ID",
        help="the dataset versions this run read, the runs that wrote them, what those read, ... "
        "(--depth: levels of runs; --json: Marquez's GET /api/v1/runlineage/upstream). RUN_ID may also name a job "
        "(its latest run) or a dataset (the run that wrote its current version); with --as-of TIME, as of then",
    )


def downstream(add: Add, options: Options) -> None:
    sub = add("downstream", "every dataset and job that depends on a node, as a tree", [options.walk, options.when])
    sub.add_argument("node", metavar="NODE")


def impact(add: Add, options: Options) -> None:
    from include.lineage.queries.impact import RUNS_LISTED

    sub = add(
        "impact", "every dataset, job and run downstream of a node (or of a run: --run)", [options.walk, options.when]
    )
    sub.add_argument("node", metavar="NODE", nargs="?")
    sub.add_argument(
        "--run", metavar="RUN_ID", help="what this run (and its child runs) wrote, and every run that read it"
    )
    sub.add_argument(
        "--since",
        metavar="TIME",
        default=None,
        help="only the runs started at or after TIME (ISO-8601 with its UTC offset): which runs read the data since "
        "a bad write, instead of every run of a year of history",
    )
    sub.add_argument(
        "--runs",
        metavar="N|all",
        type=runs_listed,
        default=RUNS_LISTED,
        help=f"list the newest N runs that read the data (default {RUNS_LISTED}; all: every one); the rest are counted",
    )


def runs(add: Add, options: Options) -> None:
    sub = add("runs", "runs of a job, newest first (of a dataset: the runs that wrote it)", [options.query])
    sub.add_argument("job", metavar="JOB")
    sub.add_argument("--limit", type=int, default=20, help="at most this many runs (default 20)")


def diff(add: Add, options: Options) -> None:
    sub = add(
        "diff",
        "compare two runs: dataset versions, schema, job and code version, parameters, state, error",
        [options.query],
    )
    sub.add_argument("run_a", metavar="RUN_A")
    sub.add_argument("run_b", metavar="RUN_B")
    sub.add_argument(
        "--upstream",
        action="store_true",
        help="compare their provenance too: upstream runs, dataset versions read, job versions (inputs added or "
        "removed, code changed), parameters",
    )


def columns(add: Add, options: Options) -> None:
    sub = add("columns", "column-level upstream of DATASET.COLUMN", [options.walk])
    sub.add_argument("column", metavar="DATASET.COLUMN")


def checks(add: Add, options: Options) -> None:
    sub = add(
        "checks",
        "each DAG run's lineage, complete or what is missing (runs without START or terminal event, Spark "
        "applications without COMPLETE, lines and posts refused, torn files); with TABLE: the last runs' expectation "
        "results of that table (blocked, published)",
        [options.query],
    )
    sub.add_argument("table", metavar="TABLE", nargs="?", default=None)
    sub.add_argument("--limit", type=int, default=10, help="at most this many runs (default 10)")
    sub.add_argument("--dag-run", metavar="RUN_ID", default=None, help="only this DAG run (a run id or prefix)")
    sub.add_argument(
        "--grace",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long after its parent ended a run may still send its terminal event (default 600)",
    )


def show(add: Add, options: Options) -> None:
    sub = add(
        "show",
        "a node: its facets, latest runs, and the facets the spec refused in its events (kept, named, not read)",
        [options.query],
    )
    sub.add_argument("node", metavar="NODE")
    sub.add_argument("--limit", type=int, default=20, help="at most this many problems (default 20)")


def drift(add: Add, options: Options) -> None:
    add(
        "drift",
        "the tasks whose latest run did not read and write what their DAG declares (declared vs observed)",
        [options.query],
    )


def replay(add: Add, options: Options) -> None:
    add(
        "replay",
        "forward the Spark listener's events left in var/lineage/spark/outbox/, then send spooled events (oldest "
        "first) through the configured transport",
    )


def consume(add: Add, options: Options) -> None:
    sub = add(
        "consume",
        "read lineage events from Kafka into the store (stored once; bad events to the dead-letter topic)",
        [options.store],
    )
    sub.add_argument(
        "--bootstrap-servers",
        default=None,
        help="Kafka brokers (default $KAFKA_BOOTSTRAP_SERVERS, else 127.0.0.1:$KAFKA_PORT: `pipeline kafka start`)",
    )
    sub.add_argument("--topic", default=naming.KAFKA_EVENTS_TOPIC, help=f"events topic ({naming.KAFKA_EVENTS_TOPIC})")
    sub.add_argument(
        "--dead-letter-topic",
        default=naming.KAFKA_DEAD_LETTER_TOPIC,
        help=f"where events that cannot be stored go, with the reason ({naming.KAFKA_DEAD_LETTER_TOPIC})",
    )
    sub.add_argument("--group", default="lineage-store", help="consumer group (lineage-store)")
    sub.add_argument("--forever", action="store_true", help="keep consuming (default: stop when caught up)")
    sub.add_argument("--idle-timeout", type=float, default=30.0, help="stop after this long without a message (30 s)")
    sub.add_argument(
        "--replay-dead-letters",
        action="store_true",
        help="retry the dead letters (up to the end of the dead-letter topic); what fails again stays there",
    )


def report(add: Add, options: Options) -> None:
    add("report", "write the HTML lineage report to var/lineage/index.html")


def rollback(add: Add, options: Options) -> None:
    sub = add("rollback", "plan (--apply: do) the rollback of the Iceberg tables a bad run touched", [options.store])
    sub.add_argument("--run", required=True, metavar="RUN_ID", help="the bad run (a DAG, task or Spark run id)")
    sub.add_argument("--apply", action="store_true", help="carry out the kept plan; refused if a table moved on since")
    sub.add_argument(
        "--created",
        choices=("drop", "truncate", "keep"),
        default=None,
        help="what to do with a table the affected runs created (no snapshot before their first write): drop it, "
        "truncate it (a new empty snapshot) or keep it; --apply refuses until it is chosen",
    )
    sub.add_argument("--json", action="store_true", help="print the plan as JSON")


def validate(add: Add, options: Options) -> None:
    add("validate", "validate var/lineage's events against the OpenLineage JSON schemas")


def rejected(add: Add, options: Options) -> None:
    sub = add(
        "rejected",
        "the event files' lines the store could not keep (not JSON, not an event, refused), with file, line and why, "
        "and the posts lineage serve refused (dead letters); --replay stores what is taken now",
        [options.store],
    )
    sub.add_argument("--json", action="store_true", help="print them as JSON (the line as text, bad bytes replaced)")
    sub.add_argument("--limit", type=int, default=None, help="at most this many of each kind, newest first")
    sub.add_argument(
        "--replay",
        action="store_true",
        help="admit the dead letters waiting (or those of the IDs) and the lines set aside again, with today's rules",
    )
    sub.add_argument("ids", nargs="*", type=int, metavar="ID", help="dead letters to replay (their #ID)")
    sub.add_argument("--file", metavar="FIXED.json", default=None, help="with --replay ID: the event as fixed")


# Every command, in the order `lineage --help` lists them.
COMMANDS = (
    ingest,
    serve,
    token,
    prune,
    upstream,
    downstream,
    impact,
    runs,
    diff,
    columns,
    show,
    checks,
    drift,
    replay,
    consume,
    report,
    rollback,
    validate,
    rejected,
)


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The ``lineage`` parser: ``--store`` (before or after the command) and every command of ``COMMANDS``."""
    parser = argparse.ArgumentParser(
        prog="lineage", description=description, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--store", metavar="URL", default=None, help=STORE_HELP)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_text: str, parents=()) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help_text, description=help_text, parents=list(parents))

    options = shared_options()
    for register in COMMANDS:
        register(add, options)
    return parser
