"""``bench/history.py``: a seeded, streamed year of a platform's lineage, exactly the size asked for, shaped like the
project's own events (Spark child runs under Airflow task runs, facets, job versions that change, re-runs, failures,
hubs)."""

from __future__ import annotations

import heapq
import itertools
import json
import random
from collections import defaultdict
from datetime import datetime

import pytest

from bench import history
from bench.history import History
from include.lineage.events import check_event
from include.lineage.validation import IngestValidator


@pytest.fixture(scope="module")
def year() -> list[dict]:
    return list(History(24_000, seed=5).events())


def test_the_same_seed_gives_the_same_events_byte_for_byte_and_another_seed_others():
    assert list(History(700, seed=1).lines()) == list(History(700, seed=1).lines())
    assert list(History(700, seed=1).lines()) != list(History(700, seed=2).lines())


@pytest.mark.parametrize("size", [1, 43, 999, 5_000])
def test_exactly_the_size_asked_for_streamed(size):
    lines = History(size).lines()
    assert iter(lines) is lines, "a stream, never a list of the whole history"
    assert sum(1 for _ in lines) == size


def test_what_follows_a_history_is_the_platform_going_on():
    base = History(800, seed=3)
    following = list(base.following(100))
    assert len(following) == 100
    assert set(following).isdisjoint(base.lines())
    assert list(itertools.islice(History(800, seed=3)._all_lines(), 900))[800:] == following


def test_every_event_is_an_openlineage_event_lineage_serve_accepts():
    validator = IngestValidator()
    for event in History(1_500, seed=9).events():
        check_event(event)
        validator.check(event, 1000, 1 << 20)


def test_spark_runs_are_children_of_airflow_task_runs_under_their_dag_run(year):
    runs = {event["run"]["runId"]: event for event in year}
    spark = [event for event in year if event["run"]["facets"].get("spark_properties")]
    assert spark
    for event in spark:
        parent = event["run"]["facets"]["parent"]
        assert parent["run"]["runId"] in runs, "the parent run (the task run, or the Spark application) is there"
        root = parent["root"]["run"]["runId"]
        assert runs[root]["job"]["name"] == parent["root"]["job"]["name"] and "." not in runs[root]["job"]["name"]
    tasks = [e for e in year if "airflow" in e["run"]["facets"]]
    assert all(e["run"]["facets"]["parent"]["run"]["runId"] in runs for e in tasks)


