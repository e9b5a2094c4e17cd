#!/usr/bin/env bash
# Issue 13 spike, one command: the project's stack on Spark 4 in a venv of its own (never the project's .venv).
#
#   spikes/spark4/run_spike.sh            # everything (about 10 minutes with pip's cache warm)
#   SKIP_TRAP1=1 SKIP_ANSI=1 spikes/spark4/run_spike.sh   # venv, jars and the Iceberg/OpenLineage job only
#
# Sections (each prints ok/FAIL with the exact error):
#   maven  newest Spark 4 lines of iceberg-spark-runtime and openlineage-spark on Maven Central (what to retry with)
#   trap1  DESIGN.md trap 1: pyspark and pyspark-client installed together, in several orders, in small venvs
#   venv   the spike venv from requirements.txt + constraints.txt (rebuilt when either changes)
#   jars   jars.lock fetched from Maven Central into the state folder, SHA-256 verified
#   job    spike.py: REST catalog server, spark-submit through the provider's SparkSubmitHook (CREATE, MERGE, read),
#          pyiceberg reads the table, the OpenLineage listener names it
#   ansi   the project's transform unit tests under Spark 4, and ansi_probe.py (bad values, ANSI on vs off)
# The verdict is PASS when trap1's same-version installs, venv, jars and job all pass; ansi is a survey.
# State (venvs, jars, logs) goes to $SPIKE_STATE (default <project>/var/spike-spark4), which is git-ignored.
set -uo pipefail

SPIKE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROJECT_ROOT="$(cd "$SPIKE_DIR/../.." && pwd)"
STATE="${SPIKE_STATE:-$PROJECT_ROOT/var/spike-spark4}"
PYTHON="${SPIKE_PYTHON:-python3.11}"
MAVEN="https://repo1.maven.org/maven2"
VENV="$STATE/venv"
JARS_DIR="$STATE/jars"
REQUIREMENTS="$SPIKE_DIR/requirements.txt"
CONSTRAINTS="$SPIKE_DIR/constraints.txt"
PYSPARK_VERSION="$(sed -n 's/^pyspark==//p' "$REQUIREMENTS")"
mkdir -p "$STATE"

declare -A VERDICT=()
say() { printf '%s\n' "$*"; }
section() { printf '\n== %s\n' "$*"; }
record() { VERDICT[$1]="$2"; say "$2  $1${3:+: $3}"; }

# ---------------------------------------------------------------------------------------------------------- maven
maven_versions() {  # group/artifact path -> its three newest releases (empty when the artifact does not exist)
  curl -sf --max-time 30 "$MAVEN/$1/maven-metadata.xml" | sed -n 's:.*<version>\(.*\)</version>.*:\1:p' \
    | grep -v -i -E 'preview|rc|alpha|beta|snapshot' | sort -V | tail -3 | tr '\n' ' '
}
section "maven: Spark 4 lines on Maven Central (checked $(date -u +%F))"
for line in 4.0 4.1 4.2 4.3; do
  say "  iceberg-spark-runtime-${line}_2.13: $(maven_versions "org/apache/iceberg/iceberg-spark-runtime-${line}_2.13" || true)"
done
say "  openlineage-spark_2.13: $(maven_versions io/openlineage/openlineage-spark_2.13 || true)"
say "  spark-core_2.13: $(maven_versions org/apache/spark/spark-core_2.13 || true)"

# ---------------------------------------------------------------------------------------------------------- trap1
probe_venv() {  # venv -> one line: pip check, plain python, spark-submit
  local venv="$1" job="$SPIKE_DIR/trap1_job.py" installed check python submit
  installed="$("$venv/bin/pip" list 2>/dev/null | awk 'tolower($1) ~ /^pyspark(-client)?$/ {printf "%s %s, ", $1, $2}')"
  check="$("$venv/bin/pip" check 2>&1 | head -1)"
  python="$("$venv/bin/python" "$job" 2>&1 | grep -E '^\{|Error|error:' | tail -1)"
  submit="$(PATH="$venv/bin:$PATH" "$venv/bin/spark-submit" "$job" 2>&1 | grep -E '^\{|Error|No such file' | tail -1)"
  say "    installed: ${installed%, }"
  say "    pip check: $check"
  say "    python:       ${python:-<no output>}"
  say "    spark-submit: ${submit:-<no output>}"
  [[ "$python" == "{"* && "$submit" == "{"* ]]
}
fresh_venv() { rm -rf "$1" && "$PYTHON" -m venv "$1"; }
pip_in() { local venv="$1"; shift; "$venv/bin/pip" install -q "$@" >"$venv.pip.log" 2>&1 || { say "    pip failed: $(tail -3 "$venv.pip.log")"; return 1; }; }

