"""``lineage``: the lineage command, installed into the project's venv.

    lineage replay     send spooled events (oldest first) through the configured transport; report sent/remaining
    lineage report     write the HTML lineage report to var/lineage/index.html
    lineage validate   validate var/lineage's events against the OpenLineage JSON schemas
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import sys

from include import config


def configured_transport() -> dict:
    """The ``[openlineage] transport`` Airflow uses: the environment override, else the generated airflow.cfg."""
    if os.environ.get("AIRFLOW__OPENLINEAGE__TRANSPORT"):
        return json.loads(os.environ["AIRFLOW__OPENLINEAGE__TRANSPORT"])
    cfg_path = config.Paths.current().airflow_home / "airflow.cfg"
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(cfg_path)
    return json.loads(parser.get("openlineage", "transport"))


def replay() -> int:
    from openlineage.client.transport import get_default_factory

    from include.lineage.spool import SpoolingTransport

    transport = get_default_factory().create(configured_transport())
    if not isinstance(transport, SpoolingTransport):
        print("lineage replay: the configured transport is not include.lineage.spool.SpoolingTransport; nothing to replay")
        return 0
    total = 0
    while True:
        sent, remaining = transport.replay()
        total += sent
        if sent == 0 or remaining == 0:
            break
    print(f"lineage replay: sent {total}, remaining {remaining}")
    return 0 if remaining == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lineage", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("command", choices=["replay", "report", "validate"])
    options = parser.parse_args(argv)
    if options.command == "replay":
        return replay()
    if options.command == "report":
        from include.lineage.report import write_report

        print(write_report())
        return 0
    from include.lineage.graph import load_events
    from include.lineage.validation import EventValidator

    paths = config.Paths.current()
    result = EventValidator().validate(load_events(paths.lineage_events, paths.spark_lineage_events))
    for error in result.errors:
        print(error)
    print(f"lineage validate: {sum(result.facets_checked.values())} facets checked, {len(result.errors)} errors")
    return 1 if result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
