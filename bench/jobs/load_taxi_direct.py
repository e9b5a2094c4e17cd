"""load_taxi without write-audit-publish (rows straight into main): the bench's baseline for its cost."""

from __future__ import annotations

import sys

from spark_jobs import load_taxi
from spark_jobs.common.runner import run

if __name__ == "__main__":
    run(lambda argv: load_taxi.main(argv, write_audit_publish=False), sys.argv[1:])
