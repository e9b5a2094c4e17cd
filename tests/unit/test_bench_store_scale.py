"""``bench/store_scale.py`` on a small size: its figures' code end to end on SQLite (a real ``lineage ingest`` of the
day files and a real ``lineage serve``), and its helpers. The bench asserts no timing; neither does this."""

from __future__ import annotations

import gzip
import json

import pytest

from bench import ingest_throughput, store_scale
from bench.history import History
from include.core import settings
from include.lineage.events import read_event_file


def test_percentiles_are_the_median_and_the_nearest_rank_95th():
    assert store_scale.percentiles([]) == {"p50_ms": None, "p95_ms": None, "count": 0}
    figures = store_scale.percentiles([float(value) for value in range(1, 101)])
    assert figures == {"p50_ms": 50.5, "p95_ms": 95.0, "count": 100}


def _day_lines(file) -> list[str]:
    return gzip.decompress(file.read_bytes()).decode("utf-8").splitlines()


@pytest.mark.parametrize("workers", [1, 3])
def test_the_history_is_written_one_file_per_event_day_every_event_once(tmp_path, workers):
    """By one process or several (days generated at once, appended in order), the same events in the same files;
    the history's size reached inside a day cuts that day's file at its last event."""
    history = History(900, seed=4)
    files, last = store_scale.write_days(history, tmp_path / "days", workers=workers)
    lines = [line for file in files for line in _day_lines(file)]
    assert lines == list(History(900, seed=4).lines())
    for file in files:
        day = file.name.removesuffix(".jsonl.gz")
        assert {json.loads(line)["eventTime"][:10] for line in _day_lines(file)} == {day}
    assert last == max(json.loads(line)["eventTime"] for line in lines)


@pytest.mark.parametrize(("events", "seed"), [(300, 1), (900, 4)])
def test_the_day_files_are_gzip_and_read_event_file_reads_back_the_history(tmp_path, events, seed):
    files, _ = store_scale.write_days(History(events, seed=seed), tmp_path / "days")
    assert len(files) > 1 and all(file.name.endswith(".jsonl.gz") for file in files)
    assert all(file.read_bytes()[:2] == b"\x1f\x8b" for file in files), "gzip-compressed, not only named so"
    read = [item for file in files for item in read_event_file(file)]
    assert [item.event for item in read] == list(History(events, seed=seed).events())
    assert read[0].source == f"{files[0]}:1"


def test_the_day_files_of_an_earlier_run_plain_or_gzip_are_replaced_by_this_runs(tmp_path):
    """Every run writes its history afresh: the plain ``<day>.jsonl`` files of the runs before the files were
    compressed (and an earlier run's day files) are deleted, not left beside the new ones taking the disk."""
    folder = tmp_path / "days"
    folder.mkdir()
    (folder / "2025-01-01.jsonl").write_text("an earlier run's plain day file\n")
    (folder / "1999-12-31.jsonl.gz").write_bytes(gzip.compress(b"a day this history does not have\n"))
    (folder / "notes.txt").write_text("not a day file: kept\n")
    files, _ = store_scale.write_days(History(300, seed=1), folder)
    assert sorted(folder.iterdir()) == sorted([*files, folder / "notes.txt"])


