"""Settings of Airflow's metadata database that airflow.cfg can only name by import path.

The default metadata DB is SQLite (``var/airflow/airflow.db``): every Airflow component and task runner writes to it,
and SQLite's default five-second lock wait makes two writers that meet (two Trigger clicks, the scheduler and the
api-server) fail with ``database is locked``. Set-up puts the file in WAL mode (readers never block the writer) and
these arguments make a writer wait for the lock instead of failing. PostgreSQL (``[database] sql_alchemy_conn``, as in
docker-compose.yml) has neither limit.
"""

SQLITE_LOCK_WAIT_SECONDS = 60

SQLITE_CONNECT_ARGS = {"timeout": SQLITE_LOCK_WAIT_SECONDS}
SQLITE_CONNECT_ARGS_ASYNC = {"timeout": SQLITE_LOCK_WAIT_SECONDS}
