"""A year of a large platform's lineage, generated: the history ``bench/store_scale.py`` fills the store with.

``History(events=N, seed=S)`` is a reproducible stream of exactly ``N`` OpenLineage events shaped and sized like the
project's own (``var/lineage/events.jsonl`` and ``var/lineage/spark/events.jsonl`` of a demo): DAGs of Airflow task
runs, each Spark task with its Spark application and Spark SQL jobs as child runs (``parent`` the task run, ``root``
the DAG run), over a year of event times (one DAG run a day per DAG). The number of DAGs grows with ``N``; the year
stays a year.

- **Facets** as the project's extractor and the Spark listener send them: ``schema``, ``symlinks``, ``version`` (an
  Iceberg snapshot id per write), ``catalog``, ``columnLineage``, ``ownership``, ``dataQualityAssertions``,
  ``outputStatistics``, ``dataQualityMetrics`` and ``inputStatistics`` (input facets), the project's custom
  ``fileFingerprint`` and ``writeAuditPublish``, ``sourceCode``/``sourceCodeLocation``, ``nominalTime``,
  ``parent``, ``processing_engine``, ``spark_properties``, ``sql``, ``jobType``, ``tags``.
- **Job versions change over time**: every task has change days (every 30-120 days) on which an input is added (a hub,
  another DAG's table) or one it had added is removed, with a new code version (``sourceCodeLocation.version``) and a
  column more in its output's schema.
- **Re-runs and failures**: a task run fails (``FAIL`` with ``errorMessage``; its Spark application too) and its retry,
  a new run, succeeds an hour later; a DAG run is cleared and run again the next day (a new DAG run id, the same
  nominal time).
- **Hubs**: a few reference tables (``shared.dim_*``, written daily by the ``reference_dims`` DAG) that every task
  reads with some probability: at 10^7 events each is read by thousands of jobs. Tasks also read other DAGs' tables,
  so lineage runs across DAGs.

Streaming: a day is generated at a time (its events sorted by time, kept as JSON lines), so any size costs the memory
of one day. Everything random comes from ``random.Random`` seeded by strings of (seed, DAG, day): the same seed gives
the same events, byte for byte, and one DAG's structure does not depend on how many others there are.

    python -m bench.history --events 100000 --out var/bench/history.jsonl   # write one
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import random
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

AIRFLOW = "https://github.com/apache/airflow/tree/providers-openlineage/2.20.3"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/integration/spark"
SPEC = "https://openlineage.io/spec"
EVENT_SCHEMA = f"{SPEC}/2-0-2/OpenLineage.json#/$defs/RunEvent"
PROJECT_FACETS = (
    "https://github.com/lineage-aware-pipelines/lineage-aware-pipelines/blob/main/include/lineage/spec/facets"
)
NAMESPACE = "platform"  # the Airflow jobs' namespace
WAREHOUSE = "/lake/warehouse"
CATALOG_URI = "http://catalog.internal:8181"
START = datetime(2025, 1, 1, tzinfo=UTC)
DAYS = 365
HUBS = ("dim_date", "dim_customer", "dim_product", "dim_region", "dim_currency", "dim_calendar")
DOMAINS = ("sales", "ads", "billing", "risk", "growth", "supply", "search", "support", "finance", "fleet")
TYPES = ("bigint", "string", "double", "timestamp", "date", "int", "boolean", "decimal(18,2)")
# Events per DAG run, measured over generated years (tests/unit/test_bench_history.py keeps it honest): how many DAGs
# a size needs.
EVENTS_PER_DAG_RUN = 43.0
REFERENCE_EVENTS_PER_DAY = 20.0  # the reference_dims DAG's


def _facet(producer: str, schema: str, **fields) -> dict:
    return {"_producer": producer, "_schemaURL": f"{SPEC}/facets/{schema}", **fields}


def _custom(name: str, **fields) -> dict:
    return {"_producer": AIRFLOW, "_schemaURL": f"{PROJECT_FACETS}/{name}.json#/$defs/{name}", **fields}


def _run_id(rng: random.Random, at: datetime) -> str:
    """A UUIDv7 (time-ordered, as Airflow's provider makes them) from the generator's randomness."""
    millis = int(at.timestamp() * 1000)
    value = (millis << 80) | (0x7 << 76) | (rng.getrandbits(12) << 64) | (0b10 << 62) | rng.getrandbits(62)
    return str(uuid.UUID(int=value))


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass
class Task:
    """One Airflow task of a DAG: a download (no Spark) or a Spark task writing one Iceberg table."""

    name: str
    table: str | None  # the Iceberg table it writes (``<dag>.<task>``), None for the download
    inputs: list[str]  # what it always reads (dataset keys, ``namespace|name``)
    columns: list[tuple[str, str]]
    spark_jobs: int
    changes: list[tuple[int, str, str]] = field(default_factory=list)  # (day, "+"/"-", input) from that day on

    def inputs_on(self, day: int) -> list[str]:
        inputs = list(self.inputs)
        for change_day, sign, dataset in self.changes:
            if change_day > day:
                break
            if sign == "+" and dataset not in inputs:
                inputs.append(dataset)
            elif sign == "-" and dataset in inputs:
                inputs.remove(dataset)
        return inputs

    def epoch(self, day: int) -> int:
        """How many changes the task had by ``day``: its code version and its output's extra columns."""
        return sum(1 for change_day, _, _ in self.changes if change_day <= day)


@dataclass
class Dag:
    index: int
    dag_id: str
    hour: int
    minute: int
    tasks: list[Task]
    owner: str


def table_key(table: str) -> str:
    """The dataset key (``namespace|name``) of an Iceberg table ``<ns>.<table>``: its location, as both the
    extractor and the Spark listener name it."""
    namespace, name = table.split(".", 1)
    return f"file|{WAREHOUSE}/{namespace}/{name}"


def _columns(rng: random.Random, count: int) -> list[tuple[str, str]]:
    return [
        (f"col_{index:02d}_{rng.choice(('id', 'amount', 'ts', 'code', 'name', 'flag'))}", rng.choice(TYPES))
        for index in range(count)
    ]


class History:
    """``events`` OpenLineage events of a generated platform year; iterate ``lines()`` (JSON) or ``events()``."""

    def __init__(self, events: int, seed: int = 52, days: int = DAYS, start: datetime = START):
        if events < 1:
            raise ValueError("events must be at least 1")
        self.total, self.seed, self.days, self.start = events, seed, days, start
        self.dag_count = max(1, round((events / days - REFERENCE_EVENTS_PER_DAY) / EVENTS_PER_DAG_RUN))
        self.hubs = [f"shared.{name}" for name in HUBS[: max(2, min(len(HUBS), 2 + self.dag_count // 100))]]
        self.dags = [self._reference()] + [self._dag(index) for index in range(1, self.dag_count + 1)]

    # ------------------------------------------------------------------ the platform
    def _reference(self) -> Dag:
        rng = random.Random(f"{self.seed}:reference")
        tasks = [Task("download_reference", None, ["https|https://reference.example.com/export"], [], 0)]
        for hub in self.hubs:
            name = hub.split(".", 1)[1]
            tasks.append(Task(f"load_{name}", hub, ["file|/lake/landing/reference_dims/extract"], _columns(rng, 10), 1))
        return Dag(0, "reference_dims", 1, 0, tasks, "platform-core")

    def _dag(self, index: int) -> Dag:
        rng = random.Random(f"{self.seed}:dag:{index}")
        domain = rng.choice(DOMAINS)
        dag_id = f"{domain}_{index:05d}"
        landed = f"file|/lake/landing/{dag_id}/extract"
        tasks = [Task(f"download_{domain}_extract", None, [f"https|https://{domain}.example.com/api/{index}"], [], 0)]
        stages = rng.randint(3, 7)
        previous = landed
        written: list[str] = []
        for stage in range(stages):
            table = f"{dag_id}.stage_{stage}"
            inputs = [previous]
            if written and rng.random() < 0.3:
                inputs.append(rng.choice(written))
            if rng.random() < 0.35:
                inputs.append(table_key(rng.choice(self.hubs)))
            if index > 1 and rng.random() < 0.15:  # another (earlier) DAG's table: lineage across DAGs
                other = rng.randint(1, index - 1)
                inputs.append(table_key(f"{self._dag_id(other)}.stage_0"))
            task = Task(f"build_stage_{stage}", table, inputs, _columns(rng, rng.randint(8, 24)), rng.randint(1, 2))
            day = rng.randint(10, 120)
            added: list[str] = []
            while day < self.days:
                if added and rng.random() < 0.4:
                    task.changes.append((day, "-", added.pop(rng.randrange(len(added)))))
                else:
                    candidate = (
                        table_key(rng.choice(self.hubs))
                        if rng.random() < 0.5
                        else rng.choice([*written, table_key(rng.choice(self.hubs))])
                    )
                    if candidate not in task.inputs and candidate not in added:
                        added.append(candidate)
                        task.changes.append((day, "+", candidate))
                day += rng.randint(30, 120)
            tasks.append(task)
            previous = table_key(table)
            written.append(previous)
        return Dag(index, dag_id, rng.randint(0, 23), rng.randint(0, 59), tasks, f"team-{domain}")

    def _dag_id(self, index: int) -> str:
        return f"{random.Random(f'{self.seed}:dag:{index}').choice(DOMAINS)}_{index:05d}"

    # ------------------------------------------------------------------ the stream
    def lines(self) -> Iterator[str]:
        """The events as JSON lines (no newline), in event-time order within each day, exactly ``events`` of them."""
        return itertools.islice(self._all_lines(), self.total)

    def following(self, count: int) -> Iterator[str]:
        """The ``count`` events that come after the history's ``events`` (the platform going on): JSON lines."""
        return itertools.islice(self._all_lines(), self.total, self.total + count)

    def after(self, last_line: str, count: int) -> list[str]:
        """The ``count`` events after ``last_line``, one of the stream's (the history's last: then what ``following``
        gives), generated from the day before its date on instead of from the start (at 10^7 events that replay
        took some 15 minutes). The day before: a run of that day may end after midnight."""
        first = day = max(0, (datetime.fromisoformat(last_line[14:24]).date() - self.start.date()).days - 1)
        lines: list[str] = []
        found = None
        while found is None or len(lines) < found + 1 + count:
            generated = list(self.day_lines(day))
            if found is None and last_line in generated:
                found = len(lines) + generated.index(last_line)
            lines += generated
            day += 1
            # looked for in the days of its own date, not up to the year's last: a history's events run past ``days``
            # when its DAGs' runs make fewer events a day than ``events / days`` (the 10^6 year ends on its day 370)
            if found is None and day > first + 2:
                raise ValueError("not a line of this history")
        return lines[found + 1 : found + 1 + count]

    def events(self) -> Iterator[dict]:
        return (json.loads(line) for line in self.lines())

    def _all_lines(self) -> Iterator[str]:
        for day in itertools.count():
            yield from self.day_lines(day)

    def day_lines(self, day: int) -> Iterator[str]:
        """The events generated for ``day`` (0: the start), in event-time order: every DAG's run of that day and the
        runs cleared on the day before, run again (some of them end after midnight, on the next date). A day is
        generated alone, so that a year can be written by several processes at once: whether a run is cleared is
        the first draw of that run's own generator."""
        runs = [(dag, day, 0) for dag in self.dags]
        if day > 0:
            runs += [(dag, day - 1, 1) for dag in self.dags if self._cleared(dag, day - 1)]
        streams = []
        for dag, logical_day, clear in runs:
            rng = random.Random(f"{self.seed}:{dag.index}:{logical_day}:{clear}")
            if not clear:
                rng.random()  # the draw ``_cleared`` reads: this run's events come after it
            streams.append(self._dag_run(rng, dag, logical_day, day, clear))
        for _, line in heapq.merge(*streams):
            yield line

    def _cleared(self, dag: Dag, day: int) -> bool:
        """Whether ``dag``'s run of ``day`` is cleared and run again the next day (1 in 100)."""
        return random.Random(f"{self.seed}:{dag.index}:{day}:0").random() < 0.01

    def _dag_run(self, rng: random.Random, dag: Dag, logical_day: int, day: int, clear: int) -> list[tuple[str, str]]:
        """One DAG run's events as (event time, JSON line), sorted."""
        logical = self.start + timedelta(days=logical_day, hours=dag.hour, minutes=dag.minute)
        at = self.start + timedelta(days=day, hours=dag.hour, minutes=dag.minute, seconds=rng.randint(0, 59))
        if clear:
            at += timedelta(hours=rng.randint(1, 6))
        nominal = {"nominalStartTime": _stamp(logical), "nominalEndTime": _stamp(logical + timedelta(days=1))}
        dag_run = _run_id(rng, at)
        out: list[tuple[str, str]] = []
        dag_job = {"namespace": NAMESPACE, "name": dag.dag_id}
        dag_facets = {
            "nominalTime": _facet(AIRFLOW, "1-0-1/NominalTimeRunFacet.json", **nominal),
            "airflowDagRun": _custom(
                "AirflowDagRunFacet",
                dag={"dag_id": dag.dag_id, "owner": dag.owner},
                dagRun={"run_id": f"scheduled__{_stamp(logical)}", "clear_number": clear},
            ),
        }
        out.append(self._event("START", at, dag_run, dag_job, dag_facets, {}, [], []))
        state = "COMPLETE"
        for task in dag.tasks:
            at += timedelta(seconds=rng.randint(5, 40))
            at, ok = self._task_run(rng, out, dag, task, logical_day, at, dag_run, nominal, clear)
            if not ok:
                state = "FAIL"
                break
        at += timedelta(seconds=rng.randint(1, 10))
        out.append(self._event(state, at, dag_run, dag_job, {"nominalTime": dag_facets["nominalTime"]}, {}, [], []))
        out.sort()
        return out

    def _task_run(
        self, rng, out, dag: Dag, task: Task, day: int, at: datetime, dag_run: str, nominal: dict, clear: int
    ):
        """A task's try (and its retry when it fails): its Airflow events and its Spark child runs. Returns the time it
        ended and whether it succeeded in the end."""
        for attempt in (1, 2):
            fails = attempt == 1 and rng.random() < 0.02
            at = self._task_try(rng, out, dag, task, day, at, dag_run, nominal, attempt, fails, clear)
            if not fails:
                return at, True
            at += timedelta(hours=1)
        return at, False

    def _task_try(self, rng, out, dag, task, day, at, dag_run, nominal, attempt, fails, clear) -> datetime:
        job = f"{dag.dag_id}.{task.name}"
        run = _run_id(rng, at)
        epoch = task.epoch(day)
        inputs = task.inputs_on(day)
        parent = _facet(
            AIRFLOW,
            "1-1-0/ParentRunFacet.json",
            job={"namespace": NAMESPACE, "name": dag.dag_id},
            run={"runId": dag_run},
            root={"job": {"namespace": NAMESPACE, "name": dag.dag_id}, "run": {"runId": dag_run}},
        )
        run_facets = {
            "nominalTime": _facet(AIRFLOW, "1-0-1/NominalTimeRunFacet.json", **nominal),
            "parent": parent,
            "processing_engine": _facet(
                AIRFLOW,
                "1-1-1/ProcessingEngineRunFacet.json",
                name="Airflow",
                version="3.1.3",
                openlineageAdapterVersion="2.20.3",
            ),
            "airflow": _custom(
                "AirflowRunFacet",
                taskInstance={"try_number": attempt, "map_index": -1},
                task={
                    "task_id": task.name,
                    "operator_class": "LakehouseSparkSubmitOperator" if task.table else "PythonOperator",
                },
            ),
        }
        code = f"# {job} v{epoch}\n" + "".join(f"df = df.withColumn('c{i}', f(col('c{i}')))\n" for i in range(12))
        job_facets = {
            "jobType": _facet(
                AIRFLOW, "2-0-3/JobTypeJobFacet.json", processingType="BATCH", integration="AIRFLOW", jobType="TASK"
            ),
            "ownership": _facet(AIRFLOW, "1-0-1/OwnershipJobFacet.json", owners=[{"name": dag.owner}]),
            "sourceCode": _facet(AIRFLOW, "1-0-1/SourceCodeJobFacet.json", language="python", sourceCode=code),
            "sourceCodeLocation": _facet(
                AIRFLOW,
                "1-0-1/SourceCodeLocationJobFacet.json",
                type="git",
                url=f"https://git.example.com/{job}.py",
                repoUrl="https://git.example.com/platform",
                path=f"dags/{dag.dag_id}.py",
                branch="main",
                version=f"{random.Random(f'{self.seed}:{job}:{epoch}').getrandbits(160):040x}",
            ),
        }
        own = f"file|{WAREHOUSE}/{dag.dag_id}/"
        ins = [
            self._dataset(key, rng, snapshot=(day, clear) if key.startswith(own) else (day - 1, 0), reading=True)
            for key in inputs
        ]
        outs = (
            [self._dataset(table_key(task.table), rng, snapshot=(day, clear), writer=task, epoch=epoch, inputs=inputs)]
            if task.table
            else [self._dataset(f"file|/lake/landing/{dag.dag_id}/extract", rng, snapshot=(day, clear), landed=True)]
        )
        start_ins = [
            {
                "namespace": d["namespace"],
                "name": d["name"],
                "facets": {k: d["facets"][k] for k in ("symlinks",) if k in d["facets"]},
            }
            for d in ins
        ]
        start_outs = [{"namespace": d["namespace"], "name": d["name"], "facets": {}} for d in outs]
        job_ref = {"namespace": NAMESPACE, "name": job}
        out.append(self._event("START", at, run, job_ref, run_facets, job_facets, start_ins, start_outs))
        if task.table:
            at = self._spark(rng, out, dag, task, at, run, job, dag_run, ins, outs, fails)
        else:
            at += timedelta(seconds=rng.randint(3, 60))
        end_facets = {"nominalTime": run_facets["nominalTime"], "parent": parent}
        if fails:
            end_facets["errorMessage"] = _facet(
                AIRFLOW,
                "1-0-1/ErrorMessageRunFacet.json",
                programmingLanguage="python",
                message=f"SparkSubmitOperator: spark-submit of {job} exited with code 1",
                stackTrace="Traceback (most recent call last):\n  ...\nAirflowException: Cannot execute spark-submit",
            )
            out.append(self._event("FAIL", at, run, job_ref, end_facets, {}, start_ins, start_outs))
        else:
            if task.table:
                end_facets["writeAuditPublish"] = _custom(
                    "WriteAuditPublishRunFacet",
                    table=task.table,
                    dataset=table_key(task.table).split("|", 1)[1],
                    branch=f"audit_{run[:8]}",
                    published=True,
                    blocking=[],
                    warnings=[],
                    results=[{"name": "row_count_positive", "passed": True}, {"name": "not_null", "passed": True}],
                )
            out.append(self._event("COMPLETE", at, run, job_ref, end_facets, job_facets, ins, outs))
        return at

    def _spark(self, rng, out, dag, task, at, task_run, job, dag_run, ins, outs, fails) -> datetime:
        app = f"{dag.dag_id}_{task.name}"
        parent = _facet(
            SPARK,
            "1-1-0/ParentRunFacet.json",
            job={"namespace": NAMESPACE, "name": job},
            run={"runId": task_run},
            root={"job": {"namespace": NAMESPACE, "name": dag.dag_id}, "run": {"runId": dag_run}},
        )
        common = {
            "parent": parent,
            "processing_engine": _facet(
                SPARK,
                "1-1-1/ProcessingEngineRunFacet.json",
                version="4.1.3",
                name="spark",
                openlineageAdapterVersion="1.53.0",
            ),
            "spark_properties": _facet(
                SPARK, "1-0-0/SparkPropertiesFacet.json", properties={"spark.master": "local[*]", "spark.app.name": app}
            ),
        }
        at += timedelta(seconds=rng.randint(2, 8))
        app_run = _run_id(rng, at)
        app_job = {"namespace": NAMESPACE, "name": app}
        app_type = {
            "jobType": _facet(
                SPARK, "2-0-3/JobTypeJobFacet.json", processingType="BATCH", integration="SPARK", jobType="APPLICATION"
            )
        }
        details = {
            "spark_applicationDetails": _facet(
                SPARK,
                "1-0-0/SparkApplicationDetailsFacet.json",
                master="local",
                appName=app,
                applicationId=f"local-{rng.getrandbits(40)}",
                sparkUser="airflow",
            )
        }
        out.append(self._event("START", at, app_run, app_job, common | details, app_type, [], []))
        app_parent = _facet(
            SPARK,
            "1-1-0/ParentRunFacet.json",
            job=app_job,
            run={"runId": app_run},
            root={"job": {"namespace": NAMESPACE, "name": dag.dag_id}, "run": {"runId": dag_run}},
        )
        for index in range(task.spark_jobs):
            writes = index == task.spark_jobs - 1
            name = (
                f"{app}.overwrite_by_expression.lakehouse_{task.table.replace('.', '_')}"
                if writes
                else f"{app}.collect_limit"
            )
            at += timedelta(seconds=rng.randint(2, 30))
            run = _run_id(rng, at)
            sql = {
                "sql": _facet(
                    SPARK,
                    "1-1-0/SQLJobFacet.json",
                    dialect="spark",
                    query=f"INSERT OVERWRITE lakehouse.{task.table} SELECT ... FROM ...",
                )
            }
            job_type = {
                "jobType": _facet(
                    SPARK, "2-0-3/JobTypeJobFacet.json", processingType="BATCH", integration="SPARK", jobType="SQL_JOB"
                )
            } | sql
            facets = common | {"parent": app_parent}
            out.append(
                self._event(
                    "START",
                    at,
                    run,
                    {"namespace": NAMESPACE, "name": name},
                    facets,
                    job_type,
                    ins,
                    outs if writes else [],
                )
            )
            if rng.random() < 0.5:
                at += timedelta(seconds=rng.randint(1, 20))
                out.append(
                    self._event(
                        "RUNNING",
                        at,
                        run,
                        {"namespace": NAMESPACE, "name": name},
                        facets,
                        job_type,
                        ins,
                        outs if writes else [],
                    )
                )
            at += timedelta(seconds=rng.randint(5, 300))
            state = "FAIL" if fails and writes else "COMPLETE"
            out.append(
                self._event(
                    state,
                    at,
                    run,
                    {"namespace": NAMESPACE, "name": name},
                    facets,
                    job_type,
                    ins,
                    outs if writes and not fails else [],
                )
            )
            if fails:
                break
        at += timedelta(seconds=rng.randint(1, 5))
        out.append(self._event("FAIL" if fails else "COMPLETE", at, app_run, app_job, common, app_type, [], []))
        return at + timedelta(seconds=rng.randint(1, 5))

    def _version(self, key: str, day: int, clear: int) -> str:
        """The Iceberg snapshot id a table's write of ``day`` (by a DAG run of ``clear``) made."""
        return str(random.Random(f"{self.seed}:version:{key}:{day}:{clear}").getrandbits(62))

    def _dataset(
        self,
        key: str,
        rng: random.Random,
        *,
        snapshot: tuple[int, int],
        reading=False,
        writer: Task | None = None,
        epoch=0,
        inputs=(),
        landed=False,
    ) -> dict:
        namespace, name = key.split("|", 1)
        facets: dict = {}
        dataset = {"namespace": namespace, "name": name, "facets": facets}
        if namespace == "file" and name.startswith(WAREHOUSE):
            table = ".".join(name.removeprefix(WAREHOUSE + "/").split("/", 1))
            facets["symlinks"] = _facet(
                AIRFLOW,
                "1-0-1/SymlinksDatasetFacet.json",
                identifiers=[{"namespace": CATALOG_URI, "name": table, "type": "TABLE"}],
            )
            facets["catalog"] = _facet(
                AIRFLOW,
                "1-1-0/CatalogDatasetFacet.json",
                framework="iceberg",
                type="rest",
                name="lakehouse",
                metadataUri=CATALOG_URI,
                warehouseUri=f"file://{WAREHOUSE}",
                source="spark",
                catalogProperties={},
            )
            facets["version"] = _facet(
                AIRFLOW, "1-0-1/DatasetVersionDatasetFacet.json", datasetVersion=self._version(key, *snapshot)
            )
        if reading:
            dataset["inputFacets"] = {
                "dataQualityMetrics": _facet(
                    AIRFLOW,
                    "1-0-3/DataQualityMetricsInputDatasetFacet.json",
                    rowCount=rng.randint(1000, 10**7),
                    columnMetrics={"id": {"nullCount": 0, "distinctCount": rng.randint(10, 10**6)}},
                ),
            }
        if writer is not None:
            columns = writer.columns + [(f"added_{index}", "string") for index in range(epoch)]
            facets["schema"] = _facet(
                AIRFLOW,
                "1-2-0/SchemaDatasetFacet.json",
                fields=[{"name": column, "type": kind} for column, kind in columns],
            )
            sources = [key.split("|", 1) for key in inputs[:2]]
            facets["columnLineage"] = _facet(
                AIRFLOW,
                "1-2-0/ColumnLineageDatasetFacet.json",
                fields={
                    column: {
                        "inputFields": [
                            {
                                "namespace": ns,
                                "name": source,
                                "field": column,
                                "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}],
                            }
                            for ns, source in sources
                        ]
                    }
                    for column, _ in columns[:6]
                },
            )
            facets["ownership"] = _facet(
                AIRFLOW, "1-0-1/OwnershipDatasetFacet.json", owners=[{"name": "data-platform", "type": "MAINTAINER"}]
            )
            facets["dataQualityAssertions"] = _facet(
                AIRFLOW,
                "1-0-1/DataQualityAssertionsDatasetFacet.json",
                assertions=[
                    {"assertion": "row_count_positive", "success": True},
                    {"assertion": "not_null", "success": True, "column": columns[0][0]},
                ],
            )
            dataset["outputFacets"] = {
                "outputStatistics": _facet(
                    AIRFLOW,
                    "1-0-2/OutputStatisticsOutputDatasetFacet.json",
                    rowCount=rng.randint(1000, 10**7),
                    size=rng.randint(10**5, 10**10),
                    fileCount=rng.randint(1, 200),
                ),
            }
        if landed:
            facets["fileFingerprint"] = _custom(
                "FileFingerprintDatasetFacet",
                fingerprint=f"{rng.getrandbits(64):016x}",
                sizeBytes=rng.randint(10**5, 10**9),
                algorithm="xxhash64",
            )
        return dataset

    def _event(self, kind, at, run_id, job, run_facets, job_facets, inputs, outputs) -> tuple[str, str]:
        time = _stamp(at)
        event = {
            "eventTime": time,
            "eventType": kind,
            "producer": AIRFLOW,
            "schemaURL": EVENT_SCHEMA,
            "run": {"runId": run_id, "facets": run_facets},
            "job": {**job, "facets": job_facets},
            "inputs": inputs,
            "outputs": outputs,
        }
        return time, json.dumps(event, separators=(",", ":"))


def write(history: History, path: Path) -> int:
    """Write a history as a JSON-lines file; the number of events."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for line in history.lines():
            out.write(line)
            out.write("\n")
            count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.history", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--out", type=Path, required=True)
    options = parser.parse_args(argv)
    count = write(History(options.events, options.seed), options.out)
    print(f"bench.history: {count:,} events to {options.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
