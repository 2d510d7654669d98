# dnsd developer commands. `make test` is what CI runs (.ci/run).
PYTHON ?= python3

VENV ?= .venv

.PHONY: run serve install test coverage test-fast test-latest check lint deps bench

# Where `make run` keeps its overrides, events and keys: outside the checkout (a `git clean`
# or a fresh clone must not take them, and they are no part of the source).
STATE_DIR ?= $(or $(XDG_STATE_HOME),$(HOME)/.local/state)/dnsd

# The venv holds a copy of this checkout (`pip install .`, not editable), so it is installed
# again only when a file it is built from changed since the last install: the stamp in the
# venv (gone with the venv). One stamp per EXTRAS, so `EXTRAS=plots` installs matplotlib once.
STAMP = $(VENV)/.dnsd-installed$(if $(EXTRAS),-$(EXTRAS))
SOURCES := pyproject.toml setup.py $(shell find dnsd -type f ! -path '*/__pycache__/*' ! -name '*.so' ! -name '*.pyc')

## run: install dnsd into a virtual environment (VENV, default .venv/) when this checkout
## changed since, and serve the bundled zones/ on 127.0.0.1:5353, its state in STATE_DIR
## (default $XDG_STATE_HOME/dnsd, else ~/.local/state/dnsd). A venv, because Debian 12
## (PEP 668) refuses `pip install` into the system Python.
run: $(STAMP)
	$(VENV)/bin/dnsd serve zones/ --state-dir "$(STATE_DIR)"

serve: run

$(STAMP): $(SOURCES)
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/install-venv.sh
	touch "$@"

## install: create VENV if needed and install this checkout into it (EXTRAS=plots: pictures)
install:
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/install-venv.sh
	touch "$(STAMP)"

## deps: install what the tests need (Debian dnsutils + unbound, Python test extra)
deps:
	scripts/install-test-deps.sh

## lint: ruff (lint + format check) and mypy
lint:
	$(PYTHON) -m ruff check dnsd tests bench
	$(PYTHON) -m ruff format --check dnsd tests bench
	$(PYTHON) -m mypy dnsd

## test: install everything, lint, and run the whole suite in TEST_WORKERS processes
## (pytest-xdist, a test file per process at a time: a module's shared server stays one;
## the longest files first, in the order of tests/longest_first.py, not xdist's own);
## prints the 25 slowest tests
TEST_WORKERS ?= 2
SUITE = $(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25
test: deps lint
	$(SUITE)

## coverage: the same suite with line coverage of dnsd/ (in-process code only: the `dnsd
## serve` processes that e2e tests start are not traced); tracing doubles the CPU-bound
## tests' time, so it is not in `make test`
coverage: deps lint
	$(SUITE) --cov=dnsd --cov-report=term:skip-covered

## test-fast: the edit loop's tier (no outside process, about two minutes on 2 cores): unit and property
## tests, the property and fuzz tests exploring a tenth of their cases, and the layering rules
test-fast:
	DNSD_TEST_TIER=fast $(PYTHON) -m pytest -n $(TEST_WORKERS) --durations=10 tests/unit tests/property tests/test_layering.py

## test-latest: the same with the newest releases instead of tests/constraints.txt (the lock)
test-latest:
	DNSD_TEST_LATEST=1 $(MAKE) test

check: test

## bench: benchmarks (not part of the test run); loopback only, bounded
bench:
	$(PYTHON) bench/peers.py
	$(PYTHON) bench/coldpath.py
	$(PYTHON) bench/dnstap_rate.py
	$(PYTHON) bench/proxy_protocol.py
	$(PYTHON) bench/bigconfig.py
	$(PYTHON) bench/probe_load.py
	$(PYTHON) bench/memory_flood.py
	$(PYTHON) bench/memory_zone.py
	$(PYTHON) bench/health_churn.py
	$(PYTHON) bench/dnssec_flood.py
	$(PYTHON) bench/zonefile_load.py
	$(PYTHON) bench/update_burst.py
	$(PYTHON) bench/traffic_control_rate.py
