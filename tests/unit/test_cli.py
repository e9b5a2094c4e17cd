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


def test_every_lineage_command_registers_its_own_arguments_and_has_a_handler():
    """`lineage`'s parser is built one command at a time (include/lineage/cli/parser.py); each command it lists runs
    a handler, and its options are its own (`--limit` of `runs` is not `rejected`'s)."""
    from include.lineage import cli as lineage_cli
    from include.lineage.cli import parser

    names = [register.__name__ for register in parser.COMMANDS]
    assert len(names) == len(set(names)) >= 17
    for name in names:
        assert callable(lineage_cli.handler(name)), name
    built = lineage_cli.build_parser()
    assert built.parse_args(["runs", "job"]).limit == 20
    assert built.parse_args(["rejected"]).limit is None
    assert built.parse_args(["upstream", "node", "--store", "sqlite://"]).store == "sqlite://"
    with pytest.raises(SystemExit):
        built.parse_args(["downstream", "node", "--run", "r"])  # --run is upstream's and impact's
