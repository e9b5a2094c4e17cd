"""docker-compose's ``iceberg-catalog`` service: the project's Iceberg REST catalog server in the foreground.

The same launcher and jars as the local server (``include/services/catalog_server.py``), bound to every interface of the
container's network instead of 127.0.0.1, over the JDBC backend ``ICEBERG_REST_BACKEND_URI`` (Postgres in compose).
"""

from __future__ import annotations

import argparse
import os

from include.core import settings
from include.services import catalog_server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="0.0.0.0", help="address to bind (default: every interface of the container)")
    args = parser.parse_args(argv)
    paths = settings.Paths.current().ensure()
    catalog = settings.CatalogSettings.current(paths)
    if not catalog.is_local_rest_server:
        raise SystemExit("iceberg-catalog: ICEBERG_CATALOG_URI must be unset here (this service is the catalog)")
    if not catalog.rest_backend_uri:
        raise SystemExit("iceberg-catalog: set ICEBERG_REST_BACKEND_URI (e.g. jdbc:postgresql://postgres:5432/iceberg)")
    command = catalog_server.foreground_command(paths, catalog, host=args.host)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
