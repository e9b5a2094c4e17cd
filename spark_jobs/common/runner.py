"""Entry-point wrapper of every job: bad input fails fast with a clear message the operator can act on."""

from __future__ import annotations

import sys
import traceback

from include.core.contract import REPORT_ARGUMENT, JobReport, report_argument
from include.core.errors import BadInputError
from include.core.settings import truthy
from spark_jobs.common.report import write_report

BAD_INPUT_EXIT_CODE = 3
BLOCKED_EXIT_CODE = 4


class PublishBlockedError(Exception):
    """A blocking expectation failed on the audit branch: main was not moved. The job wrote its full report (the
    audit, the branch snapshot) before raising, so the runner leaves the report as it is."""


def run(main, argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    try:
        main(argv)
    except PublishBlockedError as error:
        print(f"PUBLISH BLOCKED: {error}", file=sys.stderr)
        sys.exit(BLOCKED_EXIT_CODE)
    except BadInputError as error:
        write_report(report_argument(argv), JobReport(error={"kind": "bad_input", "message": str(error)}))
        print(f"BAD INPUT: {error}", file=sys.stderr)
        sys.exit(BAD_INPUT_EXIT_CODE)
    except Exception as error:
        write_report(
            report_argument(argv),
            JobReport(
                error={
                    "kind": "failure",
                    "message": f"{type(error).__name__}: {error}",
                    "traceback": traceback.format_exc(limit=5),
                }
            ),
        )
        raise


def month_job_args(description: str | None, argv: list[str] | None):
    """Arguments of the ingest jobs: ``--month YYYY-MM`` and the optional ``--report`` path."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--month", required=True, help="YYYY-MM")
    parser.add_argument(
        "--reprocess",
        default=False,
        type=truthy,
        help="true: load the month even when its tables already hold it from this very file (loaded_source)",
    )
    parser.add_argument(REPORT_ARGUMENT)
    return parser.parse_args(argv)
