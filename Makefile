# Every target starts with the same idempotent set-up: venv, pinned packages, checksummed jars, Airflow home.
PYTHON ?= python3
VENV := .venv
VENV_PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
PIPELINE := $(VENV)/bin/pipeline

.PHONY: setup lint test test-fast test-docker demo airflow fleet bench bench-scale-store bench-scale-store-year-build bench-scale-store-year clean

$(INSTALLED): requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	@test -x $(VENV_PY) || $(PYTHON) -m venv $(VENV)
	$(VENV_PY) -m pip install --quiet --disable-pip-version-check --upgrade pip==25.2
	$(VENV_PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
	$(VENV_PY) -m pip install --quiet --disable-pip-version-check --no-deps -e . --config-settings editable_mode=compat
	@touch $(INSTALLED)

setup: $(INSTALLED)
	$(VENV_PY) -m include.setup.bootstrap

# ruff: lint rules and formatting as configured in pyproject.toml; `make test` runs it before pytest.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Three pytest-xdist workers on two cores, each a session with its own var/ (tests/conftest.py): much of a DAG run is
# waiting (the scheduler's loop, a Spark driver's start), so a third worker fills the cores. Groups start longest
# first (tests/conftest.py GROUP_COST). TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 3
test: setup lint
	@include/setup/system_packages.sh
	$(PIPELINE) test $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)

# The edit loop: unit tests without Spark or a browser, DAG integrity and the compose file, on two workers: about
# a minute and a half.
test-fast: setup
	$(PIPELINE) test tests/unit tests/test_dag_integrity.py tests/test_docker_compose.py -m "not spark and not browser" -q \
		-n 2 --dist loadgroup

# Opt-in, tens of minutes: docker-compose's celery profile run for real on a Docker engine started by hand
# (`dockerd --storage-driver=vfs --iptables=false`), its base images stand-ins built from Debian and PyPI
# (docker/stand-ins/build.sh); docs/cluster-and-docker.md "The celery profile, run for real".
test-docker: setup
	@include/setup/system_packages.sh docker
	PIPELINE_TEST_DOCKER=1 $(PIPELINE) test tests/integration/test_docker_celery.py -s

demo: setup
	$(PIPELINE) demo

# make airflow SAMPLE_DATA=1: generated TLC/NOAA files served on loopback (offline); trigger logical date 2025-02-01.
# SAMPLE_MONTHS=2024-01..2024-12 serves a year instead (for `airflow backfill create`, docs/pipeline.md "Backfilling history").
airflow: setup
	@include/setup/system_packages.sh postgresql
	$(PIPELINE) ui $(if $(SAMPLE_DATA),--sample-data,) $(if $(SAMPLE_MONTHS),--sample-months $(SAMPLE_MONTHS),)

# make fleet [SAMPLE_DATA=1]: Airflow on the CeleryExecutor, two workers sharing no disk, and the shared services they
# need, on loopback (docs/cluster-and-docker.md "A fleet of machines"); `.venv/bin/pipeline fleet stop` ends it.
fleet: setup
	@include/setup/system_packages.sh postgresql redis
	$(PIPELINE) fleet start $(if $(SAMPLE_DATA),--sample-data,)

bench: setup
	$(VENV_PY) -m bench

# The lineage store at a platform's scale (bench/store_scale.py, docs/performance.md "A year of a large platform"):
# generated years of 10^5 and 10^6 events into PostgreSQL (started on loopback) and SQLite, side by side, from empty
# stores (~35 minutes here). STORE_SCALE_SIZES=100000 STORE_SCALE_DATABASES=postgresql make bench-scale-store
STORE_SCALE_SIZES ?= 100000,1000000
STORE_SCALE_DATABASES ?= postgresql,sqlite
bench-scale-store: setup
	$(VENV_PY) -m bench.store_scale --sizes $(STORE_SCALE_SIZES) --databases $(STORE_SCALE_DATABASES)

# The 10^7-event year: hours of ingest here, so its stores are kept (var/bench-state-store-scale/kept/) and built over
# as many runs as it takes; stopping one loses at most a few day files' work. bench-scale-store-year-build only builds
# (run it once per database, side by side); bench-scale-store-year builds what is missing, then measures, which spends
# the stores (the next run builds them again). A year that cannot be finished in the time at hand is measured as far as
# it is built: .venv/bin/python -m bench.store_scale --keep --as-built --sizes 10000000 --databases sqlite
STORE_SCALE_YEAR ?= 10000000
bench-scale-store-year-build: setup
	$(VENV_PY) -m bench.store_scale --keep --build-only --sizes $(STORE_SCALE_YEAR) --databases $(STORE_SCALE_DATABASES)

bench-scale-store-year: setup
	$(VENV_PY) -m bench.store_scale --keep --sizes $(STORE_SCALE_YEAR) --databases $(STORE_SCALE_DATABASES)

clean:
	-$(PIPELINE) fleet stop
	-$(PIPELINE) catalog stop
	-$(VENV_PY) -m include.services.postgres stop
	rm -rf var
