"""One reading of "yes" in text (include/core/settings.truthy): environment flags, the DAG params rendered into a
job's arguments (`--reprocess={{ params.reprocess }}`) and the download operator's templated `force`."""

from __future__ import annotations

import pytest

from include.core import settings
from spark_jobs.common.runner import month_job_args


@pytest.mark.parametrize(
    "text, expected",
    [
        ("True", True),  # how Jinja renders a boolean param
        ("False", False),
        ("true", True),
        (" yes ", True),
        ("1", True),
        ("on", True),
        ("0", False),
        ("no", False),
        ("", False),
        (None, False),
        (True, True),
        (False, False),
        ("truthy", False),
    ],
)
def test_truthy(text, expected):
    assert settings.truthy(text) is expected


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--month", "2025-01"], False),
        (["--month", "2025-01", "--reprocess=True"], True),
        (["--month", "2025-01", "--reprocess=False"], False),
    ],
)
def test_the_reprocess_job_argument_reads_the_rendered_param(argv, expected):
    assert month_job_args(None, argv).reprocess is expected


@pytest.mark.parametrize("force, expected", [("True", True), ("False", False), (True, True), ("", False)])
def test_the_download_operator_reads_its_templated_force(force, expected, monkeypatch):
    monkeypatch.syspath_prepend(str(settings.PLUGINS_DIR))  # as Airflow has [core] plugins_folder
    from lakehouse_operators import LandSourceOperator

    operator = LandSourceOperator(task_id="land", source="tlc", month="2025-01", force=force)
    assert operator._force() is expected


def test_an_environment_flag_reads_the_same_way(monkeypatch):
    setting = next(s for s in settings.SETTINGS.values() if s.flag.__func__ is settings.Setting.flag)
    monkeypatch.setenv(setting.name, " On ")
    assert setting.flag() is True
    monkeypatch.setenv(setting.name, "off")
    assert setting.flag() is False
