# Every target creates .venv when missing and installs from the project's own files.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint bench clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash demo/demo.sh

# Tests write bytecode caches even where the environment says not to (PYTHONDONTWRITEBYTECODE):
# otherwise every worker rewrites every test module's asserts again and every `memsync`
# process a test starts compiles the modules it imports again (0.1-0.2 s each; 12-14% of the
# CPU of e2e files that start many, measured against the same files without caches).
NOCACHE_OFF := PYTHONDONTWRITEBYTECODE=

# The whole suite, as CI runs it: property tests take the thorough, derandomized `ci`
# profile (tests/conftest.py) unless MEMSYNC_HYPOTHESIS names another. Where its CPU goes,
# test by test: `MEMSYNC_CPUPROF=/tmp/cpu make test PYTEST_ARGS="-p tests.cpuprof"`, then
# `.venv/bin/python -m tests.cpuprof /tmp/cpu` (tests/cpuprof.py).
test: $(STAMP)
	$(NOCACHE_OFF) MEMSYNC_HYPOTHESIS=$${MEMSYNC_HYPOTHESIS:-ci} $(BIN)/pytest -n 3 --dist worksteal -q $(PYTEST_ARGS)

# The inner loop: everything but the long fault suites marked `slow` (make test runs them),
# property tests on the small `dev` profile unless MEMSYNC_HYPOTHESIS names another.
test-fast: $(STAMP)
	$(NOCACHE_OFF) $(BIN)/pytest -n 3 --dist worksteal -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check memsync tests bench
	$(BIN)/ruff format --check memsync tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .demo .pytest_cache .mypy_cache .ruff_cache bench/results
