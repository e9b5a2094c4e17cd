"""The runs of a node's impact: the newest N listed, every one counted (a hub of a year of history was read by a
million runs, and the answer listed each of them).

The expected answer is computed from the generated events themselves (which run read what, when it started), not
from the store's tables; the chunks the query splits its jobs into are made tiny so that merging the chunks' pages is
tested on a few jobs."""

from __future__ import annotations

import json
import shutil
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from include.lineage import cli
from include.lineage.queries import LineageQueries, sql
from include.lineage.queries import impact as impact_query
from include.lineage.store import LineageStore
from tests.unit.test_lineage_store import _event

FILE = "file"
JOBS = [f"dag.job{i}" for i in range(6)]
DATASETS = [f"/d/{i}" for i in range(5)]


def _time(hour: int) -> str:
    return f"2025-03-{1 + hour // 24:02d}T{hour % 24:02d}:00:00+00:00"


RUN = st.fixed_dictionaries(
    {
        "job": st.sampled_from(JOBS),
        "inputs": st.sets(st.sampled_from(DATASETS), max_size=3),  # its COMPLETE's
        "start_inputs": st.sets(st.sampled_from(DATASETS), max_size=2),  # its START's: the run read both
        "outputs": st.sets(st.sampled_from(DATASETS), max_size=2),
        "hour": st.integers(0, 40),  # several runs often start at one instant: ordered by id then
        "started": st.booleans(),  # without a START its start is its first event (first_event_time)
        "id": st.uuids().map(str),
    }
)


def _events(runs: list[dict]) -> list[dict]:
    from openlineage.client.event_v2 import InputDataset, OutputDataset

    events = []
    for run in runs:
        inputs = [InputDataset(namespace=FILE, name=name) for name in sorted(run["inputs"])]
        outputs = [OutputDataset(namespace=FILE, name=name) for name in sorted(run["outputs"])]
        if run["started"]:
            start_inputs = [InputDataset(namespace=FILE, name=name) for name in sorted(run["start_inputs"])]
            events.append(_event("START", run["job"], run["id"], _time(run["hour"]), start_inputs))
        complete_hour = run["hour"] + (1 if run["started"] else 0)
        events.append(_event("COMPLETE", run["job"], run["id"], _time(complete_hour), inputs, outputs))
    return events


def _read(run: dict) -> set[str]:
    return run["inputs"] | (run["start_inputs"] if run["started"] else set())


def _expected(runs: list[dict], answer: dict, since: str | None) -> list[str]:
    """The runs of the subgraph's jobs that read one of its datasets, newest first by start, then by id."""
    sub = answer["subgraph"]
    jobs = {node.name for node in sub.jobs()}
    datasets = {node.name for node in sub.nodes.values() if node.kind == "dataset"}  # the focus too
    found = {
        (_time(run["hour"]), run["id"])
        for run in runs
        if run["job"] in jobs and _read(run) & datasets and (since is None or _time(run["hour"]) >= since)
    }
    return [run_id for _, run_id in sorted(found, reverse=True)]


CHUNKS = sql.chunks


def at_most(size: int):
    """``sql.chunks`` with lists of at most ``size``, whatever size its caller asks for (the keys of an ``IN`` and the
    pages joined in one statement alike)."""
    return lambda values, asked=sql.CHUNK: CHUNKS(values, min(asked, size))