def test_the_bench_measures_every_figure_on_sqlite_and_merges_its_own_section(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    results = settings.Paths.current().bench / "results.json"
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps({ingest_throughput.SECTION: {"kept": 1}}))
    argv = ["--sizes", "700", "--databases", "sqlite", "--queries", "3", "--post-events", "40", "--clients", "2"]
    real_popen, started = ingest_throughput.subprocess.Popen, []

    def recorded(*args, **kwargs):
        started.append((args[0], kwargs["env"]))
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(ingest_throughput.subprocess, "Popen", recorded)
    assert store_scale.main(argv) == 0
    # the store's URL (a kept cluster's password) in the server's environment, not on its command line
    [(command, env)] = [(command, env) for command, env in started if "serve" in command]
    assert "--store" not in command and env["LINEAGE_STORE_URL"].endswith("store-700.db"), (command, env)
    written = json.loads(results.read_text())
    assert written[ingest_throughput.SECTION] == {"kept": 1}, "another section's figures stay as they were"
    figures = written[store_scale.SECTION]["sqlite_700"]
    assert figures["events"] == 700 and figures["backlog"]["events_per_second"] > 0
    assert 0 < figures["week_backlog"]["events"] < 700 and figures["week_backlog"]["events_per_second"] > 0
    assert figures["backlog"]["runs"] == 1 and figures["backlog"]["seconds"] >= figures["week_backlog"]["seconds"]
    assert figures["storage"]["bytes_per_event"] > 0 and figures["storage"]["largest"]
    answers = figures["answers"]
    for name in ("upstream", "impact", "hub_impact", "as_of_upstream", "run_provenance", "diff_upstream"):
        assert answers[name]["count"] > 0 and answers[name]["p95_ms"] >= answers[name]["p50_ms"], name
    assert answers["run_provenance"]["mean_runs"] >= 1 and answers["diff_upstream"]["mean_runs_compared"] >= 2
    marquez = answers["marquez_lineage_depth20"]
    assert marquez["nodes"] > 1 and marquez["walk"]["count"] == marquez["count"]
    assert figures["served"]["single_post_events_per_second"] > 0 and figures["served"]["batch_post_events_per_second"]
    assert figures["prune"]["seconds"] >= 0 and figures["prune"]["readers_during"]["count"] > 0
    markdown = (results.parent / "store-scale.md").read_text()
    assert "sqlite_700" in markdown and "marquez_lineage_depth20" in markdown and "a week's backlog" in markdown
    partial = json.loads(
        (settings.Paths.current().var / "bench-state-store-scale" / "partial-sqlite_700.json").read_text()
    )
    assert {name: partial[name] for name in ("week_backlog", "storage", "answers", "served", "prune")} == {
        name: figures[name] for name in ("week_backlog", "storage", "answers", "served", "prune")
    }


def test_a_run_stopped_while_measuring_keeps_the_figures_measured_before(tmp_path, monkeypatch):
    """A 10^7 run measures for most of an hour: stopped in the served ingest, its backlog, storage and every answer
    are in its partial file."""
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(store_scale, "served_ingest", stopped)
    with pytest.raises(KeyboardInterrupt):
        store_scale.main(["--sizes", "600", "--databases", "sqlite", "--queries", "2"])
    folder = settings.Paths.current().var / "bench-state-store-scale"
    partial = json.loads((folder / "partial-sqlite_600.json").read_text())
    assert partial["week_backlog"]["events_per_second"] > 0 and partial["storage"]["bytes_per_event"] > 0
    assert {"upstream", "hub_impact", "marquez_lineage_depth20", "run_provenance", "diff_upstream"} <= set(
        partial["answers"]
    )
    assert "served" not in partial and "prune" not in partial


def test_its_section_is_its_own():
    sections = {store_scale.SECTION, ingest_throughput.SECTION, "explorer", "ingest", "lineage", "scale"}
    assert len(sections) == 6


def test_in_shares_gives_each_thread_every_nth_item_in_order_and_raises_a_threads_error_after_all_ended():
    import threading

    from bench.store_scale import in_shares

    shares: list[list[int]] = []
    lock = threading.Lock()

    def keep(share: list) -> None:
        with lock:
            shares.append(share)

    assert in_shares(keep, list(range(10)), 3) >= 0
    assert sorted(shares) == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    finished: list[list] = []

    def fail_on_the_first(share: list) -> None:
        if share[0] == 0:
            raise ValueError("client 0 failed")
        finished.append(share)

    with pytest.raises(ValueError, match="client 0 failed"):
        in_shares(fail_on_the_first, list(range(6)), 2)
    assert finished == [[1, 3, 5]], "the other client ran to its end"


# ---------------------------------------------------------------------------------------------------- kept stores
def _events_in(path) -> int:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM lineage_events").fetchone()[0]