def test_facets_like_the_projects_own(year):
    dataset_facets, run_facets, input_facets, output_facets, job_facets = set(), set(), set(), set(), set()
    for event in year:
        run_facets |= set(event["run"]["facets"])
        job_facets |= set(event["job"]["facets"])
        for dataset in event["inputs"] + event["outputs"]:
            dataset_facets |= set(dataset["facets"])
            input_facets |= set(dataset.get("inputFacets", {}))
            output_facets |= set(dataset.get("outputFacets", {}))
    assert {"schema", "columnLineage", "symlinks", "version", "catalog", "fileFingerprint"} <= dataset_facets
    assert {"dataQualityAssertions", "ownership"} <= dataset_facets
    assert {"parent", "nominalTime", "writeAuditPublish", "errorMessage", "spark_properties"} <= run_facets
    assert {"sourceCode", "sourceCodeLocation", "jobType", "sql"} <= job_facets
    assert "dataQualityMetrics" in input_facets and "outputStatistics" in output_facets
    sizes = sorted(len(json.dumps(event)) for event in year)
    assert 2_000 < sizes[len(sizes) // 2] < 10_000, "a median event of a few kB, as the project's own"


def test_job_versions_change_inputs_come_and_go_and_each_write_is_a_new_version(year):
    inputs_of: dict[str, list[frozenset]] = defaultdict(list)
    versions: dict[str, set] = defaultdict(set)
    code: dict[str, set] = defaultdict(set)
    for event in year:
        if event["eventType"] == "COMPLETE" and "sourceCodeLocation" in event["job"]["facets"] and event["outputs"]:
            name = event["job"]["name"]
            inputs = frozenset(d["name"] for d in event["inputs"])
            if not inputs_of[name] or inputs_of[name][-1] != inputs:
                inputs_of[name].append(inputs)
            for output in event["outputs"]:
                if "version" in output["facets"]:
                    versions[output["name"]].add(output["facets"]["version"]["datasetVersion"])
            code[name].add(event["job"]["facets"]["sourceCodeLocation"]["version"])
    changes = [(a, b) for sets in inputs_of.values() for a, b in zip(sets, sets[1:], strict=False)]
    assert any(b - a for a, b in changes), "an input added"
    assert any(a - b for a, b in changes), "an input removed"
    assert any(len(values) > 1 for values in code.values()), "a new code version with the change"
    assert max(len(values) for values in versions.values()) > 100, "a snapshot per daily write"


def test_failures_retries_and_cleared_dag_runs(year):
    failed = [e for e in year if e["eventType"] == "FAIL" and "errorMessage" in e["run"]["facets"]]
    assert failed and all(e["producer"] == history.AIRFLOW for e in failed)
    for event in failed[:5]:
        dag_run = event["run"]["facets"]["parent"]["run"]["runId"]
        retries = {
            e["run"]["runId"]
            for e in year
            if e["job"]["name"] == event["job"]["name"]
            and e["run"]["facets"].get("parent", {}).get("run", {}).get("runId") == dag_run
        }
        assert len(retries) == 2, "the failed try and its retry, two runs of one DAG run"
    nominal: dict[tuple, set] = defaultdict(set)
    for event in year:
        if event["eventType"] == "START" and "airflowDagRun" in event["run"]["facets"]:
            nominal[(event["job"]["name"], event["run"]["facets"]["nominalTime"]["nominalStartTime"])].add(
                event["run"]["runId"]
            )
    assert any(len(runs) == 2 for runs in nominal.values()), "a DAG run cleared and run again: a new run id"


def test_a_year_of_event_times_in_order_within_each_day(year):
    times = [datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00")) for event in year]
    assert (max(times) - min(times)).days >= 250
    days = defaultdict(list)
    for time in times:
        days[time.date()].append(time)
    assert sum(1 for values in days.values() if values != sorted(values)) <= len(days) // 10


def test_hubs_are_read_by_thousands_of_jobs_at_ten_million_events():
    platform = History(10_000_000)
    readers: dict[str, int] = defaultdict(int)
    for dag in platform.dags[1:]:
        for task in dag.tasks:
            for day in (0, 180, 364):
                for dataset in task.inputs_on(day):
                    if "/shared/" in dataset:
                        readers[dataset] += 1
    # each reading task is two jobs (the Airflow task, its Spark job), counted here once per sampled day
    assert max(readers.values()) / 3 * 2 > 1_000
    assert len(platform.hubs) >= 3 and platform.dag_count > 500
    assert history.table_key("a.b") == "file|/lake/warehouse/a/b"


def _carried_day_by_day(year: History):
    """The year as first generated, one day after the other, the runs cleared on a day carried to the next one: the
    definition ``History.day_lines`` must keep while generating each day alone."""
    cleared: dict[int, list] = {}
    for day in itertools.count():
        runs = [(dag, day, 0) for dag in year.dags] + [(dag, old, 1) for dag, old in cleared.pop(day, [])]
        streams = []
        for dag, logical_day, clear in runs:
            rng = random.Random(f"{year.seed}:{dag.index}:{logical_day}:{clear}")
            if not clear and rng.random() < 0.01:
                cleared.setdefault(day + 1, []).append((dag, logical_day))
            streams.append(year._dag_run(rng, dag, logical_day, day, clear))
        yield from (line for _, line in heapq.merge(*streams))


def test_each_day_generated_alone_by_another_history_is_that_day_of_the_year_carried_day_by_day():
    """What lets several processes write a year (``store_scale.write_days``): each day generated alone, by a history
    of its own, is that day of the year generated day after day, the runs cleared the day before included."""
    carried = list(itertools.islice(_carried_day_by_day(History(20_000, seed=9)), 20_000))
    alone: list[str] = []
    day = 0
    while len(alone) < len(carried):
        alone += History(20_000, seed=9).day_lines(day)
        day += 1
    assert alone[: len(carried)] == carried == list(History(20_000, seed=9).lines())
    year = History(20_000, seed=9)
    assert any(year._cleared(dag, earlier) for dag in year.dags for earlier in range(day - 1)), (
        "no run cleared in these days: the rule that crosses days is not exercised"
    )


@pytest.mark.parametrize(("events", "count"), [(3_000, 50), (20_000, 700)])
def test_what_follows_a_line_is_generated_from_its_day_as_the_whole_stream_gives_it(events, count):
    year = History(events, seed=3)
    last = list(year.lines())[-1]
    assert History(events, seed=3).after(last, count) == list(History(events, seed=3).following(count))


def test_what_follows_a_line_past_the_years_last_day_is_generated_from_its_day_too():
    # the 10^6 year's events end on its day 370, five days past its 365: its kept history's last line was refused
    year = History(3_000, seed=3, days=5)
    stream = [line for day in range(12) for line in year.day_lines(day)]
    late = list(year.day_lines(9))[-1]
    assert History(3_000, seed=3, days=5).after(late, 40) == stream[stream.index(late) + 1 : stream.index(late) + 41]
    with pytest.raises(ValueError, match="not a line of this history"):
        year.after(late.replace('"eventType"', '"eventTypo"'), 5)
