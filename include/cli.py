"""``pipeline``: the project's command line, installed into the venv.

    pipeline airflow <args>   run an Airflow command with the project's AIRFLOW_HOME and connections
    pipeline test [args]      pytest
    pipeline demo             the whole chain on sample data, then the forecast query
"""

from __future__ import annotations

import argparse
import os
import sys

from include import config


def run_airflow(args: list[str]) -> int:
    env = {**os.environ, **config.airflow_env()}
    if args[:1] == ["standalone"]:
        password_file = config.Paths.current().airflow_home / "simple_auth_manager_passwords.json.generated"
        print(
            "Airflow UI: http://localhost:8080  (user: admin; password: printed below by Airflow and kept in "
            f"{password_file})",
            flush=True,
        )
    os.execvpe("airflow", ["airflow", *args], env)
    return 0  # not reached


def run_tests(args: list[str]) -> int:
    os.execvp(sys.executable, [sys.executable, "-m", "pytest", *args])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pipeline", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("command", choices=["airflow", "test", "demo", "bench"])
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    if options.command == "airflow":
        return run_airflow(options.args)
    if options.command == "test":
        return run_tests(options.args)
    if options.command == "demo":
        from include.demo import main as demo_main

        return demo_main(options.args)
    from include.bench import main as bench_main

    return bench_main(options.args)


if __name__ == "__main__":
    sys.exit(main())
