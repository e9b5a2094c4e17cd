"""A test that needs a system package (Debian's Chromium, PostgreSQL) where it is not installed ends through one
helper, tests/support.py ``require_system_tool``: under CI (``CI`` true) it fails with the reason, elsewhere it is
skipped and the session's terminal summary lists it (tests/conftest.py). It never returns early as "passed"."""

from __future__ import annotations

import pytest

from include.services import postgres
from tests import support

pytest_plugins = ["pytester"]


@pytest.mark.parametrize("value", ["true", "1", "TRUE", " yes "])
def test_under_ci_a_missing_system_package_fails_the_test_with_its_reason(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception) as failed:
        support.require_system_tool("chromium", "the page is drawn in a real browser")
    assert "chromium is not installed: the page is drawn in a real browser" in str(failed.value)
    assert f"CI={value}" in str(failed.value)


@pytest.mark.parametrize("value", [None, "", "false", "0"])
def test_outside_ci_a_missing_system_package_skips_the_test_saying_so(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception) as skipped:
        support.require_system_tool("postgresql", "a cluster of its own")
    assert (
        str(skipped.value) == "skipped for a missing system package: postgresql is not installed: a cluster of its own"
    )


def test_chromium_gives_its_path_or_ends_the_test(monkeypatch):
    monkeypatch.setattr(support, "CHROMIUM", "/usr/bin/chromium")
    monkeypatch.setenv("CI", "true")
    assert support.chromium() == "/usr/bin/chromium"
    monkeypatch.setattr(support, "CHROMIUM", None)
    with pytest.raises(pytest.fail.Exception, match="chromium is not installed: a page test"):
        support.chromium("a page test")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed: a page test"):
        support.chromium("a page test")


def test_postgresql_returns_when_installed_and_ends_the_test_when_not(monkeypatch):
    monkeypatch.setattr(postgres, "available", lambda: True)
    monkeypatch.setenv("CI", "true")
    assert support.postgresql() is None
    monkeypatch.setattr(postgres, "available", lambda: False)
    with pytest.raises(pytest.fail.Exception, match="postgresql is not installed: a store on PostgreSQL"):
        support.postgresql("a store on PostgreSQL")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="postgresql is not installed: a store on PostgreSQL"):
        support.postgresql("a store on PostgreSQL")


_SESSION = {
    # the project's summary hook, in a session of its own
    "conftest.py": "from tests.conftest import pytest_terminal_summary  # noqa: F401\n",
    "test_needs_a_browser.py": (
        "from tests.support import require_system_tool\n\n\n"
        "def test_draws_the_page():\n"
        "    require_system_tool('chromium', 'the page is drawn in a real browser')\n\n\n"
        "def test_without_a_package():\n"
        "    assert True\n"
    ),
}


def test_a_session_outside_ci_skips_and_lists_the_test_at_its_end(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(**{name.removesuffix(".py"): text for name, text in _SESSION.items()})
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*skipped for a missing system package*",
            "skipped for a missing system package: test_needs_a_browser.py::test_draws_the_page: "
            "chromium is not installed: the page is drawn in a real browser",
        ]
    )


def test_a_session_under_ci_fails_the_test_with_the_reason(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    pytester.makepyfile(**{name.removesuffix(".py"): text for name, text in _SESSION.items()})
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*CI=true: chromium is not installed: the page is drawn in a real browser*"])
    assert "skipped for a missing system package: test_needs" not in result.stdout.str()
