"""A project PostgreSQL cluster whose folder lies deeper than a Unix socket's path may reach (108 bytes on Linux):
CI checks the repository out under a long prefix, and the fleet's control machine nests its cluster four folders
further down; the server then refused to start ("Unix-domain socket path ... is too long"). Started for real."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from include.services import postgres
from tests.support import free_port, postgresql

pytestmark = [pytest.mark.integration]


def test_a_cluster_in_a_folder_too_deep_for_a_socket_starts_and_answers_over_its_socket_and_tcp(paths):
    postgresql()
    deep = paths.var / "a-checkout-as-deep-as-a-ci-runner-puts-it" / ("nested-" * 6) / "control" / "postgres"
    assert len(os.fsencode(deep / "sockets" / f".s.PGSQL.{65535}")) > postgres.SOCKET_PATH_LIMIT
    cluster = postgres.Cluster(deep, free_port())
    assert len(os.fsencode(cluster.sockets / f".s.PGSQL.{cluster.port}.lock")) <= postgres.SOCKET_PATH_LIMIT
    cluster.init().start(durable=False)
    try:
        assert cluster.sql("select 1") == [(1,)]  # the superuser's way in: the socket
        assert oct(cluster.sockets.stat().st_mode & 0o777) == "0o700"
        cluster.ensure_role("probe", "probe-password")
        import psycopg2

        with (
            psycopg2.connect(
                host="127.0.0.1", port=cluster.port, user="probe", password="probe-password", dbname="postgres"
            ) as connection,
            connection.cursor() as cursor,
        ):
            cursor.execute("select current_user")
            assert cursor.fetchone() == ("probe",)
        # the same folder is the same cluster: a second object finds the socket the first one started
        assert postgres.Cluster(deep, cluster.port).sql("select 2") == [(2,)]
    finally:
        cluster.stop()


def test_a_cluster_in_a_short_folder_keeps_its_socket_beside_its_data():
    assert postgres.Cluster(Path("/srv/var/postgres"), 5432).sockets == Path("/srv/var/postgres/sockets")
    long_one = Path("/check/work/main/var/test-runs/20261128T001204-28567/fleet-test/fleet/control/postgres")
    assert postgres.Cluster(long_one, 5432).sockets.parent == Path(tempfile.gettempdir())  # CI's failing path
