"""``queries.sql.newest_runs``: the newest runs of some jobs (or job versions), read job by job in the index's order
above the floor found so far; and the page's "as of a run" picker built on it (it sorted every run without a parent:
166,224 runs of a year's store, 2.6 s of each draw).

The expected answers come from the generated events themselves: when each run started, which job it is, whether
it has a parent."""

from __future__ import annotations

import shutil
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from include.lineage.api import data
from include.lineage.queries import LineageQueries, sql
from include.lineage.queries.sql import newest_runs
from include.lineage.store import LineageStore
from include.lineage.store.schema import jobs_table, runs_table
from tests.unit.test_impact_runs import _time, at_most
from tests.unit.test_lineage_store import NS, _event, _parent

JOBS = {"dag_a": "DAG", "dag_b": "DAG", "dag_a.task": "TASK", "spark_app": "JOB"}

RUN = st.fixed_dictionaries(
    {
        "job": st.sampled_from(sorted(JOBS)),
        "hour": st.integers(0, 30),  # runs of one start are ordered by id
        "started": st.booleans(),  # without a START its start is its first event
        "child": st.booleans(),  # a run with a parent is no DAG run for the picker
        "id": st.uuids().map(str),
    }
)


def _events(runs: list[dict]) -> list[dict]:
    events = []
    for run in runs:
        job_facets = {"jobType": {"jobType": JOBS[run["job"]], "integration": "AIRFLOW", "processingType": "BATCH"}}
        run_facets = _parent("dag_a", "00000000-0000-4000-8000-000000000000") if run["child"] else {}
        types = ("START", "COMPLETE") if run["started"] else ("COMPLETE",)
        for offset, kind in enumerate(types):
            time = _time(run["hour"] + offset)
            events.append(_event(kind, run["job"], run["id"], time, run_facets=run_facets, job_facets=job_facets))
    return events


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    runs=st.lists(RUN, min_size=1, max_size=30, unique_by=lambda run: run["id"]),
    limit=st.integers(1, 8),
    jobs=st.sets(st.sampled_from(sorted(JOBS)), min_size=1),
    chunk=st.sampled_from([1, 2, sql.CHUNK]),
)
def test_the_newest_runs_of_some_jobs_are_those_a_sort_of_all_their_runs_gives(
    tmp_path_factory, empty_store_file, runs, limit, jobs, chunk
):
    """Fewer jobs with runs than ``limit``: each job's newest runs; as many or more: those above the floor (the
    ``limit``-th newest of the jobs' newest starts); keys a statement: 1 and 2 make several pages to merge."""
    folder = tmp_path_factory.mktemp("newest")
    shutil.copyfile(empty_store_file, folder / "store.db")
    with LineageStore(f"sqlite:///{folder / 'store.db'}") as store:
        store.ingest(_events(runs))
        with store.engine.connect() as conn, mock.patch.object(sql, "chunks", at_most(chunk)):
            ids = dict(conn.execute(select(jobs_table.c.name, jobs_table.c.id)).all())
            keys = [ids[job] for job in jobs if job in ids]
            roots = newest_runs(conn, runs_table.c.job_id, keys, limit, [runs_table.c.parent_run_id.is_(None)])
            every = newest_runs(conn, runs_table.c.job_id, keys, limit)
        expected = sorted(((_time(run["hour"]), run["id"]) for run in runs if run["job"] in jobs), reverse=True)
        # (the store spells instants its own way: compared by run id, in order)
        assert [run.id for run in every] == [run_id for _, run_id in expected[:limit]]
        roots_expected = [i for _, i in expected if not next(r for r in runs if r["id"] == i)["child"]]
        assert [run.id for run in roots] == roots_expected[:limit]
        # each run listed with what a list shows of it (``sql.ListedRun``), from its own row
        generated = {run["id"]: run for run in runs}
        for listed in every + roots:
            run = generated[listed.id]
            hours = (run["hour"], run["hour"] + 1) if run["started"] else (None, run["hour"])
            assert (listed.job_id, listed.state) == (ids[run["job"]], "COMPLETED"), listed
            shown = (listed.start, listed.started_at, listed.ended_at)
            assert [instant and instant[:13] for instant in shown] == [
                _time(hours[0] if run["started"] else run["hour"])[:13],
                hours[0] is not None and _time(hours[0])[:13] or None,
                _time(hours[1])[:13],
            ], listed
        # the page's picker: the newest DAG runs (of DAG-level jobs, without a parent), each with its job
        picker = data.graph(LineageQueries(store))["runs"]
        dag_runs = sorted(
            (
                (_time(run["hour"]), run["id"], run["job"])
                for run in runs
                if JOBS[run["job"]] == "DAG" and not run["child"]
            ),
            reverse=True,
        )[: data.PICKER_RUNS]
        assert [(run["id"], run["job"]) for run in picker] == [(run_id, job) for _, run_id, job in dag_runs]
        assert [run["startedAt"][:13] for run in picker] == [start[:13] for start, _, _ in dag_runs]
        assert all(run["state"] == "COMPLETED" for run in picker)


def test_a_run_of_the_floors_start_in_a_later_job_still_wins_by_its_id(empty_store_file, tmp_path):
    """Runs of one start are ordered by id: the floor keeps a run whose start equals the newest-so-far's."""
    shutil.copyfile(empty_store_file, tmp_path / "store.db")
    low, high = "10000000-0000-4000-8000-000000000000", "f0000000-0000-4000-8000-000000000000"
    runs = [
        {"job": "dag_a", "hour": 3, "started": True, "child": False, "id": high},
        {"job": "dag_b", "hour": 3, "started": True, "child": False, "id": low},  # the newer job: read first
    ]
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        store.ingest(_events(runs))
        with store.engine.connect() as conn:
            ids = dict(conn.execute(select(jobs_table.c.name, jobs_table.c.id)).all())
            newest = newest_runs(conn, runs_table.c.job_id, [ids["dag_a"], ids["dag_b"]], 1)
    assert [run.id for run in newest] == [high]


def test_no_keys_no_runs(empty_store_file, tmp_path):
    shutil.copyfile(empty_store_file, tmp_path / "store.db")
    with LineageStore(f"sqlite:///{tmp_path / 'store.db'}") as store, store.engine.connect() as conn:
        assert newest_runs(conn, runs_table.c.job_id, [], 5) == []
    assert NS
