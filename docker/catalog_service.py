"""docker-compose's ``iceberg-catalog`` service: the project's Iceberg REST catalog server in the foreground.

The same launcher and jars as the local server (``include/catalog_server.py``), bound to every interface of the
container's network instead of 127.0.0.1, over the JDBC backend ``ICEBERG_REST_BACKEND_URI`` (Postgres in compose).
"""

from __future__ import annotations

import os

from include import catalog_server, config


def main() -> None:
    paths = config.Paths.current().ensure()
    catalog = config.CatalogSettings.current(paths)
    if not catalog.is_local_rest_server:
        raise SystemExit("iceberg-catalog: ICEBERG_CATALOG_URI must be unset here (this service is the catalog)")
    if not catalog.rest_backend_uri:
        raise SystemExit("iceberg-catalog: set ICEBERG_REST_BACKEND_URI (e.g. jdbc:postgresql://postgres:5432/iceberg)")
    command = catalog_server.foreground_command(paths, catalog, host="0.0.0.0")
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
