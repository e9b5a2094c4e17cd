"""Reads never fail because of what was posted: random malformed events (a well-formed event with random parts
replaced by random JSON, the standard facets' included) are posted to ``lineage serve``'s app beside good events of
the same job, dated before and after them; every post is answered 201 or 4xx, and then every node of the store
answers its lineage, column and run queries with 200."""

from __future__ import annotations

import copy
import uuid

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import select

from include.lineage.api.server import create_app
from include.lineage.store import LineageStore
from include.lineage.store.schema import nodes_table

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"


def _base(name: str) -> dict:
    return {"_producer": PRODUCER, "_schemaURL": f"https://openlineage.io/spec/facets/1-0-0/{name}.json"}


def good_event(time: str, run_id: str | None = None, tag: str = "t") -> dict:
    column = {"namespace": "file", "name": f"/in-{tag}", "field": "a", "transformations": [{"type": "DIRECT"}]}
    return {
        "eventType": "COMPLETE",
        "eventTime": time,
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {
            "runId": run_id or str(uuid.uuid4()),
            "facets": {
                "nominalTime": {**_base("NominalTimeRunFacet"), "nominalStartTime": "2025-02-01T00:00:00Z"},
                "parent": {
                    **_base("ParentRunFacet"),
                    "run": {"runId": str(uuid.uuid4())},
                    "job": {"namespace": "ns", "name": "dag"},
                },
                "errorMessage": {**_base("ErrorMessageRunFacet"), "message": "m", "programmingLanguage": "python"},
            },
        },
        "job": {
            "namespace": "ns",
            "name": f"job-{tag}",
            "facets": {
                "documentation": {**_base("DocumentationJobFacet"), "description": "d"},
                "sourceCode": {**_base("SourceCodeJobFacet"), "language": "python", "sourceCode": "x = 1"},
                "sql": {**_base("SQLJobFacet"), "query": "select 1"},
            },
        },
        "inputs": [
            {
                "namespace": "file",
                "name": f"/in-{tag}",
                "facets": {
                    "schema": {**_base("SchemaDatasetFacet"), "fields": [{"name": "a", "type": "INT"}]},
                    "version": {**_base("DatasetVersionDatasetFacet"), "datasetVersion": "1"},
                },
                "inputFacets": {},
            }
        ],
        "outputs": [
            {
                "namespace": "file",
                "name": f"/out-{tag}",
                "facets": {
                    "schema": {**_base("SchemaDatasetFacet"), "fields": [{"name": "b", "type": "INT"}]},
                    "columnLineage": {**_base("ColumnLineageDatasetFacet"), "fields": {"b": {"inputFields": [column]}}},
                    "symlinks": {
                        **_base("SymlinksDatasetFacet"),
                        "identifiers": [{"namespace": "w", "name": "t.out", "type": "TABLE"}],
                    },
                    "lifecycleStateChange": {
                        **_base("LifecycleStateChangeDatasetFacet"),
                        "lifecycleStateChange": "CREATE",
                    },
                    "ownership": {**_base("OwnershipDatasetFacet"), "owners": [{"name": "me"}]},
                },
                "outputFacets": {},
            }
        ],
    }


def paths_of(value, prefix=()):
    """Every path into a JSON value (the value itself included)."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths_of(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths_of(item, (*prefix, index))


def replaced(value, path, new):
    if not path:
        return new
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return value


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.text(max_size=6).map(lambda text: [text]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
TIMES = st.sampled_from(["2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z", "2099-01-01T00:00:00Z"])


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """One store for every example: what earlier examples stored stays, as in a long-lived server."""
    store = LineageStore(f"sqlite:///{tmp_path_factory.mktemp('reads') / 'store.db'}")
    with TestClient(create_app(store=store), raise_server_exceptions=False) as test_client:
        test_client.store = store
        yield test_client
    store.close()


@hypothesis_settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data(), good_time=TIMES, bad_time=TIMES)
def test_random_malformed_events_never_break_a_read(client, data, good_time, bad_time):
    tag = uuid.uuid4().hex[:8]
    run_id = str(uuid.uuid4())
    assert client.post("/api/v1/lineage", json=good_event(good_time, run_id, tag)).status_code == 201
    bad = good_event(bad_time, data.draw(st.sampled_from([run_id, str(uuid.uuid4())])), tag)
    for _ in range(data.draw(st.integers(1, 3))):
        every = list(paths_of(bad))
        in_facets = [path for path in every if any(str(key).endswith("acets") for key in path[:-1])]
        # mostly inside facets; an earlier replacement may have left no facets, or no path at all (a scalar event)
        choices = [st.sampled_from(paths) for paths in (in_facets, every) if paths]
        if not choices:
            break
        path = data.draw(st.one_of(choices))
        bad = replaced(copy.deepcopy(bad), path, data.draw(JSON))
    posted = client.post("/api/v1/lineage", json=bad)
    assert posted.status_code == 201 or 400 <= posted.status_code < 500, posted.text
    with client.store.engine.connect() as conn:
        nodes = list(conn.execute(select(nodes_table.c.key).where(nodes_table.c.key.contains(tag))).scalars())
    bad_run = bad.get("run") if isinstance(bad, dict) else None
    bad_run_id = bad_run.get("runId") if isinstance(bad_run, dict) else None
    runs = {run_id} | ({bad_run_id} if isinstance(bad_run_id, str) and bad_run_id else set())
    assert nodes, "the good event's nodes are stored"
    for key in nodes:
        answer = client.get("/api/v1/lineage", params={"nodeId": key, "depth": 5})
        assert answer.status_code == 200, (key, answer.text, bad)
        if key.startswith("dataset:"):
            field = key.replace("dataset:", "datasetField:", 1) + ":b"
            columns = client.get("/api/v1/column-lineage", params={"nodeId": field})
            assert columns.status_code < 500, (key, columns.text, bad)
    for run in runs:
        if isinstance(run, str) and run:
            answer = client.get("/api/v1/runlineage/upstream", params={"runId": run})
            assert answer.status_code in (200, 404), (run, answer.text, bad)
