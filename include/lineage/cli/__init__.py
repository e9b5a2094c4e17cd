"""``lineage``: the lineage command, installed into the project's venv.

    lineage ingest [FILES...|-]        store events (default: every event file under var/lineage/); report how many were new
    lineage serve --port N             OpenLineage endpoint POST /api/v1/lineage; Marquez's GET /api/v1/lineage
                                       (and ?asOf=, ?history=all) and GET /api/v1/runlineage/upstream
    lineage upstream NODE              everything a dataset or job comes from
    lineage upstream --run RUN         a run's provenance: dataset versions it read, the runs that wrote them, ...
    lineage downstream NODE            everything that depends on it
    lineage impact NODE | --run RUN    every dataset, job and run downstream: what to recompute, re-run, roll back
      (upstream, downstream, impact NODE: --as-of TIME the graph as it was then; --all-history every edge ever seen;
       impact NODE --since TIME: only the runs started since then)
    lineage runs JOB                   runs of a job, newest first, with their dataset versions
    lineage diff RUN_A RUN_B           what changed between two runs: versions, code, parameters, schema, state
                                       (--upstream: and in their provenance: upstream runs, versions, job versions)
    lineage columns DATASET.COLUMN     column-level upstream
    lineage show NODE                  a node, its latest runs, and the facets the spec refused in its events (why)
    lineage checks [--dag-run RUN]     each DAG run's lineage: complete, or what is missing, named
    lineage drift                      tasks whose latest run did not read and write what their DAG declares (exit 1)
    lineage replay                     forward the Spark events left, send spooled events through the configured
                                       transport; report sent/remaining
    lineage consume [--forever]        Kafka topic -> store (consumer group; offsets committed after the store has
                                       the events; bad ones to the dead-letter topic); report lag
    lineage consume --replay-dead-letters   store the dead letters that can be stored now
    lineage report                     write the lineage page as one self-contained file, var/lineage/index.html
    lineage rollback --run RUN [--apply]   plan (and do) the rollback of the Iceberg tables a bad run touched
                                       (--created drop|truncate|keep: the tables it created)
    lineage validate                   validate var/lineage's events against the OpenLineage JSON schemas
    lineage rejected                   lines of the event files the store could not keep (file, line, why, the line)
                                       and posts lineage serve refused (dead letters: when, who, why, the body)
    lineage rejected --replay [ID...]  admit them again with today's rules, store what is taken (--file FIXED.json:
                                       an operator's edit of the one dead letter ID)

NODE: a dataset as namespace:name, its table name (nyc_taxi.yellow_rides_hourly_forecast), a URL or path, a job name,
or Marquez's dataset:<ns>:<name> / job:<ns>:<name>. The store is $LINEAGE_STORE_URL or var/lineage/store.db (--store).
Exit status: 0 ok, 1 failure, 2 bad usage or unknown input (unknown node, empty store, unreadable event file).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from include.core import settings
from include.core.errors import PipelineError
from include.lineage.cli import parser
from include.lineage.emit.transports import configured_transport
from include.lineage.errors import LineageError


def replay(_options) -> int:
    """Forward the Spark events left in their outbox files (include/lineage/emit/spark_forwarder.py), then send
    the spooled events, oldest first, through the configured transport (and the Spark spool's, when
    SPARK_LINEAGE_KAFKA_BOOTSTRAP_SERVERS sends Spark events elsewhere)."""
    from openlineage.client.transport import get_default_factory

    from include.lineage.emit import spark_forwarder
    from include.lineage.emit.spool import SpoolingTransport

    paths = settings.Paths.current()
    forwarded = spark_forwarder.run(paths)
    configs = [configured_transport()]
    spark_target = spark_forwarder.target_configuration(paths)
    if spark_target is not None and spark_target is not configs[0] and spark_target != configs[0]:
        configs.append(spark_target)
    spooling = [t for t in (get_default_factory().create(c) for c in configs) if isinstance(t, SpoolingTransport)]
    if forwarded.files:
        print(f"lineage replay: {forwarded.line()}")
    if not spooling:
        print(
            "lineage replay: the configured transport is not include.lineage.emit.spool.SpoolingTransport; nothing to replay"
        )
        return 0 if forwarded.waiting == 0 else 1
    total = remaining = 0
    for transport in spooling:
        while True:
            sent, left = transport.replay()
            total += sent
            if sent == 0 or left == 0:
                break
        remaining += left
    print(f"lineage replay: sent {total}, remaining {remaining}")
    return 0 if remaining == 0 and forwarded.waiting == 0 else 1


def consume(options) -> int:
    from include.lineage.consume import ConsumeError
    from include.lineage.consume import consume as run_consumer

    try:
        with _store(options) as store:
            report = run_consumer(
                store,
                options.bootstrap_servers,
                topic=options.topic,
                dead_letter_topic=options.dead_letter_topic,
                group=options.group,
                forever=options.forever,
                replay_dead_letters=options.replay_dead_letters,
                idle_timeout=options.idle_timeout,
            )
    except ConsumeError as error:
        print(f"lineage consume: {error}", file=sys.stderr)
        return 1
    print(report.line("lineage consume --replay-dead-letters" if options.replay_dead_letters else "lineage consume"))
    return 0


def _rollback_catalog(paths: settings.Paths):
    """The pyiceberg catalog of this ``var/`` (the local REST catalog server started when it is the one)."""
    from include.services import catalog_server

    catalog_settings = settings.CatalogSettings.current(paths)
    if catalog_settings.is_local_rest_server:
        catalog_server.ensure_running(paths)
    return settings.pyiceberg_catalog(catalog_settings)


def rollback(options) -> int:
    """``lineage rollback --run RUN_ID [--created drop|truncate|keep] [--apply] [--json]``."""
    from include.lineage.queries import LineageQueries
    from include.lineage.rollback import JOB_NAME, RollbackPlan, apply, choose_created, plan, plan_file, render_plan
    from include.lineage.store import LineageStore, default_store_url
    from include.lineage.store.follower import StoreFollower

    paths = settings.Paths.current()
    catalog = _rollback_catalog(paths)
    with LineageStore(options.store or default_store_url(paths)) as store:
        StoreFollower(store, paths).refresh()
        resolved = LineageQueries(store).run_details(options.run)["id"]
        kept = plan_file(paths, resolved)
        if options.apply and kept.exists():
            rollback_plan = RollbackPlan.from_json(json.loads(kept.read_text()))
            choose_created(rollback_plan, options.created)
            print(f"lineage rollback: applying the plan of {rollback_plan.planned_at} ({kept})", file=sys.stderr)
        else:
            rollback_plan = plan(store, resolved, catalog, options.created)
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(rollback_plan.to_json(), indent=2))
        print(json.dumps(rollback_plan.to_json(), indent=2) if options.json else render_plan(rollback_plan))
        if not options.apply:
            undecided = [step.table for step in rollback_plan.tables if step.created and step.created_action is None]
            if undecided:
                print(
                    f"lineage rollback: {', '.join(undecided)} created by the affected runs: choose what to do with "
                    "them (--created drop|truncate|keep) before --apply",
                    file=sys.stderr,
                )
            print(f"lineage rollback: plan kept in {kept}; run again with --apply to carry it out", file=sys.stderr)
            return 0
        from openlineage.client.transport import get_default_factory

        transport = get_default_factory().create(configured_transport())
        done = apply(rollback_plan, catalog, store, transport)
        kept.rename(kept.with_suffix(".applied.json"))
        for step in done:
            if step.created:
                print(f"{'dropped' if step.created_action == 'drop' else 'truncated'} {step.table}")
            else:
                print(f"rolled back {step.table}: {step.current_snapshot_id} -> {step.target_snapshot_id}")
        print(f"lineage rollback: {len(done)} table(s) changed; recorded as run of job {JOB_NAME}")
    return 0


def report(_options) -> int:
    from include.lineage.api.report import write_report

    print(write_report())
    return 0


def validate(_options) -> int:
    from include.lineage.events import event_lines
    from include.lineage.validation import EventValidator

    paths = settings.Paths.current()
    unreadable, events, places = [], [], []  # a line that is no event at all is an error of its own
    for path in (paths.lineage_events, paths.spark_lineage_events):
        for line in event_lines(path.read_bytes()) if path.exists() else []:
            if line.error is None:
                events.append(line.event)
                places.append(line.where(str(path)))
            else:
                unreadable.append(f"{line.where(str(path))}: {line.error}")
    result = EventValidator().validate(events, places=places)
    errors = unreadable + result.errors
    for error in errors:
        print(error)
    print(f"lineage validate: {sum(result.facets_checked.values())} facets checked, {len(errors)} errors")
    return 1 if errors else 0


def rejected(options) -> int:
    """``lineage rejected [--json] [--limit N]``: the store first catches up with the event files, then lists the
    lines it set aside (include/lineage/store/follower.py) and the posts ``lineage serve`` refused (dead letters,
    include/lineage/store/dead_letters.py), newest first. ``--replay [ID ...] [--file FIXED.json]``: admit them again
    with today's rules and store what is taken (include/lineage/api/rejected.py)."""
    from include.lineage.api import rejected as kept
    from include.lineage.store.follower import StoreFollower

    if options.file and len(options.ids or []) != 1:
        return _usage_error(options, "--file stands for one dead letter: give its ID (lineage rejected --replay ID)")
    if options.ids and not options.replay:
        return _usage_error(options, "IDs are for --replay")
    paths = settings.Paths.current()
    with _store(options) as store:
        StoreFollower(store, paths).refresh()
        if options.replay:
            fixed = Path(options.file).read_bytes() if options.file else None
            report = kept.replay(store, options.ids, fixed)
            for item in report.stored + report.refused + report.skipped:
                print(item)
            print(report.line())
            return 0 if not report.refused else 1
        items = kept.listing(store, options.limit)
    if options.json:
        print(json.dumps(items, indent=2))
        return 0
    lines = [item for item in items if item["kind"] == "line"]
    posts = [item for item in items if item["kind"] == "post"]
    for item in lines:
        where = f"{item['path']}:{item['line']}" if item["line"] is not None else item["path"]
        preview = item["content"][:200] + ("…" if item["truncated"] or len(item["content"]) > 200 else "")
        print(f"{where} (byte {item['byteOffset']}, {item['length']} bytes, {item['rejectedAt']}): {item['error']}")
        print(f"    {preview!r}")
    for item in posts:
        state = f"replayed {item['replayedAt']}" if item["replayedAt"] else "waiting"
        whole = "" if item["whole"] else f", only its first {len(item['content'])} bytes kept"
        print(
            f"#{item['id']} {item['endpoint']} {item['status']} from {item['client'] or '?'} at {item['receivedAt']} "
            f"({item['times']} time(s), {item['length']:,} bytes{whole}; {state}): {item['reason']}"
        )
        if item["replayOutcome"]:
            print(f"    last replay: {item['replayOutcome']}")
        print(f"    {item['content'][:200] + ('…' if len(item['content']) > 200 else '')!r}")
    waiting = sum(1 for item in posts if not item["replayedAt"])
    print(
        f"lineage rejected: {len(lines)} line(s) not stored; {len(posts)} post(s) refused by lineage serve "
        f"({waiting} waiting: lineage rejected --replay)"
    )
    return 0


