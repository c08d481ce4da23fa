# The two ways in: `make run` serves the app, `make test` runs every check. Both set up .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.requirements-installed

.PHONY: run test setup browser postgres clean

$(STAMP): requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "make: $(PYTHON) not found; set PYTHON=python3.11-compatible interpreter"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

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
	$(BIN)/streamlit run app.py

test: setup browser postgres
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -n auto --maxprocesses 4

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
