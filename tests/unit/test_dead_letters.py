"""Refused is not lost: what ``lineage serve`` refuses is kept as a dead letter with its reason (a body refused for its
size only by its start), bounded in count and bytes, listed by ``lineage rejected`` beside the event-file lines set
aside, and replayed with ``lineage rejected --replay``: after an upgrade (here: a limit raised), with an operator's
edit (``--file``), and a line of an event file the follower set aside, admitted by today's intake."""

from __future__ import annotations

import gzip
import json
import uuid

import pytest
from fastapi.testclient import TestClient

from include.core import settings
from include.lineage import cli
from include.lineage.api.server import create_app
from include.lineage.store import LineageStore, dead_letters, iter_events
from include.lineage.store.follower import StoreFollower, rejected_lines
from include.lineage.store.schema import events_table

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"


def event(job: str = "job", **changes) -> dict:
    base = {
        "eventType": "COMPLETE",
        "eventTime": "2025-02-01T00:00:00+00:00",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "ns", "name": job, "facets": {}},
        "inputs": [],
        "outputs": [{"namespace": "file", "name": f"/out/{job}", "facets": {}}],
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    base.update(changes)
    return base


@pytest.fixture
def served(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("LINEAGE_MAX_BODY_BYTES", str(64 * 1024))
    monkeypatch.setenv("LINEAGE_MAX_DECOMPRESSED_BYTES", str(256 * 1024))
    settings.Paths.current().lineage.mkdir(parents=True)
    store = LineageStore(f"sqlite:///{tmp_path / 'store.db'}")
    with TestClient(create_app(store=store), raise_server_exceptions=False) as client:
        client.store = store
        yield client
    store.close()


def _post(client, content: bytes, **headers):
    return client.post("/api/v1/lineage", content=content, headers={"content-type": "application/json", **headers})


def test_every_refused_post_is_kept_with_its_reason_and_a_body_refused_for_its_size_only_by_its_start(served):
    no_run = {k: v for k, v in event("no_run").items() if k != "run"}
    answers = {
        "not json": _post(served, b"{not json"),
        "no run": served.post("/api/v1/lineage", json=no_run),
        "gzip bomb": _post(served, gzip.compress(b" " * (2 * 1024 * 1024)), **{"content-encoding": "gzip"}),
        "too large": _post(served, b" " * (65 * 1024)),
        "batch": served.post("/api/v1/lineage/batch", json=[event("fine"), event("bad", eventTime="yesterday")]),
    }
    assert {name: answer.status_code for name, answer in answers.items()} == {
        "not json": 400,
        "no run": 422,
        "gzip bomb": 413,
        "too large": 413,
        "batch": 400,
    }
    cross_site = served.post("/api/v1/lineage", content=b"x", headers={"content-type": "text/plain"})
    assert cross_site.status_code == 415, "a cross-site form post is not kept, not even as a dead letter"
    letters = {letter["reason"].split(":")[0]: letter for letter in dead_letters.letters(served.store)}
    assert len(letters) == 5 and served.store.count(events_table) == 0
    by_status = sorted((letter["status"], letter["whole"]) for letter in letters.values())
    assert by_status == [(400, True), (400, True), (413, False), (413, False), (422, True)]
    bomb = next(item for item in letters.values() if "decompresses" in item["reason"])
    assert bomb["bytes"] == b"" and bomb["length"] > 0 and not bomb["whole"], "recorded as a reason, not whole"
    batch = next(item for item in letters.values() if item["reason"].startswith("event 1 of the post"))
    assert json.loads(batch["content"])["job"]["name"] == "bad", "only the refused event of a batch is kept"
    assert next(item for item in letters.values() if item["status"] == 422)["content"] == json.dumps(no_run)
    assert served.get("/api/v1/health").json()["deadLetters"] == 5
    assert served.post("/api/v1/lineage", json=no_run).status_code == 422
    assert len(dead_letters.letters(served.store)) == 5, "the same content again is one letter, counted"
    assert next(item for item in dead_letters.letters(served.store) if item["status"] == 422)["times"] == 2


def test_dead_letters_are_bounded_in_count_and_bytes_the_oldest_going_first(served, monkeypatch):
    monkeypatch.setenv("LINEAGE_DEAD_LETTERS", "3")
    for index in range(5):
        _post(served, f"not json {index}".encode())
    assert [letter["content"] for letter in dead_letters.letters(served.store)] == [
        "not json 4",
        "not json 3",
        "not json 2",
    ]
    monkeypatch.setenv("LINEAGE_DEAD_LETTERS_BYTES", "25")
    _post(served, b"not json, and longer")
    assert [letter["content"] for letter in dead_letters.letters(served.store)] == ["not json, and longer"]


def test_lineage_rejected_lists_the_lines_set_aside_and_the_posts_refused(served, capsys):
    paths = settings.Paths.current()
    paths.lineage_events.write_bytes(b"not an event\n")
    served.post("/api/v1/lineage", json={k: v for k, v in event().items() if k != "producer"})
    assert cli.main(["rejected", "--store", served.store.url]) == 0
    printed = capsys.readouterr().out
    assert "not valid JSON" in printed and "/api/v1/lineage 422 from address testclient" in printed
    assert "producer is required" in printed and "LineageEvent.java:52" in printed
    assert "1 line(s) not stored; 1 post(s) refused by lineage serve (1 waiting" in printed
    assert cli.main(["rejected", "--store", served.store.url, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [item["kind"] for item in listed] == ["line", "post"] and listed[1]["status"] == 422


def test_replay_after_an_upgrade_with_an_operators_edit_and_of_a_file_line(served, monkeypatch, capsys):
    monkeypatch.setenv("LINEAGE_MAX_EVENT_DATASETS", "1")
    wide = event("wide", inputs=[{"namespace": "file", "name": "/in"}])
    assert served.post("/api/v1/lineage", json=wide).status_code == 400  # past a limit of this server
    no_run = {k: v for k, v in event("no_run").items() if k != "run"}
    assert served.post("/api/v1/lineage", json=no_run).status_code == 422  # Marquez refuses it too
    _post(served, gzip.compress(b" " * (2 * 1024 * 1024)), **{"content-encoding": "gzip"})  # kept in part
    done = event("done", eventType="DONE")
    paths = settings.Paths.current()
    paths.lineage_events.write_text(json.dumps(done) + "\n")
    StoreFollower(served.store, paths).refresh()
    assert [line["error"] for line in rejected_lines(served.store)] == [
        "eventType 'DONE' is not one of ABORT, COMPLETE, FAIL, OTHER, RUNNING, START"
    ]

    monkeypatch.setenv("LINEAGE_MAX_EVENT_DATASETS", "1000")  # the "upgrade"
    assert cli.main(["rejected", "--store", served.store.url, "--replay"]) == 1  # the 422 is still refused
    printed = capsys.readouterr().out
    assert "stored: 1 read, 1 new" in printed and "still refused (422)" in printed and "kept only in part" in printed
    assert "lineage rejected --replay: 2 stored, 1 still refused, 1 kept only in part" in printed
    assert rejected_lines(served.store) == [], "the file line the follower set aside is stored now"
    waiting = dead_letters.letters(served.store, waiting_only=True)
    refused = next(item for item in waiting if item["status"] == 422)
    assert "still refused" in refused["replayOutcome"]

    fixed = served.store.url.removeprefix("sqlite:///").replace("store.db", "fixed.json")
    with open(fixed, "w") as stream:
        json.dump({**no_run, "run": {"runId": str(uuid.uuid4())}}, stream)
    assert cli.main(["rejected", "--store", served.store.url, "--replay", str(refused["id"]), "--file", fixed]) == 0
    assert "stored: 1 read, 1 new" in capsys.readouterr().out
    assert served.store.count(events_table) == 3
    assert [item["status"] for item in dead_letters.letters(served.store, waiting_only=True)] == [413]
    names = {stored["job"]["name"] for stored in iter_events(served.store)}
    assert names == {"wide", "no_run", "done"}
    assert cli.main(["rejected", "--store", served.store.url, "--file", fixed]) == 2, "--file needs one ID"