def _store(options):
    from include.lineage.store import LineageStore

    return LineageStore(options.store)


def ingest(options) -> int:
    from include.lineage.events import discover_event_files

    files = options.files or [str(path) for path in discover_event_files()]
    if not files:
        print(f"lineage ingest: no event files under {settings.Paths.current().lineage}", file=sys.stderr)
        return 2
    with _store(options) as store:
        try:
            result = store.ingest_files(files)
        except LineageError as error:
            if getattr(error, "ingested", None) is None:
                raise
            # each file is all or nothing: report what the good files stored, then every bad file's first bad line
            result = error.ingested
            print(
                f"lineage ingest: {result.read} events read, {result.new} new, from the files without errors "
                f"({store.url})"
            )
            for failure in getattr(error, "errors", [error]):
                print(f"lineage ingest: not stored: {failure}", file=sys.stderr)
            return error.exit_code
        print(
            f"lineage ingest: {result.read} events read from {len(files)} file(s), {result.new} new, "
            f"{result.duplicates} already stored ({store.url})"
        )
        from include.lineage.queries import LineageQueries

        # the runs this ingest added events to, not the whole store (a year's holds 10^7 events to unpack); those it
        # made judged from the events it read, the others from their stored events
        _warn_merged(options, LineageQueries(store), result.new_run_ids - set(result.created_runs), result.created_runs)
    return 0


