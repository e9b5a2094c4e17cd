#!/bin/bash
# The official postgres image's entrypoint, for what docker-compose.yml uses: an empty PGDATA is initialised with
# POSTGRES_USER / POSTGRES_PASSWORD (scram-sha-256 over TCP), POSTGRES_DB made, /docker-entrypoint-initdb.d run once.
set -euo pipefail
if [ "${1:-}" != "postgres" ]; then
  exec "$@"
fi
user="${POSTGRES_USER:-postgres}"
mkdir -p "$PGDATA" && chown -R postgres:postgres "$PGDATA" && chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  password_file="$(mktemp)"
  printf '%s\n' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}" > "$password_file"
  chown postgres "$password_file"
  runuser -u postgres -- initdb -D "$PGDATA" -U "$user" --pwfile="$password_file" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8
  rm -f "$password_file"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  runuser -u postgres -- pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
  database="${POSTGRES_DB:-$user}"
  if [ "$database" != "postgres" ]; then
    runuser -u postgres -- psql -v ON_ERROR_STOP=1 -U "$user" -d postgres -c "CREATE DATABASE \"$database\""
  fi
  for file in /docker-entrypoint-initdb.d/*; do
    case "$file" in
      *.sql) runuser -u postgres -- psql -v ON_ERROR_STOP=1 -U "$user" -d "$database" -f "$file" ;;
      *.sh) . "$file" ;;
    esac
  done
  runuser -u postgres -- pg_ctl -D "$PGDATA" -m fast -w stop
fi
exec runuser -u postgres -- postgres -D "$PGDATA" -c listen_addresses='*'
