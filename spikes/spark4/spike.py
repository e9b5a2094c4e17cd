"""Issue 13 spike, run by run_spike.sh inside the spike venv (Spark 4, provider 6.x), never the project's venv.

1. Starts the project's catalog: the local Iceberg REST catalog server (``include.catalog_server``) when the project
   has it, else a ``type=hadoop`` catalog (``--catalog`` forces one).
2. Submits ``spike_job.py`` through the Airflow Spark provider's ``SparkSubmitHook`` with the project's Spark settings
   (``config.spark_conf``) and the spike's jars: CREATE TABLE, append, MERGE, read.
3. pyiceberg reads the table; the OpenLineage Spark listener (file transport) must name it as an output.

Prints one line per check and PASS or FAIL with the exact error; writes ``<state>/result.json``; exit code 0 on PASS.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import socket
import sys
import traceback
from pathlib import Path

SPIKE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = SPIKE_DIR.parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from include import config, naming  # noqa: E402

TABLE = "spike_roundtrip"
EXPECTED_ROWS = [
    {"id": 1, "name": "a", "amount": 1.0},
    {"id": 2, "name": "b2", "amount": 20.0},
    {"id": 3, "name": "c", "amount": 3.0},
]


class SpikeCheckError(Exception):
    pass


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--state", type=Path, required=True, help="fresh folder for this run's catalog, warehouse, logs"
    )
    parser.add_argument("--jars-dir", type=Path, required=True, help="folder holding the verified spike jars")
    parser.add_argument("--jars", required=True, help="comma-separated jar file names, in class-path order")
    parser.add_argument("--catalog", choices=("auto", "rest", "hadoop"), default="auto")
    return parser.parse_args(argv)


def start_catalog(mode: str, paths: config.Paths):
    """The catalog settings and a stop function: the project's local REST catalog server on a free port of this
    run's own ``var/`` when the project has one (``include.catalog_server``), else a ``type=hadoop`` catalog."""
    if mode == "auto":
        mode = "rest" if importlib.util.find_spec("include.catalog_server") else "hadoop"
    if mode == "hadoop":
        settings = config.CatalogSettings(name="lakehouse", type="hadoop", uri="", warehouse=paths.warehouse.as_uri())
        return settings, lambda: None
    from include import catalog_server

    os.environ.update({"ICEBERG_CATALOG_TYPE": "rest", "ICEBERG_REST_PORT": str(free_port())})
    for name in ("ICEBERG_CATALOG_URI", "ICEBERG_REST_BACKEND_URI", "ICEBERG_WAREHOUSE"):
        os.environ.pop(name, None)
    settings = config.CatalogSettings.current(paths)
    catalog_server.ensure_running(paths, settings)
    return settings, lambda: catalog_server.stop(paths)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((config.LOCAL_REST_HOST, 0))
        return probe.getsockname()[1]


def spark_settings(paths: config.Paths, catalog: config.CatalogSettings, jars: list[Path]) -> dict[str, str]:
    """The project's Spark settings for this catalog, with the spike's jars instead of the project's Spark 3.5 jars."""
    conf = config.spark_conf(paths, catalog)
    if catalog.type == "hadoop":
        conf.pop(f"spark.sql.catalog.{catalog.name}.uri", None)
    class_path = os.pathsep.join(str(jar) for jar in jars)
    conf["spark.driver.extraClassPath"] = class_path
    conf["spark.executor.extraClassPath"] = class_path
    return conf


class _Tee:
    """Copies this process's stdout into the spark-submit log: the hook logs the command's output there."""

    def __init__(self, stream, copy):
        self.stream, self.copy = stream, copy

    def write(self, text):
        if self.copy is not None:
            self.copy.write(text)
        return self.stream.write(text)

    def flush(self):
        if self.copy is not None:
            self.copy.flush()
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def submit_job(
    paths: config.Paths, catalog: config.CatalogSettings, jars: list[Path], result_file: Path, log_file: Path
) -> None:
    os.environ["AIRFLOW_HOME"] = str(paths.airflow_home)
    os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[*]"})
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    original_stdout = sys.stdout
    with log_file.open("w") as log:
        sys.stdout = tee = _Tee(original_stdout, log)
        try:
            from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

            hook = SparkSubmitHook(
                conf=spark_settings(paths, catalog, jars),
                jars=",".join(str(jar) for jar in jars),
                conn_id="spark_default",
                env_vars={"PIPELINE_VAR_DIR": str(paths.var)},
                name="spark4_spike",
                application_args=[catalog.table(TABLE), str(result_file)],
                verbose=False,
            )
            hook.submit(str(SPIKE_DIR / "spike_job.py"))
        except Exception as error:
            log.flush()
            summary = str(error) if len(str(error)) < 300 else f"{str(error)[:120]} ... {str(error)[-120:]}"
            raise SpikeCheckError(
                f"{summary}\nfirst error of spark-submit:\n{first_java_or_python_error(log_file)}"
            ) from error
        finally:
            sys.stdout, tee.copy = original_stdout, None  # Airflow's log handlers keep the tee: stop copying


_HOOK_LOG_LINE = re.compile(r"^\S+Z \[\w+\s*\] (?P<text>.*?)(?: \[airflow[^\]]*\] loc=\S+)?$")


def first_java_or_python_error(log_file: Path) -> str:
    """The first exception of the spark-submit output (without the hook's log prefix), with the lines that follow."""
    raw = log_file.read_text(errors="replace").splitlines() if log_file.exists() else []
    lines = [match.group("text") if (match := _HOOK_LOG_LINE.match(line)) else line for line in raw]
    pattern = re.compile(r"(Exception|Error)(:|$)|Traceback")
    for index, line in enumerate(lines):
        if pattern.search(line):
            return "\n".join(lines[index : index + 12])
    return "\n".join(lines[-12:])