def serve(options) -> int:
    from pathlib import Path

    from include.lineage.api.server import serve as run_server

    tokens_path = Path(options.tokens) if options.tokens else None
    run_server(
        options.store, options.host, options.port, tokens_path, options.allow_host, options.docs, options.no_auth
    )
    return 0


def token(options) -> int:
    """``lineage token list|add|remove``: the bearer tokens of ``lineage serve`` (include/lineage/emit/tokens.py)."""
    from include.lineage.emit import tokens

    if options.token_action != "list" and not options.name:
        return _usage_error(options, f"lineage token {options.token_action} needs a NAME")
    if options.token_action == "add":
        added = tokens.add_token(options.name, options.scope or ["write"])
        print(f"lineage token: added {added.name} ({', '.join(sorted(added.scopes))}) to {tokens.tokens_file()}")
    elif options.token_action == "remove":
        tokens.remove_token(options.name)
        print(f"lineage token: removed {options.name} from {tokens.tokens_file()}")
    else:
        for item in tokens.load_tokens(tokens.ensure_tokens()):
            print(f"{item.name}\t{','.join(sorted(item.scopes))}")
    return 0


def prune(options) -> int:
    """``lineage prune``: events, runs and versions older than the horizon go (include/lineage/store/retention.py)."""
    from include.lineage.store.retention import parse_horizon, prune_store

    older_than = options.older_than or settings.LINEAGE_RETENTION.get()
    shown = [time.monotonic()]

    def progress(report) -> None:  # a year's prune takes minutes: say how far it is, every 10 s at most
        if time.monotonic() - shown[0] >= 10:
            shown[0] = time.monotonic()
            done = ", ".join(f"{count:,} {name}" for name, count in report.counts.items() if count)
            print(f"lineage prune: {done or 'nothing'} deleted so far", file=sys.stderr, flush=True)

    with _store(options) as store:
        report = prune_store(
            store,
            parse_horizon(older_than),
            dry_run=options.dry_run,
            batch_runs=options.batch_runs,
            progress=progress,
            vacuum=options.vacuum,
        )
    print(report.line(older_than))
    return 0


