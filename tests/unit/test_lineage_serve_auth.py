"""``lineage serve`` as an operator exposes it: started for real (the ``lineage`` command, on loopback), reached with
openlineage-python's real ``HttpTransport`` and its ``api_key`` auth, and probed as a hostile web page or process
would: no token, a token of the wrong scope, a forged ``Host`` (DNS rebinding), a cross-site ``text/plain`` post,
the API docs; tokens rotated; the refusal to listen on every interface without tokens."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests
from openlineage.client.transport.http import HttpConfig, HttpTransport

from include.lineage.emit import tokens
from tests.support import free_port, start_lineage_serve

LINEAGE = str(Path(sys.executable).with_name("lineage"))
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"


def event(job: str = "job") -> dict:
    return {
        "eventType": "COMPLETE",
        "eventTime": "2025-02-01T00:00:00+00:00",
        "run": {"runId": str(uuid.uuid4()), "facets": {}},
        "job": {"namespace": "ns", "name": job, "facets": {}},
        "inputs": [],
        "outputs": [{"namespace": "file", "name": f"/out/{job}", "facets": {}}],
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }


def _start(args: list[str], env: dict) -> tuple[subprocess.Popen, str]:
    return start_lineage_serve(args, env)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``lineage serve`` over a fresh ``var/`` whose tokens file set-up made (two writers: a rotation under way)."""
    var = tmp_path_factory.mktemp("var")
    env = {**os.environ, "PIPELINE_VAR_DIR": str(var)}
    env.pop("LINEAGE_SERVE_TOKEN", None)
    file = var / "secrets" / tokens.TOKENS_FILE_NAME
    tokens.ensure_tokens(file)
    tokens.add_token("writer-next", ["write"], file)
    tokens.add_token("both", ["read", "write"], file)
    by_name = {token.name: token.value for token in tokens.load_tokens(file)}
    store = f"sqlite:///{var / 'served.db'}"
    process, url = _start(["--store", store], env)
    yield {"url": url, "tokens": by_name, "file": file, "var": var}
    process.terminate()
    process.wait(timeout=30)


def transport(url: str, auth: dict | None = None) -> HttpTransport:
    config = {"type": "http", "url": url, "endpoint": "api/v1/lineage", "retry": {"total": 0}}
    if auth is not None:
        config["auth"] = auth
    return HttpTransport(HttpConfig.from_dict(config))


def health(url: str) -> int:
    return requests.get(f"{url}/api/v1/health", timeout=5).json()["events"]


def test_set_up_makes_the_tokens_file_private_and_keeps_it(tmp_path):
    from include.setup import bootstrap

    file = tmp_path / "var" / "secrets" / tokens.TOKENS_FILE_NAME
    tokens.ensure_tokens(file)
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert stat.S_IMODE(file.parent.stat().st_mode) == 0o700
    first = file.read_text()
    tokens.ensure_tokens(file)
    assert file.read_text() == first, "an existing tokens file is kept"
    assert {t.name: sorted(t.scopes) for t in tokens.load_tokens(file)} == {"writer": ["write"], "reader": ["read"]}
    assert bootstrap.lineage_tokens  # set-up calls it (include/setup/bootstrap.py)
    os.chmod(file, 0o644)
    with pytest.raises(Exception, match="readable by others"):
        tokens.load_tokens(file)


def test_the_http_transport_with_api_key_auth_posts_and_a_reader_queries(served):
    url, by_name = served["url"], served["tokens"]
    before = health(url)
    transport(url, {"type": "api_key", "apiKey": by_name["writer"]}).emit(event("api_key"))
    assert health(url) == before + 1
    reader = {"Authorization": f"Bearer {by_name['reader']}"}
    answer = requests.get(f"{url}/api/v1/lineage", params={"nodeId": "job:ns:api_key"}, headers=reader, timeout=10)
    assert answer.status_code == 200 and "job:ns:api_key" in {node["id"] for node in answer.json()["graph"]}


@pytest.mark.parametrize(
    "auth, status",
    [
        (None, 401),  # no Authorization header
        ({"type": "api_key", "apiKey": "not-a-token-of-this-server"}, 401),
        ("reader", 403),  # a read token cannot post
    ],
)
def test_a_post_without_a_write_token_is_refused_and_stores_nothing(served, auth, status):
    url = served["url"]
    if auth == "reader":
        auth = {"type": "api_key", "apiKey": served["tokens"]["reader"]}
    before = health(url)
    with pytest.raises(requests.HTTPError) as refused:
        transport(url, auth).emit(event("forged"))
    assert refused.value.response.status_code == status
    assert health(url) == before


