#!/usr/bin/env bash
# Debian packages the tests need: headless Chromium (the lineage report and Airflow UI browser tests), PostgreSQL
# (the shared-catalog test starts a throwaway cluster of its own with initdb/pg_ctl; no service is enabled or used) and
# Redis (`pipeline fleet`'s Celery broker: redis-server started on loopback by the fleet, no system service).
# Idempotent: installs only what is missing, with apt-get when it can (root on Debian/Ubuntu); otherwise says what to do.
# With arguments, only those named (`make airflow` asks for postgresql: its metadata database; `make fleet` for
# postgresql and redis; `make test-docker` for docker: Debian's docker.io, docker-compose and debootstrap).
# Under CI (CI true, as tests/support.py reads it) a package it cannot install is an error: there the tests that need
# it would fail (tests/support.py require_system_tool), so set-up stops first and says why; elsewhere it warns and
# those tests are skipped (listed at the end of the test session).
set -euo pipefail
wanted=" ${*:-chromium postgresql redis} "

missing_packages() {
  missing=()
  if [[ "$wanted" == *" chromium "* ]] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    missing+=(chromium)
  fi
  if [[ "$wanted" == *" postgresql "* ]] && ! command -v initdb >/dev/null 2>&1 && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    missing+=(postgresql)
  fi
  if [[ "$wanted" == *" redis "* ]] && ! command -v redis-server >/dev/null 2>&1; then
    missing+=(redis-server)
  fi
  if [[ "$wanted" == *" docker "* ]]; then  # only when asked: `make test-docker`
    command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
    command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  fi
}

in_ci() {
  local value
  value="$(printf '%s' "${CI:-}" | tr '[:upper:]' '[:lower:]' | tr -d '[:space:]')"
  [[ "$value" == "1" || "$value" == "true" || "$value" == "yes" || "$value" == "on" ]]
}

missing_packages
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  echo "setup: installing Debian's ${missing[*]} for the tests"
  apt-get update -qq
  # policy-rc.d: the package's own cluster and service must not start; the tests run their own on loopback.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  missing_packages
  if [ ${#missing[@]} -gt 0 ] && in_ci; then
    echo "setup: ${missing[*]} still not found after apt-get installed it (CI=${CI}: the tests that need it would fail)" >&2
    exit 1
  fi
elif in_ci; then
  echo "setup: ${missing[*]} not found and cannot be installed here (apt-get as root is needed); CI=${CI}: the tests" \
    "that need them would fail, so set-up stops: install Debian's ${missing[*]} on the CI image" >&2
  exit 1
else
  echo "setup: ${missing[*]} not found and cannot be installed here; the tests that need them will be skipped" \
    "(listed at the end of the test session; under CI=true they fail)" >&2
fi