def _emit(options, as_json, as_text) -> None:
    """Print the answer as JSON (``--json``) or as text; each form is computed only when asked for."""
    print(json.dumps(as_json(), indent=2, default=str) if options.json else as_text())


def _when(options) -> dict:
    """The graph asked for: ``--as-of`` (checked here, so a bad time is exit 2 before the store opens) and
    ``--all-history``."""
    from include.lineage.queries import parse_instant

    as_of = parse_instant(options.as_of, "--as-of") if options.as_of is not None else None
    return {"as_of": as_of, "all_history": options.all_history}


def _usage_error(options, message: str) -> int:
    print(f"lineage {options.command}: {message}", file=sys.stderr)
    return 2


def upstream(options) -> int:
    from include.lineage import render
    from include.lineage.queries import LineageQueries

    if bool(options.node) == bool(options.run):
        return _usage_error(options, "give a NODE or --run RUN_ID (one of them)")
    if options.run and options.all_history:
        return _usage_error(options, "--all-history is for a NODE's graph, not a run's provenance")
    when = _when(options)
    with _store(options) as store:
        queries = LineageQueries(store)
        if options.run:
            # a run id, or a job / dataset: its run as of --as-of (default now)
            result = queries.run_lineage(queries.run_at(options.run, when["as_of"]), options.depth)
            _emit(
                options,
                lambda: render.run_lineage_json(result),
                lambda: render.render_run_lineage(
                    result,
                    options.depth,
                    # only a run that read nothing (a DAG run) is answered by naming its child runs
                    [] if result["runs"][0]["inputs"] else queries.child_runs(result["runs"][0]["run"]["id"]),
                ),
            )
            return 0
        sub = queries.upstream(options.node, options.depth, **when)
        _emit(options, lambda: queries.marquez_graph(sub), lambda: render.render_tree(sub))
    return 0