@pytest.mark.parametrize(
    "path",
    ["/api/v1/lineage?nodeId=job:ns:x", "/api/v1/runlineage/upstream?runId=x", "/api/v1/column-lineage?nodeId=a.b"],
)
def test_every_query_needs_a_read_token(served, path):
    url, by_name = served["url"], served["tokens"]
    # an event first: an empty store answers 400 ("run lineage ingest first"), whichever tests ran before this one
    transport(url, {"type": "api_key", "apiKey": by_name["writer"]}).emit(event("queried"))
    missing = requests.get(url + path, timeout=5)
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert "lineage-tokens.json" in missing.json()["message"]
    writer = requests.get(url + path, headers={"Authorization": f"Bearer {by_name['writer']}"}, timeout=5)
    assert writer.status_code == 403 and "read" in writer.json()["message"]
    reader = requests.get(url + path, headers={"Authorization": f"Bearer {by_name['reader']}"}, timeout=5)
    assert reader.status_code in (200, 404), reader.text  # past the token check: the answer of the query


def test_several_tokens_are_valid_at_once_so_a_token_can_be_rotated(served):
    url, by_name = served["url"], served["tokens"]
    before = health(url)
    for name in ("writer", "writer-next", "both"):
        transport(url, {"type": "api_key", "apiKey": by_name[name]}).emit(event(f"rotated_{name}"))
    assert health(url) == before + 3


def test_a_forged_host_header_is_refused_and_the_served_names_are_answered(served):
    url, by_name = served["url"], served["tokens"]
    headers = {"Authorization": f"Bearer {by_name['both']}"}
    port = url.rsplit(":", 1)[1]
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", ""):
        answer = requests.get(f"{url}/api/v1/health", headers={"Host": host}, timeout=5)
        assert answer.status_code == 400 and "--allow-host" in answer.json()["message"], host
        posted = requests.post(f"{url}/api/v1/lineage", json=event("rebound"), headers={**headers, "Host": host})
        assert posted.status_code == 400, host
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost", f"[::1]:{port}"):
        assert requests.get(f"{url}/api/v1/health", headers={"Host": host}, timeout=5).status_code == 200, host


def test_a_cross_site_text_plain_post_is_refused_even_with_a_token(served):
    url, by_name = served["url"], served["tokens"]
    before = health(url)
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
        headers = {"Authorization": f"Bearer {by_name['writer']}"}
        if content_type:
            headers["Content-Type"] = content_type
        answer = requests.post(
            f"{url}/api/v1/lineage", data=json.dumps(event("cross_site")), headers=headers, timeout=5
        )
        assert answer.status_code == 415 and "application/json" in answer.json()["message"], content_type
    assert health(url) == before


def test_the_api_docs_are_off(served):
    for path in ("/docs", "/openapi.json", "/redoc"):
        assert requests.get(served["url"] + path, timeout=5).status_code == 404


def test_the_projects_token_provider_finds_the_token_in_the_environment_or_an_airflow_connection(served, monkeypatch):
    url, by_name = served["url"], served["tokens"]
    auth = {"type": "include.lineage.emit.tokens.LineageServeTokenProvider", "conn_id": "lineage_serve"}
    before = health(url)
    monkeypatch.setenv("LINEAGE_SERVE_TOKEN", by_name["writer-next"])
    transport(url, auth).emit(event("from_env"))
    monkeypatch.delenv("LINEAGE_SERVE_TOKEN")
    connection = {"conn_type": "http", "host": "127.0.0.1", "password": by_name["writer"]}
    monkeypatch.setenv("AIRFLOW_CONN_LINEAGE_SERVE", json.dumps(connection))
    transport(url, auth).emit(event("from_connection"))
    assert health(url) == before + 2
    monkeypatch.setenv("AIRFLOW_CONN_LINEAGE_SERVE", json.dumps({**connection, "password": "wrong-token-value"}))
    with pytest.raises(requests.HTTPError):
        transport(url, auth).emit(event("wrong"))