@pytest.fixture
def tiny_chunks(monkeypatch):
    """Two jobs (or versions) a query, so that a handful of them make several chunks whose pages are merged."""
    tiny = at_most(2)
    monkeypatch.setattr(impact_query, "chunks", tiny)
    monkeypatch.setattr(sql, "chunks", tiny)  # ``newest_runs``' own


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    runs=st.lists(RUN, min_size=1, max_size=25, unique_by=lambda run: run["id"]),
    focus=st.sampled_from(DATASETS),
    listed=st.sampled_from([0, 1, 2, 5, None]),
    since_hour=st.none() | st.integers(0, 41),
    order=st.randoms(use_true_random=False),
)
def test_the_newest_runs_are_listed_and_every_one_counted(
    tmp_path_factory, empty_store_file, tiny_chunks, runs, focus, listed, since_hour, order
):
    folder = tmp_path_factory.mktemp("impact")
    shutil.copyfile(empty_store_file, folder / "store.db")
    with LineageStore(f"sqlite:///{folder / 'store.db'}") as store:
        # in any order, over several transactions: a run's events may come apart (its inputs then grow)
        events = _events(runs)
        order.shuffle(events)
        cut = order.randint(0, len(events))
        store.ingest(events[:cut])
        store.ingest(events[cut:])
        queries = LineageQueries(store)
        try:
            queries.resolve(f"dataset:{FILE}:{focus}")
        except Exception:
            return  # the focus was never seen: nothing to ask
        since = _time(since_hour) if since_hour is not None else None
        answer = queries.impact(f"dataset:{FILE}:{focus}", since=since, runs=listed)
        expected = _expected(runs, answer, since)
        assert answer["runsTotal"] == len(expected)
        assert [run["id"] for run in answer["runs"]] == expected[:listed]
        every = queries.impact(f"dataset:{FILE}:{focus}", since=since, runs=None)
        assert [run["id"] for run in every["runs"]] == expected and every["runsTotal"] == len(expected)
        # the runs listed carry what the index's pages and the versions gave them, as every run's read by its key does
        assert answer["runs"] == every["runs"][:listed]
        job_of = {run["id"]: run["job"] for run in runs}
        assert all(run["job"]["name"] == job_of[run["id"]] and run["state"] for run in answer["runs"]), answer["runs"]


@pytest.fixture
def read_by_five(tmp_path):
    """/d/0 read by five runs of dag.job0, an hour apart (the newest last)."""
    runs = [
        {
            "job": "dag.job0",
            "inputs": {"/d/0"},
            "start_inputs": set(),
            "outputs": {"/d/1"},
            "hour": hour,
            "started": True,
            "id": str(uuid.uuid4()),
        }
        for hour in range(5)
    ]
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with LineageStore(url) as store:
        store.ingest(_events(runs))
    return url, [run["id"] for run in reversed(runs)]


def test_the_command_lists_the_newest_and_says_how_many_more(read_by_five, capsys):
    url, newest_first = read_by_five
    assert cli.main(["impact", "/d/0", "--runs", "2", "--store", url]) == 0
    text = capsys.readouterr().out
    assert "1 jobs, 5 runs downstream" in text
    assert "the newest 2 of 5:" in text and "… 3 older: --runs N lists more" in text
    listed = [line.split()[0] for line in text.splitlines() if "  dag.job0  COMPLETED" in line]
    assert listed == newest_first[:2]

    assert cli.main(["impact", "/d/0", "--runs", "all", "--json", "--store", url]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [run["id"] for run in answer["runs"]] == newest_first and answer["runsTotalCount"] == 5

    assert cli.main(["impact", "/d/0", "--json", "--store", url]) == 0  # the default lists 100
    assert len(json.loads(capsys.readouterr().out)["runs"]) == 5

    assert cli.main(["impact", "/d/0", "--runs", "0", "--store", url]) == 0
    text = capsys.readouterr().out
    assert "5 runs downstream" in text and "(none)" not in text and "… 5 older" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (["--runs", "-1"], "give a count of 0 or more, or all"),
        (["--runs", "some"], "give a count of 0 or more, or all"),
        (["--runs", ""], "give a count of 0 or more, or all"),
        (["--run", "0000", "--runs", "3"], "--runs are for a NODE's impact, not a run's"),
    ],
)
def test_a_bad_runs_option_is_a_usage_error_naming_it(read_by_five, capsys, args, message):
    url, _ = read_by_five
    node = [] if "--run" in args else ["/d/0"]
    try:
        code = cli.main(["impact", *node, *args, "--store", url])
    except SystemExit as exited:  # argparse's refusal of the option's value
        code = exited.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_negative_count_from_python_is_refused(read_by_five):
    url, _ = read_by_five
    with LineageStore(url) as store, pytest.raises(Exception, match="list 0 or more runs"):
        LineageQueries(store).impact("/d/0", runs=-1)