def downstream(options) -> int:
    from include.lineage.queries import LineageQueries
    from include.lineage.render import render_tree

    when = _when(options)
    with _store(options) as store:
        queries = LineageQueries(store)
        sub = queries.downstream(options.node, options.depth, **when)
        _emit(options, lambda: queries.marquez_graph(sub), lambda: render_tree(sub))
    return 0


def impact(options) -> int:
    from include.lineage import render
    from include.lineage.queries import LineageQueries, parse_instant
    from include.lineage.queries.impact import RUNS_LISTED

    if bool(options.node) == bool(options.run):
        return _usage_error(options, "give a NODE or --run RUN_ID (one of them)")
    if options.run and (
        options.as_of is not None or options.all_history or options.since is not None or options.runs != RUNS_LISTED
    ):
        return _usage_error(options, "--as-of, --all-history, --since and --runs are for a NODE's impact, not a run's")
    when = _when(options)
    since = parse_instant(options.since, "--since") if options.since is not None else None
    with _store(options) as store:
        queries = LineageQueries(store)
        if options.run:
            result = queries.impact_of_run(options.run)
            _emit(options, lambda: render.run_impact_json(queries, result), lambda: render.render_run_impact(result))
        else:
            result = queries.impact(options.node, options.depth, since=since, runs=options.runs, **when)
            _emit(options, lambda: render.impact_json(queries, result), lambda: render.render_impact(result))
    return 0


def runs(options) -> int:
    from include.lineage.queries import LineageQueries
    from include.lineage.render import render_runs, runs_json

    with _store(options) as store:
        queries = LineageQueries(store)
        result = queries.runs(options.job, options.limit)
        _warn_merged(options, queries, [run["id"] for run in result["runs"]])
        _emit(options, lambda: runs_json(result), lambda: render_runs(result))
    return 0


def _warn_merged(options, queries, run_ids=None, in_hand=None) -> None:
    """Say which run ids hold the events of two runs (never merged silently)."""
    for item in queries.merged_runs(run_ids, in_hand):
        print(
            f"lineage {options.command}: warning: run {item['runId']} ({item['job']}) holds the events of more than "
            f"one run: {'; '.join(item['reasons'])}. Its inputs, outputs and times are those runs' together.",
            file=sys.stderr,
        )


def diff(options) -> int:
    from include.lineage.queries import LineageQueries
    from include.lineage.render import render_diff

    with _store(options) as store:
        result = LineageQueries(store).diff(options.run_a, options.run_b, upstream=options.upstream)
        _emit(options, lambda: result, lambda: render_diff(result))
    return 0


def columns(options) -> int:
    from include.lineage.queries import LineageQueries
    from include.lineage.render import render_columns

    with _store(options) as store:
        queries = LineageQueries(store)
        result = queries.columns(options.column, options.depth)
        _emit(options, lambda: queries.column_graph(result), lambda: render_columns(result))
    return 0


def drift(options) -> int:
    """``lineage drift [--json]``: the store catches up with the event files, then lists the tasks whose newest run
    drifted from its DAG's declaration; exit 1 when any did (a check to run in CI or after a deploy)."""
    from include.lineage.queries import LineageQueries
    from include.lineage.render import render_drift
    from include.lineage.store.follower import StoreFollower

    with _store(options) as store:
        StoreFollower(store, settings.Paths.current()).refresh()
        found = LineageQueries(store).drift()
    _emit(options, lambda: found, lambda: render_drift(found))
    return 1 if found else 0


