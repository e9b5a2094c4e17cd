"""``pipeline``: the project's command line, installed into the venv. ``pipeline COMMAND --help`` for each command.

Every command that runs Airflow or Spark first starts this ``var/``'s Iceberg REST catalog server when it is not
running (one per ``var/``, on 127.0.0.1; ``pipeline catalog stop`` stops it).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from include.core import naming, settings
from include.core.errors import EXIT_FAILURE, EXIT_STATUS, PipelineError
from include.services import catalog_server

SAMPLE_MONTH = (2025, 1)


def month_span(text: str) -> list[tuple[int, int]]:
    """``2025-01`` or ``2024-01..2024-12`` as (year, month) pairs; a clear error for anything else."""
    first, _, last = text.strip().partition("..")
    try:
        start, end = (tuple(int(part) for part in value.split("-")) for value in (first, last or first))
        if len(start) != 2 or len(end) != 2 or not (1 <= start[1] <= 12 and 1 <= end[1] <= 12):
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected YYYY-MM or YYYY-MM..YYYY-MM") from None
    months = []
    year, month = start
    while (year, month) <= end:
        months.append((year, month))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    if not months:
        raise argparse.ArgumentTypeError(f"{text!r}: the last month is before the first")
    return months


SAMPLE_LOGICAL_DATE = "2025-02-01"


def _ensure_catalog() -> None:
    try:
        state = catalog_server.ensure_running()
    except catalog_server.CatalogServerError as error:
        print(f"pipeline: {error}", file=sys.stderr)
        raise SystemExit(1) from error
    if state:
        print(
            f"pipeline: Iceberg REST catalog at {state.endpoint} (log {catalog_server.log_file(settings.Paths.current())})",
            flush=True,
        )


def _ensure_metadata_db(for_ui: bool = False) -> None:
    """This ``var/``'s metadata PostgreSQL started (made, migrated, with ``spark_default``, the first time) when
    ``AIRFLOW_METADATA_DB`` chooses it; without PostgreSQL installed, `make airflow` says so and keeps SQLite."""
    from include.services import postgres

    paths = settings.Paths.current()
    if settings.metadata_db_kind(paths, for_ui=for_ui) != "postgres":
        return
    if not postgres.available() and settings.AIRFLOW_METADATA_DB.get() == "auto" and for_ui:
        print(
            "pipeline: PostgreSQL is not installed (include/setup/system_packages.sh): Airflow keeps SQLite", flush=True
        )
        return
    from importlib.metadata import version

    from include.setup import bootstrap

    database = postgres.ensure_metadata_db(paths)
    marker = paths.var / "postgres.migrated"
    airflow_version = version("apache-airflow-core")
    if not marker.exists() or marker.read_text().strip() != airflow_version:
        bootstrap.migrate_airflow_db(paths)
        bootstrap.ensure_spark_connection(paths)
        marker.write_text(airflow_version + "\n")
    print(f"pipeline: Airflow metadata database {database.endpoint} (PostgreSQL, {postgres.folder(paths)})", flush=True)


def _airflow_command_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, **settings.airflow_env(), **(extra or {})}


def cmd_airflow(options: argparse.Namespace) -> int:
    _ensure_catalog()
    _ensure_metadata_db()
    os.execvpe("airflow", ["airflow", *options.args], _airflow_command_env())
    return 0  # not reached


def cmd_ui(options: argparse.Namespace) -> int:
    """`airflow standalone` on the project's Airflow home; with --sample-data, sources served on loopback."""
    from include.sources import sample_server

    paths = settings.Paths.current().ensure()
    _ensure_catalog()
    _ensure_metadata_db(for_ui=True)
    password_file = paths.airflow_home / "simple_auth_manager_passwords.json.generated"
    extra: dict[str, str] = {}
    server = None
    if options.sample_data:
        root = paths.var / "sample-source"
        rows = settings.DEMO_ROWS_PER_MONTH.integer()
        sample_server.publish_months(root, options.sample_months, rows, only_missing=True)
        server = sample_server.SourceServer(root, port=options.source_port)
        extra = server.start()
        first, last = options.sample_months[0], options.sample_months[-1]
        print(
            f"pipeline: sample data for {first[0]}-{first[1]:02d}..{last[0]}-{last[1]:02d} served at "
            f"{server.base_url}; trigger ingest_yellow_taxi_data and ingest_weather_data with the logical date of the "
            f"month after a published one (e.g. {SAMPLE_LOGICAL_DATE}; other months end `skipped`: not published)",
            flush=True,
        )
    print(f"Airflow UI: http://localhost:{options.port}  (user: admin; password in {password_file})", flush=True)
    # Task runners reach the api-server at [api] base_url (default http://localhost:8080): keep it on the UI's port.
    ui_env = {"AIRFLOW__API__PORT": str(options.port), "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{options.port}"}
    # Ctrl-C is how `make airflow` stops (standalone.stop below); standalone inherits the default from this handler
    take_ctrl_c()
    child = subprocess.Popen(["airflow", "standalone"], env=_airflow_command_env({**ui_env, **extra}))
    try:
        return child.wait()
    except KeyboardInterrupt:
        from include.airflow import standalone

        # Ctrl-C is how `make airflow` is stopped: once nothing of Airflow runs, that is a success, whatever status
        # standalone's own interrupted shutdown ended with
        standalone.stop(child, say=lambda line: print(line, flush=True))
        return 0
    finally:
        if server:
            server.stop()
        if settings.metadata_db_kind(paths) == "postgres":
            from include.services import postgres

            postgres.stop_metadata_db(paths)  # after Airflow's components: the next `make airflow` starts it again