if [[ "${SKIP_TRAP1:-0}" != 1 ]]; then
  section "trap1: pyspark $PYSPARK_VERSION and pyspark-client together (DESIGN.md trap 1)"
  T="$STATE/trap1"; mkdir -p "$T"
  UNPINNED_CLIENT="$T/constraints-without-pyspark-client.txt"
  grep -v '^pyspark-client==' "$CONSTRAINTS" >"$UNPINNED_CLIENT"
  same_version_ok=1
  say "  a) pyspark first, then pyspark-client (same version)"
  fresh_venv "$T/a" && pip_in "$T/a" -c "$CONSTRAINTS" "pyspark==$PYSPARK_VERSION" \
    && pip_in "$T/a" -c "$CONSTRAINTS" "pyspark-client==$PYSPARK_VERSION" && probe_venv "$T/a" || same_version_ok=0
  say "  b) pyspark-client first, then pyspark (same version)"
  fresh_venv "$T/b" && pip_in "$T/b" -c "$CONSTRAINTS" "pyspark-client==$PYSPARK_VERSION" \
    && pip_in "$T/b" -c "$CONSTRAINTS" "pyspark==$PYSPARK_VERSION" && probe_venv "$T/b" || same_version_ok=0
  say "  c) both in one pip command (same version)"
  fresh_venv "$T/c" && pip_in "$T/c" -c "$CONSTRAINTS" "pyspark==$PYSPARK_VERSION" "pyspark-client==$PYSPARK_VERSION" \
    && probe_venv "$T/c" || same_version_ok=0
  say "  d) pyspark pinned, pyspark-client left to the resolver (what 'pip install pyspark==$PYSPARK_VERSION" \
      "apache-airflow-providers-apache-spark==6.x' without a pyspark-client pin gives)"
  fresh_venv "$T/d" && pip_in "$T/d" -c "$UNPINNED_CLIENT" "pyspark==$PYSPARK_VERSION" "pyspark-client>=4.0.0" \
    && { probe_venv "$T/d" && say "    -> works" || say "    -> BROKEN (expected hazard)"; }
  say "  e) a), then 'pip uninstall pyspark-client'"
  if [[ -d "$T/a" ]]; then
    "$T/a/bin/pip" uninstall -q -y pyspark-client >/dev/null 2>&1
    probe_venv "$T/a" && say "    -> works" || say "    -> BROKEN (expected hazard)"
  fi
  if [[ $same_version_ok == 1 ]]; then record trap1 ok "same-version installs (a, b, c) leave a working pyspark and spark-submit"
  else record trap1 FAIL "a same-version install (a, b or c) broke pyspark or spark-submit (see above)"; fi
fi

# ----------------------------------------------------------------------------------------------------------- venv
section "venv: $VENV"
STAMP="$(cat "$REQUIREMENTS" "$CONSTRAINTS" | sha256sum | cut -c1-16)"
if [[ -x "$VENV/bin/python" && "$(cat "$VENV/.spike-stamp" 2>/dev/null)" == "$STAMP" ]]; then
  say "  up to date (requirements and constraints unchanged)"
else
  rm -rf "$VENV" && "$PYTHON" -m venv "$VENV"
  if "$VENV/bin/pip" install -q -r "$REQUIREMENTS" -c "$CONSTRAINTS" >"$STATE/venv-pip.log" 2>&1; then
    echo "$STAMP" >"$VENV/.spike-stamp"
  else
    say "  pip install failed: $(tail -5 "$STATE/venv-pip.log")"
  fi
fi
if [[ -f "$VENV/.spike-stamp" ]] && CHECK="$("$VENV/bin/pip" check 2>&1)" \
   && VERSIONS="$("$VENV/bin/python" -c 'import pyspark, pyiceberg; from importlib.metadata import version as v; print("pyspark", pyspark.__version__, "| pyspark-client", v("pyspark-client"), "| provider", v("apache-airflow-providers-apache-spark"), "| airflow", v("apache-airflow"), "| pyiceberg", pyiceberg.__version__)' 2>&1)"; then
  record venv ok "$VERSIONS; pip check: $CHECK"
else
  record venv FAIL "${CHECK:-} ${VERSIONS:-}"
fi