def show(options) -> int:
    """``lineage show NODE``: a node, its facets and latest runs, and what the spec refused in its events."""
    from include.lineage.queries import LineageQueries

    with _store(options) as store:
        queries = LineageQueries(store)
        answer = queries.facet_problems(options.node, options.limit)
        node = answer["node"]
        found = queries.runs(node.key, 5)["runs"]
    if options.json:
        print(json.dumps({"node": node._asdict(), "runs": found, "invalidFacets": answer["problems"]}, default=str))
        return 0
    print(f"{node.kind} {node.namespace}:{node.name}  ({node.label})")
    for run in found:
        print(f"  run {run['id']}  {run.get('state')}  {run.get('startedAt') or run.get('endedAt') or ''}")
    problems = answer["problems"]
    if not problems:
        print("  invalid facets: none (every facet of its events matched its schema)")
        return 0
    print(f"  invalid facets ({len(problems)}: kept with their events as received, not read by the store):")
    for item in problems:
        what = f"facet {item['facet']}" if item["facet"] else "field"
        print(f"    {item['eventTime']}  run {item['runId'] or '-'}  {what} at {item['path']}: {item['rule']}")
    return 0


def checks(options) -> int:
    """``lineage checks``: each DAG run's lineage, complete or what is missing (include/lineage/queries/
    completeness.py); ``lineage checks TABLE``: the table's expectation results (include/quality/review.py)."""
    if options.table:
        from include.quality.review import cli_checks  # write-audit-publish: the runs' expectation results

        return cli_checks(options)
    from include.lineage.emit.spark_forwarder import outbox_dir
    from include.lineage.queries import LineageQueries
    from include.lineage.queries.completeness import GRACE_SECONDS
    from include.lineage.store.follower import StoreFollower

    paths = settings.Paths.current()
    torn = [(path.name, path.read_bytes()) for path in sorted(outbox_dir(paths).glob("*.torn"))]
    grace = GRACE_SECONDS if options.grace is None else options.grace
    with _store(options) as store:
        StoreFollower(store, paths).refresh()
        answers = LineageQueries(store).completeness(options.dag_run, options.limit, grace, torn)
    incomplete = sum(1 for answer in answers if not answer["complete"])
    if options.json:
        print(json.dumps(answers, indent=2))
        return 1 if incomplete else 0
    for answer in answers:
        verdict = "complete" if answer["complete"] else f"incomplete, {len(answer['missing'])} missing"
        print(
            f"{answer['job']}  run {answer['runId']}  {answer['state']}  {answer['startedAt'] or ''}  "
            f"({answer['runs']} runs): lineage {verdict}"
        )
        for item in answer["missing"]:
            print(f"  - {item['kind']}: {item['job']} (run {item['runId']}): {item['detail']}")
    print(f"lineage checks: {len(answers)} DAG run(s), {incomplete} with lineage missing")
    return 1 if incomplete else 0


def build_parser() -> argparse.ArgumentParser:
    """The ``lineage`` parser (``include/lineage/cli/parser.py``: each command's arguments)."""
    return parser.build_parser(__doc__)


def handler(command: str) -> Callable[[argparse.Namespace], int]:
    """What ``lineage COMMAND`` runs."""
    return {
        "ingest": ingest,
        "serve": serve,
        "token": token,
        "prune": prune,
        "upstream": upstream,
        "downstream": downstream,
        "impact": impact,
        "runs": runs,
        "diff": diff,
        "columns": columns,
        "checks": checks,
        "show": show,
        "drift": drift,
        "replay": replay,
        "consume": consume,
        "report": report,
        "rollback": rollback,
        "validate": validate,
        "rejected": rejected,
    }[command]


def main(argv: list[str] | None = None) -> int:
    options = build_parser().parse_args(argv)
    try:
        return handler(options.command)(options)
    except PipelineError as error:
        print(f"lineage {options.command}: {error}", file=sys.stderr)
        return error.exit_code
    except BrokenPipeError:  # `lineage ... | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
