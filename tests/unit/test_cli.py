"""The `pipeline` command: sub-commands with their own help, and other programs' options passed on untouched."""

from __future__ import annotations

import pytest

from include import cli


def test_options_of_pytest_and_airflow_are_passed_on_untouched(monkeypatch):
    calls = []
    monkeypatch.setattr(cli.os, "execvp", lambda program, args: calls.append(args))
    monkeypatch.setattr(cli.os, "execvpe", lambda program, args, env: calls.append(args))
    monkeypatch.setattr(cli, "_ensure_catalog", lambda: None)
    cli.main(["test", "-q", "--durations=5", "-k", "naming"])
    cli.main(["airflow", "dags", "test", "ingest_weather_data", "2025-02-01", "-c", '{"force": true}'])
    assert calls[0][-4:] == ["-q", "--durations=5", "-k", "naming"]
    assert calls[1] == ["airflow", "dags", "test", "ingest_weather_data", "2025-02-01", "-c", '{"force": true}']


def test_own_sub_commands_validate_their_arguments(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["catalog", "restart"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'restart'" in capsys.readouterr().err


def test_sample_months_are_a_month_or_a_span_and_anything_else_is_refused(capsys):
    assert cli.month_span("2025-01") == [(2025, 1)]
    assert cli.month_span("2024-11..2025-02") == [(2024, 11), (2024, 12), (2025, 1), (2025, 2)]
    assert len(cli.month_span("2024-01..2024-12")) == 12
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["sample-source", "--months", "2024-13"])
    assert exit_info.value.code == 2
    assert "expected YYYY-MM or YYYY-MM..YYYY-MM" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["ui", "--sample-data", "--sample-months", "2025-03..2025-01"])
    assert "the last month is before the first" in capsys.readouterr().err
