# Two commands for a newcomer: `make run` and `make test`. Everything else is detail.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test lint typecheck pytest test-unit test-db test-citus clean reliability bench bench-quick bench-deploy

$(PY):
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "ARVIS needs Python 3.11 or newer"'
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

# The identity tests' OpenID provider (tests/support/oidc): its npm packages, exactly as
# the lock file has them. Without npm the tests that need it skip, saying so.
OIDC := tests/support/oidc
OIDC_STAMP := $(OIDC)/node_modules/.package-lock.json

$(OIDC_STAMP): $(OIDC)/package-lock.json $(OIDC)/package.json
	@if command -v npm >/dev/null; then cd $(OIDC) && npm ci --no-audit --no-fund; \
	else echo "npm not found: tests needing the OpenID provider ($(OIDC)) will skip"; fi

install: $(STAMP) $(OIDC_STAMP)

## run: install, migrate, and serve on the embedded PostgreSQL with the built-in tools
run: install
	$(VENV)/bin/arvis quickstart --host $(HOST) --port $(PORT)

## test: lint, format check, strict type check, then the whole suite (the unit tier first)
test: lint typecheck pytest

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy --strict arvis

# The database tiers keep their temporary folders under a root of their own: pytest prunes
# all but the newest three runs' folders under the shared /tmp/pytest-of-<user>, so a second
# pytest started meanwhile (another checkout's) would delete a running test's data folder.
# The root is removed after a green run and kept after a red one, for its logs.
DBTEST = root=$$(mktemp -d /tmp/arvis-pytest.XXXXXX) && PYTEST_DEBUG_TEMPROOT=$$root $(VENV)/bin/pytest -q
DBTEST_END = && rm -rf "$$root"

# The unit tier first: it answers in seconds, so a broken rule stops the run before the
# database tiers start.
pytest: test-unit
	$(DBTEST) --ignore=tests/unit $(DBTEST_END)

## test-unit: the unit tier alone: pure rules, and the lifecycle on the in-memory store
## (tests/support/fakestore); no PostgreSQL, under 30 s. A developer changing a rule runs this.
## Its own temporary folder: pytest prunes old runs' folders under the shared
## /tmp/pytest-of-<user> at start-up, which costs seconds when other runs left many there.
test-unit: install
	@mkdir -p .pytest_cache
	$(VENV)/bin/pytest -q -p no:schemathesis --basetemp=.pytest_cache/unit-tmp tests/unit

## test-db: the database tests again (CI sets ARVIS_TEST_DATABASE_URL for a second server)
test-db: install
	$(DBTEST) tests/integration tests/e2e tests/reliability tests/adversarial $(DBTEST_END)

## test-citus: the Citus tier on a coordinator and two workers on loopback, started from this
## machine's PostgreSQL 15 with Citus installed (docs/scaling.md; deploy/citus/build-citus.sh
## builds it); says so and fails where Citus is not installed. tests/citus, then the
## integration tier and the kill -9 scenario with every database distributed by tenant.
CITUS_TESTS := tests/citus tests/integration tests/reliability/test_kill9.py
test-citus: install
	@$(PY) -m tests.support.citus || { echo "make test-citus: Citus is needed (deploy/citus/build-citus.sh)"; exit 1; }
	ARVIS_TEST_CITUS=1 $(VENV)/bin/pytest -q -p no:schemathesis $(CITUS_TESTS)

## reliability: the seven scenarios of docs/reliability.md at full size (minutes); prints their lines
reliability: install
	ARVIS_RELIABILITY_SCALE=full $(VENV)/bin/pytest -q -m reliability tests/reliability

clean:
	rm -rf $(VENV) .arvis .mypy_cache .pytest_cache .ruff_cache $(OIDC)/node_modules

## bench: every figure of docs/benchmarks.md, full sizes (minutes); installs the bench extra
bench: install
	$(PY) -m pip install -q -e '.[test,bench]'
	$(PY) -m bench

## bench-quick: the same figures at small sizes, for CI (under a minute)
bench-quick: install
	$(PY) -m pip install -q -e '.[test,bench]'
	$(PY) -m bench --quick

## bench-deploy: figures 7 and 8 (docs/deploy.md, docs/scaling.md): a per-turn instance's start-up,
## and 1, 2, 4 serve processes on one PostgreSQL side by side (a few minutes; QUICK=1 for a minute)
bench-deploy: install
	$(PY) -m pip install -q -e '.[test,bench]'
	$(PY) -m bench --only startup scaling $(if $(QUICK),--quick)
