#!/usr/bin/env bash
# Debian packages the tests need (headless Chromium for the lineage report test). Idempotent: does nothing when
# chromium is already on PATH; installs with apt-get when it can (root on Debian/Ubuntu); otherwise says what to do.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  echo "setup: installing Debian's chromium for the lineage report test"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
else
  echo "setup: chromium not found and cannot be installed here; the report's browser test will be skipped" >&2
fi
