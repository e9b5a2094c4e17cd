"""The suite's own scheduling (tests/conftest.py): the shared pipeline run's tests come first and together, so that
under xdist they are the first group of their worker, on a var/ no other group wrote to; longer groups before shorter
ones; and inside a group the collection's order is kept."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests import conftest


@dataclass
class FakeItem:
    nodeid: str
    fixturenames: tuple[str, ...] = ()
    marks: list = field(default_factory=list)

    def add_marker(self, mark) -> None:
        self.marks.append(mark)

    def get_closest_marker(self, name: str):
        return next((mark for mark in reversed(self.marks) if mark.name == name), None)


def _collected() -> list[FakeItem]:
    return [
        FakeItem("tests/unit/test_a.py::test_one"),
        FakeItem("tests/integration/test_kafka.py::test_x"),
        FakeItem("tests/integration/test_lineage.py::test_graph", ("paths", "pipeline_run")),
        FakeItem("tests/integration/test_unknown.py::test_y"),
        FakeItem("tests/integration/test_bad_input.py::test_bad"),
        FakeItem("tests/integration/test_lineage.py::test_listener", ("pipeline_run",)),
        FakeItem("tests/integration/test_kafka.py::test_z"),
        FakeItem("tests/integration/test_airflow_ui.py::test_ui", ("user_runs",)),
        FakeItem("tests/unit/test_b.py::test_two"),
        FakeItem("tests/integration/test_pipeline.py::test_raw", ("pipeline_run",)),
    ]


def _group(item: FakeItem) -> str:
    (mark,) = [m for m in item.marks if m.name == "xdist_group"]
    return mark.args[0]


def test_the_shared_run_comes_first_and_whole_then_the_longest_groups():
    items = _collected()
    conftest.pytest_collection_modifyitems(None, items)
    groups = [_group(item) for item in items]
    assert groups[:3] == ["pipeline_run"] * 3
    assert [item.nodeid for item in items[:3]] == [
        "tests/integration/test_lineage.py::test_graph",
        "tests/integration/test_lineage.py::test_listener",
        "tests/integration/test_pipeline.py::test_raw",
    ], "the collection's order inside the group"
    order = list(dict.fromkeys(groups))
    assert groups == sorted(groups, key=order.index), "every group is contiguous"
    costs = [conftest._group_cost(group) for group in order]
    assert costs == sorted(costs, reverse=True), order
    assert order[-2:] == ["tests/unit/test_a.py", "tests/unit/test_b.py"], "unit modules last, in collection order"
    assert conftest._group_cost("tests/integration/test_unknown.py") == conftest.DEFAULT_INTEGRATION_COST


@pytest.mark.parametrize("shared", ["pipeline_run", "user_runs", "demo_run"])
def test_a_test_of_shared_session_work_is_in_that_work_s_group(shared):
    item = FakeItem("tests/integration/test_any.py::test_it", ("paths", shared))
    conftest.pytest_collection_modifyitems(None, [item])
    assert _group(item) == shared


def test_a_shared_group_s_tests_get_a_timeout_for_the_whole_set_up_unless_they_set_their_own():
    """Whichever test of a shared group runs first pays for the group's DAG runs inside its own timeout."""
    plain = FakeItem("tests/integration/test_any.py::test_it", ("pipeline_run",))
    own = FakeItem("tests/integration/test_own.py::test_it", ("user_runs",), [pytest.mark.timeout(120).mark])
    alone = FakeItem("tests/integration/test_alone.py::test_it", ("paths",))
    conftest.pytest_collection_modifyitems(None, [plain, own, alone])
    assert plain.get_closest_marker("timeout").args == (conftest.SHARED_WORK_TIMEOUT_SECONDS,)
    assert own.get_closest_marker("timeout").args == (120,)
    assert alone.get_closest_marker("timeout") is None


@pytest.mark.parametrize(
    "uses, next_uses, stopped",
    [
        (True, False, True),  # the group's last test, another group's next: stop now
        (True, None, True),  # the worker's last test
        (True, True, False),  # more of the group to come
        (False, False, False),  # not the group's
        (False, True, False),  # the group has not started yet
    ],
)
def test_the_ui_runs_airflow_stops_once_the_last_test_of_its_group_has_run(monkeypatch, uses, next_uses, stopped):
    """An idle Airflow parses DAG files and loops its scheduler: left up, it took CPU from every later test of its
    worker (tests/integration/conftest.py closes `user_runs`' servers early)."""
    import contextlib

    from tests.integration import conftest as integration

    closed: list[str] = []
    servers = contextlib.ExitStack()
    servers.callback(closed.append, "airflow stopped")
    monkeypatch.setattr(integration, "_user_runs_servers", servers)
    item = FakeItem("tests/integration/test_ui.py::test_it", ("paths", "user_runs") if uses else ("paths",))
    nextitem = None if next_uses is None else FakeItem("tests/x.py::test_next", ("user_runs",) if next_uses else ())
    integration.pytest_runtest_teardown(item, nextitem)
    assert closed == (["airflow stopped"] if stopped else [])