def test_a_kept_build_resumes_where_it_stopped_and_a_measured_store_is_built_again(tmp_path, monkeypatch):
    """An interrupted ``--keep`` build goes on from the files its record says are in: the store then holds every
    held-back-from-the-week event exactly once; measuring spends the store, and the next run builds it afresh."""
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setattr(store_scale, "BUILD_CHUNK", 2)
    work = settings.Paths.current().var / "bench-state-store-scale"
    record, store = work / "kept" / "build-sqlite-900.json", work / "kept" / "store-900.db"
    build = ["--sizes", "900", "--databases", "sqlite", "--keep", "--build-only"]
    real_run, commands = store_scale.subprocess.run, []

    def stopped_at_the_third_command(*args, **kwargs):
        commands.append(args[0])
        # the store's URL (a kept cluster's password) in the command's environment, not on its command line (ps)
        assert "--store" not in args[0] and kwargs["env"]["LINEAGE_STORE_URL"] == f"sqlite:///{store}", args
        if len(commands) == 3:
            raise KeyboardInterrupt  # the session ends mid-build
        return real_run(*args, **kwargs)

    monkeypatch.setattr(store_scale.subprocess, "run", stopped_at_the_third_command)
    with pytest.raises(KeyboardInterrupt):
        store_scale.main(build)
    monkeypatch.setattr(store_scale.subprocess, "run", real_run)
    assert json.loads(record.read_text())["files_done"] == 4, "two commands of two files each were recorded"

    assert store_scale.main(build) == 0
    files = sorted((work / "history-900").glob("*.jsonl.gz"))
    held = files[: -store_scale.WEEK_DAYS]
    kept = json.loads(record.read_text())
    assert kept["state"] == "building" and kept["files_done"] == len(held)
    assert [segment["files_from"] for segment in kept["segments"]] == [0, 4]
    assert _events_in(store) == store_scale.day_file_events(held), "every held event once, none of the week"

    measure = ["--sizes", "900", "--databases", "sqlite", "--keep", "--queries", "2", "--post-events", "20"]
    assert store_scale.main([*measure, "--clients", "1"]) == 0
    figures = json.loads((settings.Paths.current().bench / "results.json").read_text())[store_scale.SECTION]
    week = figures["sqlite_900"]["week_backlog"]
    assert week["events"] == store_scale.day_file_events(files[-store_scale.WEEK_DAYS :]) > 0
    assert figures["sqlite_900"]["backlog"]["runs"] == 2
    assert json.loads(record.read_text())["state"] == "spent"
    assert figures["sqlite_900"]["prune"]["seconds"] >= 0
    assert not store.exists(), "a spent store's disk is given back at once (a 10^7 store is ~28 GB)"

    assert store_scale.main(build) == 0
    rebuilt = json.loads(record.read_text())
    assert [segment["files_from"] for segment in rebuilt["segments"]] == [0], "built again, from the first file"
    assert _events_in(store) == store_scale.day_file_events(held), "the week, the served events and the prune gone"


def test_a_kept_store_is_measured_as_far_as_it_is_built_with_as_built(tmp_path, monkeypatch):
    """A year that cannot be built in the time at hand is measured as it stands: the files its record says are in,
    the week after them as the backlog, the prune 90 days back from that week's end; no more of the year built."""
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setattr(store_scale, "BUILD_CHUNK", 2)
    work = settings.Paths.current().var / "bench-state-store-scale"
    store = work / "kept" / "store-900.db"
    real_run, commands = store_scale.subprocess.run, []

    def stopped_at_the_third_command(*args, **kwargs):
        commands.append(args[0])
        if len(commands) == 3:
            raise KeyboardInterrupt
        return real_run(*args, **kwargs)

    monkeypatch.setattr(store_scale.subprocess, "run", stopped_at_the_third_command)
    with pytest.raises(KeyboardInterrupt):
        store_scale.main(["--sizes", "900", "--databases", "sqlite", "--keep", "--build-only"])
    files = sorted((work / "history-900").glob("*.jsonl.gz"))
    commands.clear()
    monkeypatch.setattr(
        store_scale.subprocess, "run", lambda *args, **kwargs: (commands.append(args[0]), real_run(*args, **kwargs))[1]
    )
    pruned_from = []
    real_prune = store_scale.prune_while_reading
    monkeypatch.setattr(
        store_scale,
        "prune_while_reading",
        lambda store, history, end: (pruned_from.append(end), real_prune(store, history, end))[1],
    )
    measure = [
        "--sizes",
        "900",
        "--databases",
        "sqlite",
        "--keep",
        "--as-built",
        "--queries",
        "2",
        "--post-events",
        "20",
    ]
    assert store_scale.main([*measure, "--clients", "1"]) == 0
    figures = json.loads((settings.Paths.current().bench / "results.json").read_text())[store_scale.SECTION][
        "sqlite_900"
    ]
    week = files[4 : 4 + store_scale.WEEK_DAYS]
    assert figures["as_built"] == {"day_files": 4, "of": len(files) - store_scale.WEEK_DAYS}
    assert figures["events"] == store_scale.day_file_events(files[:4] + week) < 900
    assert figures["week_backlog"]["events"] == store_scale.day_file_events(week)
    assert [command[2:] for command in commands] == [[str(path) for path in week]], "the week only: nothing more built"
    assert pruned_from == [f"{week[-1].name.split('.')[0]}T23:59:59+00:00"]
    assert not store.exists(), "measured: spent, its disk given back"


