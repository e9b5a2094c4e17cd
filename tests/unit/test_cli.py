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


def test_sample_source_started_as_a_scripts_background_command_stops_on_ctrl_c(tmp_path):
    """`pipeline sample-source` serves until Ctrl-C. Started the way a script starts a background command (SIGINT
    ignored, which exec keeps: Trap 43), it never saw the signal and kept serving; `pipeline ui` had the same fault."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import requests

    from tests.support import free_port

    port = free_port()
    ignoring = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"
    )
    command = [sys.executable, "-c", ignoring, str(Path(sys.executable).parent / "pipeline"), "sample-source"]
    process = subprocess.Popen(
        [*command, "--port", str(port), "--rows", "200"],
        env={**os.environ, "PIPELINE_VAR_DIR": str(tmp_path / "var")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if requests.get(f"http://127.0.0.1:{port}/", timeout=1).status_code < 500:
                    break
            except requests.ConnectionError:
                time.sleep(0.2)
        assert process.poll() is None, process.communicate()[0]
        process.send_signal(signal.SIGINT)
        assert process.wait(15) == 0, "Ctrl-C ends it, and that is a success"
        output = process.stdout.read()
        assert "serving sample sources" in output
    finally:
        process.kill()
        process.wait()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/", timeout=1)
