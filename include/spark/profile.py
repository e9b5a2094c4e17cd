"""Where a Spark application's time goes, from its event log (``spark.eventLog.enabled``): wall time per SQL
execution and per job, longest first. ``python -m include.spark.profile <event log file>``."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Step:
    kind: str  # "sql" or "job"
    ident: int
    description: str
    seconds: float


def _short(text: str, width: int = 110) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def event_lines(event_log: Path) -> list[str]:
    """The JSON lines of an event log: a plain file, a zstd-compressed one (Spark 4's default,
    ``spark.eventLog.compress=true`` with codec zstd), or a rolling log's folder (``eventlog_v2_*``, its
    ``events_*`` files in order)."""
    if event_log.is_dir():
        parts = sorted(event_log.glob("events_*"), key=lambda part: int(part.name.split("_")[1]))
        return [line for part in parts for line in event_lines(part)]
    data = event_log.read_bytes()
    if event_log.suffix == ".zstd":
        import zstandard

        data = zstandard.ZstdDecompressor().stream_reader(data).read()
    return data.decode().splitlines()


def read_steps(event_log: Path) -> tuple[list[Step], float]:
    """(SQL executions and the jobs outside any SQL execution, application wall time in seconds)."""
    sql_started: dict[int, tuple[float, str]] = {}
    job_started: dict[int, tuple[float, str, bool]] = {}
    steps: list[Step] = []
    app_start = app_end = None
    for line in event_lines(event_log):
        event = json.loads(line)
        name = event.get("Event", "")
        if name == "SparkListenerApplicationStart":
            app_start = event["Timestamp"] / 1000
        elif name == "SparkListenerApplicationEnd":
            app_end = event["Timestamp"] / 1000
        elif name.endswith("SparkListenerSQLExecutionStart"):
            sql_started[event["executionId"]] = (event["time"] / 1000, event.get("description") or event["details"])
        elif name.endswith("SparkListenerSQLExecutionEnd") and event["executionId"] in sql_started:
            started, description = sql_started.pop(event["executionId"])
            steps.append(Step("sql", event["executionId"], _short(description), event["time"] / 1000 - started))
        elif name == "SparkListenerJobStart":
            properties = event.get("Properties") or {}
            job_started[event["Job ID"]] = (
                event["Submission Time"] / 1000,
                properties.get("callSite.short", ""),
                "spark.sql.execution.id" in properties,
            )
        elif name == "SparkListenerJobEnd" and event["Job ID"] in job_started:
            started, call_site, in_sql = job_started.pop(event["Job ID"])
            if not in_sql:
                steps.append(Step("job", event["Job ID"], _short(call_site), event["Completion Time"] / 1000 - started))
    wall = (app_end - app_start) if app_start and app_end else 0.0
    return steps, wall


def to_text(event_log: Path, top: int = 25) -> str:
    steps, wall = read_steps(event_log)
    lines = [f"{event_log.name}: application {wall:.1f} s, steps {sum(s.seconds for s in steps):.1f} s"]
    for step in sorted(steps, key=lambda s: s.seconds, reverse=True)[:top]:
        lines.append(f"  {step.seconds:7.2f} s  {step.kind} {step.ident:>3}  {step.description}")
    return "\n".join(lines)


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        print(to_text(Path(argument)))
