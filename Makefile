# dnsd developer commands. `make test` is what CI runs (.ci/run).
PYTHON ?= python3

VENV ?= .venv

.PHONY: run serve install test test-fast test-latest check lint deps bench

## run: install dnsd into a virtual environment (VENV, default .venv/) and serve the bundled
## zones/ on 127.0.0.1:5353. A venv, because Debian 12 (PEP 668) refuses `pip install`
## into the system Python.
run: install
	$(VENV)/bin/dnsd serve zones/

serve: run

## install: create VENV if needed and install this checkout into it (EXTRAS=plots: pictures)
install:
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/install-venv.sh

## deps: install what the tests need (Debian dnsutils + unbound, Python test extra)
deps:
	scripts/install-test-deps.sh

## lint: ruff (lint + format check) and mypy
lint:
	$(PYTHON) -m ruff check dnsd tests bench
	$(PYTHON) -m ruff format --check dnsd tests bench
	$(PYTHON) -m mypy dnsd

## test: install everything, lint, and run the whole suite; prints line coverage of dnsd/
## (in-process code only: the `dnsd serve` processes that e2e tests start are not traced)
test: deps lint
	$(PYTHON) -m pytest --durations=25 --cov=dnsd --cov-report=term:skip-covered

## test-fast: the edit loop's tier (no outside process, about 2 minutes): unit and property
## tests, the property and fuzz tests exploring a tenth of their cases, and the layering rules
test-fast:
	DNSD_TEST_TIER=fast $(PYTHON) -m pytest --durations=10 tests/unit tests/property tests/test_layering.py

## test-latest: the same with the newest releases instead of tests/constraints.txt (the lock)
test-latest:
	DNSD_TEST_LATEST=1 $(MAKE) test

check: test

## bench: benchmarks (not part of the test run); loopback only, bounded
bench:
	$(PYTHON) bench/peers.py
	$(PYTHON) bench/bigconfig.py
	$(PYTHON) bench/probe_load.py
	$(PYTHON) bench/memory_flood.py
	$(PYTHON) bench/health_churn.py
	$(PYTHON) bench/dnssec_flood.py
	$(PYTHON) bench/zonefile_load.py
