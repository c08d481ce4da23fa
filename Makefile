# The two ways in: `make run` serves the app, `make test` runs every check. Both set up .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.requirements-installed
DEV_STAMP := $(VENV)/.requirements-dev-installed
# pip's own progress (what it collects, downloads and installs): a first set-up takes minutes
PIP_INSTALL := $(BIN)/pip install --disable-pip-version-check --progress-bar on

.PHONY: run test test-fast setup setup-dev browser postgres clean

# `make run`: the runtime only (requirements.txt)
$(STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "make: $(PYTHON) not found; set PYTHON=python3.11-compatible interpreter"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "make: installing the runtime (requirements.txt: about 2.1 GB, a few minutes on a fresh machine) into $(VENV)"
	$(PIP_INSTALL) --require-hashes -r requirements.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	@echo "make: compiling the numba kernels once (UGACLIP / ACLIP, LDA, GCCens, the risk walk: about 30 s on a fresh machine)"
	$(BIN)/python -m engine.anonymize.warm
	touch $(STAMP)

# `make test`: the runtime, then the test and development tools (requirements-dev.txt)
$(DEV_STAMP): $(STAMP) requirements.txt requirements-dev.txt
	@echo "make: installing the test and development tools (requirements-dev.txt) into $(VENV)"
	$(PIP_INSTALL) --require-hashes -r requirements-dev.txt
	touch $(DEV_STAMP)

setup: $(STAMP)

setup-dev: $(DEV_STAMP)

# Debian's Chromium for the browser end-to-end test; installed when missing and the machine allows it.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's chromium for the browser test"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) \
		|| echo "could not install chromium; the browser test will say so"; \
	else echo "chromium missing and cannot be installed here; the browser test will say so"; fi

# Debian's PostgreSQL for the database tests (tests/pg_support.py starts a throwaway server from its
# binaries); installed when missing and the machine allows it, else those tests are skipped and say so.
postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian's postgresql for the database tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
		|| echo "could not install postgresql; the database tests will say so"; \
	else echo "postgresql missing and cannot be installed here; the database tests will say so"; fi

run: setup
	$(BIN)/streamlit run serve.py

test: setup-dev browser postgres
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -n auto --maxprocesses 4

# The fast tier (issue 38): the engine's unit, property and reference tests; no AppTest, no served app,
# no browser (tests/conftest.py marks those `app`), nothing marked slow (tests/conftest.py SLOW_MODULES,
# SLOW_TESTS, SLOW_FIXTURES, each with its reason: runs on the whole sample, CLI subprocesses, scale and
# database runs). "not slow" loads the derandomized Hypothesis profile "fast": at most 10 examples per
# property test, every @example kept. Measured on this 2-core machine (2 workers): 1,509 tests in 96 s
# wall, 181 s of CPU (load average 1.3 from other work at the start); before: 1,553 tests, 13 min 34 s
# under load (32 min at load 7-10 with the numba cache cold).
# `make test` stays CI's command: every test, every property test at its full max_examples.
test-fast: setup-dev
	$(BIN)/python -m pytest -n auto --maxprocesses 4 -m "not app and not slow"

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