# ----------------------------------------------------------------------------------------------------------- jars
section "jars: $JARS_DIR"
mkdir -p "$JARS_DIR"
JAR_NAMES=()
jars_ok=1
while read -r sha coordinates; do
  [[ -z "$sha" || "$sha" == \#* ]] && continue
  IFS=: read -r group artifact version <<<"$coordinates"
  name="$artifact-$version.jar"; target="$JARS_DIR/$name"
  url="$MAVEN/${group//.//}/$artifact/$version/$name"
  JAR_NAMES+=("$name")
  if [[ -f "$target" ]] && echo "$sha  $target" | sha256sum -c --status; then say "  cached  $name"; continue; fi
  if ! curl -sSf --retry 3 --max-time 600 -o "$target.part" "$url" 2>"$STATE/curl.err"; then
    say "  FAIL    $name: download of $url failed: $(cat "$STATE/curl.err")"; jars_ok=0; continue
  fi
  got="$(sha256sum "$target.part" | cut -d' ' -f1)"
  maven_sha1="$(curl -sf --max-time 30 "$url.sha1" | cut -c1-40)"
  if [[ "$got" != "$sha" ]]; then
    say "  FAIL    $name: sha256 $got, jars.lock expects $sha"; rm -f "$target.part"; jars_ok=0; continue
  fi
  if [[ -n "$maven_sha1" && "$(sha1sum "$target.part" | cut -c1-40)" != "$maven_sha1" ]]; then
    say "  FAIL    $name: sha1 differs from Maven Central's $url.sha1"; rm -f "$target.part"; jars_ok=0; continue
  fi
  mv "$target.part" "$target" && say "  fetched $name (sha256 and Maven's sha1 verified)"
done <"$SPIKE_DIR/jars.lock"
if [[ $jars_ok == 1 ]]; then record jars ok "${JAR_NAMES[*]}"; else record jars FAIL "see above"; fi

# ------------------------------------------------------------------------------------------------------------ job
section "job: Iceberg + MERGE + pyiceberg + OpenLineage on Spark $PYSPARK_VERSION"
if [[ "${VERDICT[venv]}" == ok && "${VERDICT[jars]}" == ok ]]; then
  JAR_LIST="$(IFS=,; echo "${JAR_NAMES[*]}")"
  (cd "$PROJECT_ROOT" && "$VENV/bin/python" "$SPIKE_DIR/spike.py" --catalog "${SPIKE_CATALOG:-auto}" \
      --state "$STATE/run" --jars-dir "$JARS_DIR" --jars "$JAR_LIST") 2>&1 \
    | grep -v -E '^[0-9]{4}-[0-9]{2}-[0-9]{2}T.*\[(info|debug) *\]' | tee "$STATE/job.log"
  if [[ "$(tail -1 "$STATE/job.log")" == PASS* ]]; then record job ok
  else record job FAIL "$(grep -A12 '^FAIL ' "$STATE/job.log" | head -14)"; fi
else
  record job FAIL "not run: the venv or the jars are not ready"
fi

# ----------------------------------------------------------------------------------------------------------- ansi
if [[ "${SKIP_ANSI:-0}" != 1 && "${VERDICT[venv]}" == ok && "${VERDICT[jars]}" == ok ]]; then
  section "ansi: the project's transforms under Spark $PYSPARK_VERSION (spark.sql.ansi.enabled defaults to true)"
  A="$STATE/ansi"; rm -rf "$A"; mkdir -p "$A"
  SPIKE_JARS="$(printf "$JARS_DIR/%s:" "${JAR_NAMES[@]}")"
  export_env=(env ICEBERG_CATALOG_TYPE=jdbc PIPELINE_VAR_DIR="$A/var" SPIKE_JARS="$SPIKE_JARS"
              PYTHONPATH="$PROJECT_ROOT:$SPIKE_DIR")
  (cd "$PROJECT_ROOT" && "${export_env[@]}" "$VENV/bin/pytest" --noconftest -p ansi_plugin -p no:cacheprovider -q \
      --tb=line -rf tests/unit/test_taxi_transforms.py tests/unit/test_weather_and_forecast_transforms.py) \
    >"$A/unit-tests.log" 2>&1
  grep -E '^FAILED|passed|failed' "$A/unit-tests.log" | sed 's/^/  /'
  (cd "$PROJECT_ROOT" && "${export_env[@]}" "$VENV/bin/python" "$SPIKE_DIR/ansi_probe.py") >"$A/probe.md" 2>"$A/probe.err"
  sed 's/^/  /' "$A/probe.md"
  VERDICT[ansi]="survey (see $A)"
fi

# -------------------------------------------------------------------------------------------------------- verdict
section "verdict"
for name in trap1 venv jars job ansi; do [[ -n "${VERDICT[$name]:-}" ]] && say "  $name: ${VERDICT[$name]}"; done
if [[ "${VERDICT[trap1]:-ok}" == ok && "${VERDICT[venv]}" == ok && "${VERDICT[jars]}" == ok && "${VERDICT[job]}" == ok ]]; then
  say "PASS"; exit 0
fi
say "FAIL"; exit 1