def check_job_result(result_file: Path) -> dict:
    if not result_file.exists():
        raise SpikeCheckError(f"{result_file} was not written by the job")
    result = json.loads(result_file.read_text())
    if result["rows"] != EXPECTED_ROWS:
        raise SpikeCheckError(f"Spark read {result['rows']}, expected {EXPECTED_ROWS}")
    if not result["spark_version"].startswith("4."):
        raise SpikeCheckError(f"the job ran on Spark {result['spark_version']}, not 4.x")
    return result


def load_with_pyiceberg(catalog: config.CatalogSettings, location: str):
    if catalog.type == "rest":
        return config.pyiceberg_catalog(catalog).load_table(f"{config.ICEBERG_NAMESPACE}.{TABLE}")
    from pyiceberg.table import StaticTable

    metadata = Path(location.removeprefix("file:")) / "metadata"
    version = (metadata / "version-hint.text").read_text().strip()
    return StaticTable.from_metadata(str(metadata / f"v{version}.metadata.json"))


def check_pyiceberg(catalog: config.CatalogSettings, location: str) -> dict:
    table = load_with_pyiceberg(catalog, location)
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda row: row["id"])
    if rows != EXPECTED_ROWS:
        raise SpikeCheckError(f"pyiceberg read {rows}, expected {EXPECTED_ROWS}")
    return {
        "format_version": table.metadata.format_version,
        "operations": [snapshot.summary.operation.value for snapshot in table.snapshots()],
        "location": table.metadata.location,
    }


def check_lineage(paths: config.Paths, catalog: config.CatalogSettings, location: str) -> dict:
    """The MERGE's COMPLETE event names the table the project's way (``include.naming``): its physical location,
    with the catalog's ``<namespace>.<table>`` as a symlink."""
    events_file = paths.spark_lineage_events
    if not events_file.exists():
        raise SpikeCheckError(f"the OpenLineage listener wrote no events ({events_file} is missing)")
    events = [json.loads(line) for line in events_file.read_text().splitlines() if line.strip()]
    physical = naming.storage_id(location)
    if physical != naming.table_id(TABLE, catalog):
        raise SpikeCheckError(
            f"the table is at {location}, not where include.naming expects it ({naming.table_id(TABLE, catalog)})"
        )
    symlink = naming.table_symlink(TABLE, catalog)
    # include.naming knows the REST and JDBC catalogs; for the hadoop fallback only the symlink's name is compared
    symlink_namespaces = {symlink.namespace} if catalog.type != "hadoop" else None
    naming_the_table: dict[str, list[str]] = {}
    for event in events:
        for output in event.get("outputs", []):
            identifiers = output.get("facets", {}).get("symlinks", {}).get("identifiers", [])
            if (output["namespace"], output["name"]) == (physical.namespace, physical.name) and any(
                item["name"] == symlink.name and (symlink_namespaces is None or item["namespace"] in symlink_namespaces)
                for item in identifiers
            ):
                naming_the_table.setdefault(event["job"]["name"], []).append(event["eventType"])
    merge_jobs = [job for job in naming_the_table if re.search(r"replace_data|merge|write_delta", job)]
    summary = {
        "events": len(events),
        "producer": events[0]["producer"] if events else None,
        "expected_output": f"{physical.namespace}:{physical.name} (symlink {symlink.namespace}:{symlink.name})",
        "jobs_naming_the_table": {job: sorted(set(types)) for job, types in naming_the_table.items()},
    }
    if not any("COMPLETE" in naming_the_table[job] for job in merge_jobs):
        raise SpikeCheckError(
            f"no COMPLETE event of the MERGE names {summary['expected_output']} as an output; "
            f"{len(events)} events; jobs naming it: {summary['jobs_naming_the_table']}"
        )
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    state = args.state.resolve()
    shutil.rmtree(state, ignore_errors=True)
    os.environ["PIPELINE_VAR_DIR"] = str(state / "var")
    paths = config.Paths.current().ensure()
    jars = [args.jars_dir.resolve() / name for name in args.jars.split(",")]
    result_file = state / "job-result.json"
    report: dict = {"checks": {}}
    status = "PASS"
    catalog, stop_catalog = None, lambda: None
    try:
        catalog, stop_catalog = start_catalog(args.catalog, paths)
        report["catalog"] = {"type": catalog.type, "uri": catalog.uri, "warehouse": catalog.warehouse}
        print(f"catalog: {catalog.type} {catalog.uri or catalog.warehouse}", flush=True)
        steps = [
            (
                "spark-submit via SparkSubmitHook (CREATE, append, MERGE, read)",
                lambda: (
                    submit_job(paths, catalog, jars, result_file, state / "spark-submit.log")
                    or check_job_result(result_file)
                ),
            ),
            ("pyiceberg reads the table", lambda: check_pyiceberg(catalog, report["checks"][steps[0][0]]["location"])),
            (
                "OpenLineage listener names the table",
                lambda: check_lineage(paths, catalog, report["checks"][steps[0][0]]["location"]),
            ),
        ]
        for name, step in steps:
            try:
                report["checks"][name] = step()
                print(f"ok    {name}: {json.dumps(report['checks'][name])}", flush=True)
            except Exception as error:  # every failure is reported with its exact text, then the run stops
                detail = str(error) if isinstance(error, SpikeCheckError) else traceback.format_exc()
                report["checks"][name] = {"error": detail}
                print(f"FAIL  {name}:\n{detail}", flush=True)
                status = "FAIL"
                break
    finally:
        stop_catalog()
    report["status"] = status
    (state / "result.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"{status} (details in {state / 'result.json'}, spark-submit output in {state / 'spark-submit.log'})")
    return 0 if status == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