def test_the_token_provider_falls_back_to_this_vars_tokens_file(served, monkeypatch):
    monkeypatch.delenv("LINEAGE_SERVE_TOKEN", raising=False)
    monkeypatch.setenv("PIPELINE_VAR_DIR", str(served["var"]))
    provider = tokens.LineageServeTokenProvider({"type": "x"})
    assert provider.get_bearer() == f"Bearer {served['tokens']['writer']}"
    assert tokens.LineageServeTokenProvider({"scope": "read"}).get_bearer() == f"Bearer {served['tokens']['reader']}"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--host", "0.0.0.0", "--no-auth"], "refusing to listen on 0.0.0.0 without tokens"),
        (["--host", "0.0.0.0", "--tokens", "/nonexistent/tokens.json"], "cannot read the tokens"),
    ],
)
def test_serve_refuses_a_non_loopback_address_without_tokens(tmp_path, args, message):
    env = {**os.environ, "PIPELINE_VAR_DIR": str(tmp_path / "var")}
    done = subprocess.run(
        [LINEAGE, "serve", "--port", str(free_port()), "--store", f"sqlite:///{tmp_path / 's.db'}", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr


def test_token_commands_add_list_and_remove_for_rotation(tmp_path):
    env = {**os.environ, "PIPELINE_VAR_DIR": str(tmp_path / "var")}

    def lineage(*args):
        return subprocess.run([LINEAGE, "token", *args], env=env, capture_output=True, text=True, timeout=120)

    assert lineage("list").stdout.split() == ["writer", "write", "reader", "read"]
    assert lineage("add", "writer-2026", "--scope", "write").returncode == 0
    assert "writer-2026\twrite" in lineage("list").stdout
    assert lineage("remove", "writer").returncode == 0
    assert lineage("remove", "nobody").returncode == 2
    assert lineage("add").returncode == 2
    names = [t.name for t in tokens.load_tokens(tmp_path / "var" / "secrets" / tokens.TOKENS_FILE_NAME)]
    assert names == ["reader", "writer-2026"]


@pytest.mark.parametrize(
    "header, name",
    [
        ("localhost:5000", "localhost"),
        ("LOCALHOST", "localhost"),
        ("127.0.0.1:5000", "127.0.0.1"),
        ("[::1]:5000", "::1"),
        ("[::1]", "::1"),
        ("lineage.example.com:443", "lineage.example.com"),
        ("evil.example:notaport", "evil.example:notaport"),
        ("", ""),
    ],
)
def test_host_header_names(header, name):
    from include.lineage.api.server import host_of

    assert host_of(header) == name


def test_the_served_names_of_each_address():
    import socket

    from include.lineage.api.server import is_loopback, served_names

    assert served_names("127.0.0.1") == {"127.0.0.1", "localhost", "::1"}
    assert socket.gethostname().lower() in served_names("0.0.0.0")
    assert served_names("192.0.2.7", ["lineage.internal"]) >= {"192.0.2.7", "lineage.internal"}
    assert socket.gethostname().lower() not in served_names("192.0.2.7") or socket.gethostname() == "192.0.2.7"
    assert [is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost", "0.0.0.0", "192.0.2.7")] == [
        True,
        True,
        True,
        True,
        False,
        False,
    ]


def test_docs_are_served_only_when_asked(tmp_path):
    from fastapi.testclient import TestClient

    from include.lineage.api.server import create_app
    from include.lineage.store import LineageStore

    with LineageStore(f"sqlite:///{tmp_path / 's.db'}") as store:
        assert TestClient(create_app(store=store)).get("/openapi.json").status_code == 404
        assert TestClient(create_app(store=store, docs=True)).get("/openapi.json").status_code == 200


@pytest.fixture
def base_hook():
    """Airflow's BaseHook, imported before the test runs: Airflow's first import configures logging, which would
    drop the handler ``caplog`` put on the root logger for the test."""
    from airflow.sdk import BaseHook

    return BaseHook


def test_an_airflow_connection_that_cannot_be_read_is_logged_and_the_tokens_file_answers(
    tmp_path, monkeypatch, caplog, base_hook
):
    """The provider then sends the tokens file's token, which `lineage serve` may refuse: without the log line that
    401 would be unexplained. A connection that is not defined, or no Airflow at all, is the expected case: quiet."""
    import types

    file = tmp_path / "secrets" / tokens.TOKENS_FILE_NAME
    tokens.ensure_tokens(file)
    writer = next(t.value for t in tokens.load_tokens(file) if t.name == "writer")
    monkeypatch.delenv("LINEAGE_SERVE_TOKEN", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_LINEAGE_SERVE", raising=False)
    unread = (
        "lineage serve token: Airflow connection lineage_serve could not be read; the next source's token is sent "
        "instead"
    )

    def logged() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == tokens.__name__ and r.levelno >= 30]

    caplog.set_level("WARNING", logger=tokens.__name__)
    assert tokens.client_token(conn_id="lineage_serve", path=file) == writer
    assert logged() == [], "a connection not defined is not news"

    def unreachable(cls, conn_id):
        raise RuntimeError("secrets backend unreachable")

    monkeypatch.setattr(base_hook, "get_connection", classmethod(unreachable))
    assert tokens.client_token(conn_id="lineage_serve", path=file) == writer, "the next source answers, as before"
    assert logged() == [unread]
    assert str(caplog.records[-1].exc_info[1]) == "secrets backend unreachable"

    caplog.clear()
    monkeypatch.setitem(sys.modules, "airflow.sdk", None)  # no Airflow here
    assert tokens.client_token(conn_id="lineage_serve", path=file) == writer
    assert logged() == []
    broken = types.ModuleType("airflow.sdk")

    def refuse(name):
        raise RuntimeError(f"airflow.sdk.{name}: bad airflow.cfg")

    broken.__getattr__ = refuse
    monkeypatch.setitem(sys.modules, "airflow.sdk", broken)  # Airflow there, but it would not import
    assert tokens.client_token(conn_id="lineage_serve", path=file) == writer
    assert logged() == [unread]