def _local_server_command(action: str, name: str, start, stop, running, describe) -> int:
    """``pipeline catalog|kafka start|stop|status``: this ``var/``'s local server ``name``. ``start()`` starts it (and
    says where); ``stop(paths)`` and ``running(paths)`` are its module's; ``describe(state)`` is the status line."""
    paths = settings.Paths.current()
    if action == "start":
        start()
        return 0
    if action == "stop":
        print(f"pipeline: {name} stopped" if stop(paths) else f"pipeline: no {name} was running")
        return 0
    state = running(paths)
    if not state:
        print(f"pipeline: no {name} running for {paths.var}")
        return EXIT_FAILURE
    print(f"pipeline: {describe(state)}")
    return 0


def cmd_catalog(options: argparse.Namespace) -> int:
    def describe(state: catalog_server.ServerState) -> str:
        rss = catalog_server.memory_rss_kib(state)
        return (
            f"catalog {state.catalog_name} at {state.endpoint}, pid {state.pid}, started in {state.start_seconds}s, "
            f"RSS {rss // 1024 if rss else '?'} MiB"
        )

    return _local_server_command(
        options.action, "catalog server", _ensure_catalog, catalog_server.stop, catalog_server.running, describe
    )


def cmd_kafka(options: argparse.Namespace) -> int:
    from include.services import kafka_broker

    def start() -> None:
        paths = settings.Paths.current()
        state = kafka_broker.ensure_running(paths)
        print(
            f"pipeline: kafka broker at {state.bootstrap} (topics {naming.KAFKA_EVENTS_TOPIC}, "
            f"{naming.KAFKA_DEAD_LETTER_TOPIC}; log {kafka_broker.log_file(paths)})"
        )

    def describe(state: kafka_broker.BrokerState) -> str:
        return f"kafka broker at {state.bootstrap}, pid {state.pid}, started in {state.start_seconds}s"

    return _local_server_command(
        options.action, "kafka broker", start, kafka_broker.stop, kafka_broker.running, describe
    )


def cmd_fleet(options: argparse.Namespace) -> int:
    """``pipeline fleet start|stop|status``: the CeleryExecutor fleet on loopback (include/services/fleet.py)."""
    from include.services import fleet

    if options.action == "start":
        months = None
        if options.sample_data:
            first, last = options.sample_months[0], options.sample_months[-1]
            months = f"{first[0]}-{first[1]:02d}..{last[0]}-{last[1]:02d}"
        state = fleet.start(sample_months=months, rows=options.rows, say=lambda line: print(line, flush=True))
        endpoints = state.get("endpoints", {})
        print(f"pipeline: fleet running: Airflow {endpoints.get('airflow')}, lineage {endpoints.get('lineage')}")
        return 0
    if options.action == "stop":
        stopped = fleet.stop()
        print(f"pipeline: fleet stopped ({', '.join(stopped)})" if stopped else "pipeline: no fleet was running")
        return 0
    running = fleet.status()
    for name, alive in running.items():
        print(f"pipeline: fleet {name}: {'running' if alive else 'not running'}")
    return 0 if running and all(running.values()) else EXIT_FAILURE


