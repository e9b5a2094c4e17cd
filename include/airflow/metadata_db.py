"""Settings of Airflow's metadata database that airflow.cfg (or the environment) can only name by import path.

SQLite (``var/airflow/airflow.db``) is the metadata database of ``airflow dags test`` and the demo, where one process
writes. Every Airflow component and task runner writes to it, and SQLite's default five-second lock wait makes two
writers that meet fail with ``database is locked``: set-up puts the file in WAL mode (readers never block the writer)
and these arguments make a writer wait for the lock instead of failing. ``make airflow`` (the scheduler, api-server,
triggerer and dag-processor writing at once) runs on PostgreSQL instead (``include/services/postgres.py``,
``AIRFLOW_METADATA_DB``): ``settings.airflow_env`` then names the PostgreSQL arguments below.
"""

SQLITE_LOCK_WAIT_SECONDS = 60

SQLITE_CONNECT_ARGS = {"timeout": SQLITE_LOCK_WAIT_SECONDS}
SQLITE_CONNECT_ARGS_ASYNC = {"timeout": SQLITE_LOCK_WAIT_SECONDS}

POSTGRES_CONNECT_TIMEOUT_SECONDS = 10

# psycopg2 (libpq's keyword) and asyncpg (its connect() argument) name the connection timeout differently.
POSTGRES_CONNECT_ARGS = {"connect_timeout": POSTGRES_CONNECT_TIMEOUT_SECONDS}
POSTGRES_CONNECT_ARGS_ASYNC = {"timeout": POSTGRES_CONNECT_TIMEOUT_SECONDS}