def test_as_built_asks_for_kept_stores(capsys):
    for argv in (["--as-built"], ["--as-built", "--keep", "--build-only"]):
        with pytest.raises(SystemExit):
            store_scale.main(argv)
        assert "--as-built measures kept stores" in capsys.readouterr().err


def test_a_kept_history_is_written_once_and_again_when_it_is_another_or_incomplete(tmp_path, monkeypatch):
    folder = tmp_path / "days"
    files, end = store_scale.kept_days(History(600, seed=3), folder)
    written = {path: path.stat().st_mtime_ns for path in files}

    def must_not_write(*_):
        raise AssertionError("the kept history was written again")

    with monkeypatch.context() as patch:
        patch.setattr(store_scale, "write_days", must_not_write)
        assert store_scale.kept_days(History(600, seed=3), folder) == (files, end)
    assert {path: path.stat().st_mtime_ns for path in files} == written

    other, _ = store_scale.kept_days(History(600, seed=4), folder)  # another history: written afresh
    assert [item.event for path in other for item in read_event_file(path)] == list(History(600, seed=4).events())
    other[3].unlink()  # a day file lost: the history is written again, whole
    again, _ = store_scale.kept_days(History(600, seed=4), folder)
    assert again == other and all(path.exists() for path in again)
    (folder / store_scale.MANIFEST).write_text("{not json")
    assert store_scale.kept_days(History(600, seed=4), folder)[0] == other


@pytest.mark.parametrize(
    ("content", "kept"),
    [
        (None, False),
        ("", False),
        ("{not json", False),
        ("[1, 2]", False),
        (json.dumps({"history": {"events": 1}, "state": "building", "files_done": 3}), False),
        (json.dumps({"history": "IDENTITY", "state": "spent", "files_done": 3}), False),
        (json.dumps({"history": "IDENTITY", "files_done": 3}), False),
        (json.dumps({"history": "IDENTITY", "state": "building", "files_done": 3}), True),
    ],
)
def test_a_build_record_is_resumed_only_when_it_is_this_historys_and_not_spent(tmp_path, content, kept):
    identity = store_scale.history_identity(History(300, seed=1))
    record = tmp_path / "build.json"
    if content is not None:
        record.write_text(content.replace('"IDENTITY"', json.dumps(identity)))
    assert (store_scale.read_build(record, identity) is not None) is kept


def test_build_only_asks_for_kept_stores(capsys):
    with pytest.raises(SystemExit) as stopped:
        store_scale.main(["--build-only"])
    assert stopped.value.code == 2 and "--keep" in capsys.readouterr().err


def test_the_prune_is_not_measured_when_the_disk_has_less_free_than_the_sqlite_store(tmp_path, monkeypatch):
    """SQLite's prune is one transaction and a VACUUM: its write-ahead log and the copy can need the store's own size
    again. With less free, the figure says why it is missing instead of the run filling the disk after hours."""
    from collections import namedtuple

    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(store_scale.shutil, "disk_usage", lambda path: usage(10**12, 10**12 - 4_096, 4_096))
    argv = ["--sizes", "600", "--databases", "sqlite", "--queries", "2", "--post-events", "20", "--clients", "1"]
    assert store_scale.main(argv) == 0
    bench = settings.Paths.current().bench
    prune = json.loads((bench / "results.json").read_text())[store_scale.SECTION]["sqlite_600"]["prune"]
    assert set(prune) == {"skipped"} and "0.0 GB free beside store-600.db" in prune["skipped"], prune
    assert "not measured: 0.0 GB free" in (bench / "store-scale.md").read_text()


def test_the_events_after_a_kept_history_are_those_the_whole_stream_gives_and_kept_beside_it(tmp_path):
    history = History(900, seed=4)
    folder = tmp_path / "days"
    store_scale.write_days(history, folder)
    following = store_scale._following(history, 40, folder)
    assert following == [json.loads(line) for line in History(900, seed=4).following(40)]
    assert len((folder / "following-40.jsonl").read_text().splitlines()) == 40