def take_ctrl_c() -> None:
    """Make Ctrl-C raise KeyboardInterrupt in a command that runs until it. A shell without job control (a script,
    CI) starts a background command with SIGINT ignored, and exec keeps that for every process after it: Python then
    never installs its handler, and the command would ignore Ctrl-C while everything around it stops (Trap 43)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def cmd_sample_source(options: argparse.Namespace) -> int:
    from include.sources import sample_server

    take_ctrl_c()  # it serves until Ctrl-C
    paths = settings.Paths.current().ensure()
    root = paths.var / "sample-source"
    sample_server.publish_months(root, options.months, options.rows, only_missing=True)
    server = sample_server.SourceServer(root, port=options.port)
    env = server.start()
    print("pipeline: serving sample sources; export these before starting Airflow:")
    for name, value in env.items():
        print(f"  export {name}={value}")
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def cmd_demo(options: argparse.Namespace) -> int:
    from include import demo

    _ensure_catalog()
    _ensure_metadata_db()
    return demo.run(rows=options.rows)


def cmd_test(options: argparse.Namespace) -> int:
    os.execvp(sys.executable, [sys.executable, "-m", "pytest", *options.args])
    return 0  # not reached


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pipeline", description=__doc__, epilog=EXIT_STATUS, formatter_class=argparse.RawTextHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    airflow = commands.add_parser("airflow", help="any Airflow command, with the project's AIRFLOW_HOME and catalog")
    airflow.add_argument("args", nargs=argparse.REMAINDER, help="arguments for `airflow`")
    airflow.set_defaults(handler=cmd_airflow)

    ui = commands.add_parser("ui", help="the Airflow UI and scheduler (`airflow standalone`): what `make airflow` runs")
    ui.add_argument("--port", type=int, default=settings.AIRFLOW_UI_PORT.port(), help="UI port (8080)")
    ui.add_argument("--sample-data", action="store_true", help="serve generated TLC/NOAA files on loopback (offline)")
    ui.add_argument("--source-port", type=int, default=None, help="port of the sample source server")
    ui.add_argument(
        "--sample-months",
        type=month_span,
        default=[SAMPLE_MONTH],
        help="months to generate and serve, YYYY-MM or YYYY-MM..YYYY-MM (2025-01)",
    )
    ui.set_defaults(handler=cmd_ui)

    catalog = commands.add_parser("catalog", help="this var/'s local Iceberg REST catalog server")
    catalog.add_argument("action", choices=["start", "stop", "status"])
    catalog.set_defaults(handler=cmd_catalog)

    kafka = commands.add_parser("kafka", help="this var/'s local Kafka broker (KRaft, 127.0.0.1, KAFKA_PORT or 19092)")
    kafka.add_argument("action", choices=["start", "stop", "status"])
    kafka.set_defaults(handler=cmd_kafka)

    fleet = commands.add_parser(
        "fleet", help="Airflow on the CeleryExecutor with two workers sharing no disk, and its shared services"
    )
    fleet.add_argument("action", choices=["start", "stop", "status"])
    fleet.add_argument("--sample-data", action="store_true", help="serve generated TLC/NOAA files on loopback")
    fleet.add_argument("--sample-months", type=month_span, default=[SAMPLE_MONTH], help="YYYY-MM[..YYYY-MM] (2025-01)")
    fleet.add_argument("--rows", type=int, default=20_000, help="taxi trips per generated month (20000)")
    fleet.set_defaults(handler=cmd_fleet)

    sample = commands.add_parser("sample-source", help="serve generated TLC/NOAA files with the real URL layout")
    sample.add_argument("--port", type=int, default=None, help="port (default SAMPLE_SOURCE_PORT or 18080)")
    sample.add_argument("--rows", type=int, default=300_000, help="taxi trips per month")
    sample.add_argument(
        "--months", type=month_span, default=[SAMPLE_MONTH], help="YYYY-MM or YYYY-MM..YYYY-MM (2025-01)"
    )
    sample.set_defaults(handler=cmd_sample_source)

    demo = commands.add_parser("demo", help="the whole chain on generated data (what `make demo` runs)")
    demo.add_argument(
        "--rows",
        type=int,
        default=None,
        help=f"taxi trips generated for the month (DEMO_ROWS_PER_MONTH or {settings.DEMO_ROWS_PER_MONTH.default})",
    )
    demo.set_defaults(handler=cmd_demo)

    from include.quality.review import add_publish_commands  # write-audit-publish: `publish`, `discard`

    add_publish_commands(commands)

    test = commands.add_parser("test", help="pytest, with any pytest arguments")
    test.add_argument("args", nargs=argparse.REMAINDER)
    test.set_defaults(handler=cmd_test)
    return parser


# Commands whose arguments belong to another program (airflow, pytest), passed on untouched: argparse's REMAINDER
# would stop at the first option (`pipeline test -q` would be an error). Every other command parses its own.
PASS_THROUGH = ("airflow", "test")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in PASS_THROUGH:
        options = build_parser().parse_args(argv[:1])
        options.args = argv[1:]
    else:
        options = build_parser().parse_args(argv)
    try:
        return options.handler(options)
    except PipelineError as error:
        print(f"pipeline {options.command}: {error}", file=sys.stderr)
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
