"""``make bench`` (``python -m bench``): every section side by side in one run, written to ``var/bench/``.

The bench lives outside the shipped library (nothing under ``include/`` imports it, and the code zip shipped to Spark
executors leaves it out). Its sizes are settings (``BENCH_*``, see docs/configuration.md), not arguments.
"""

from __future__ import annotations

import argparse
import sys

from bench import ingest_throughput, pipeline, store_scale, wap
from include.core import settings
from include.core.errors import EXIT_STATUS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__, epilog=EXIT_STATUS)
    parser.parse_args(argv)  # no arguments: an unknown one is an error (exit 2), never dropped
    project = settings.Paths.current()
    # wap: ingest.wap_overhead_ratio; ingest_throughput: lineage_serve.(single|batch)_post_events_per_second;
    # store_scale: store_scale.<database>_<events> (10^5 events here; larger: make bench-scale-store); into results.json
    return pipeline.main() or wap.main(project) or ingest_throughput.main(project) or store_scale.main([], project)


if __name__ == "__main__":
    sys.exit(main())
