# trnlab: two commands a newcomer needs (see README.md).
#   make lab   - set up the environment if missing, open the labs in JupyterLab
#   make test  - set up the environment if missing, run lint and the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
KERNEL := trnlab
PORT   ?= 8888
STAMP  := $(VENV)/.trnlab-installed
WARM   := $(VENV)/.trnlab-numba-warm

.PHONY: lab test env warm lint format labs editions benchmarks clean

env: $(STAMP) $(WARM)

# The environment is rebuilt only when the project's dependency list changes.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (trnlab)"
	@touch $(STAMP)

# numba compiles each kernel once into its on-disk cache (cache=True), here at set-up rather than
# in the first lab cell, the app's first page or every test worker at once. Redone when a module
# with numba kernels (or the warm-up itself) changes.
NUMBA_SOURCES := $(shell grep -rl --include='*.py' 'njit' trnlab)
warm: $(WARM)
$(WARM): $(STAMP) $(NUMBA_SOURCES) scripts/warm_numba.py
	$(BIN)/python scripts/warm_numba.py
	@touch $(WARM)

# JupyterLab refuses to run as root unless told; containers and CI machines often are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP) $(WARM)
	$(BIN)/jupyter lab --notebook-dir=labs --port=$(PORT) $(ROOT_FLAG) $(LAB_ARGS)

# The whole suite: lint, unit and property tests, every lab through papermill, nbval on the
# committed labs, the browser tests. One pytest run, so one summary line, spread over one worker
# per core (TEST_WORKERS=0 for one process): each file (a notebook under nbval, a browser test
# module) on one worker, the longest work handed out first (tests/conftest.py).
TEST_WORKERS ?= auto
test: $(STAMP) $(WARM) lint browser sandbox
	$(BIN)/python -m pytest tests labs --nbval-lax --nbval-kernel-name $(KERNEL) \
		-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The classroom app: the main dashboards on one page, served by Voila (code cells hidden).
# Its settings are in apps/voila.json, which Voila reads from its working directory: a pool of
# preheated kernels (each has already run the notebook when a learner's request arrives, so the
# page paints at once; VOILA_ARGS=--pool_size=N for N learners arriving together) and Notebook
# 7's JupyterLab extension left out (Voila cannot load it: a console error otherwise).
.PHONY: app browser
APP_PORT ?= 8866
VOILA_ARGS ?=
app: $(STAMP) $(WARM)
	cd apps && $(abspath $(BIN))/voila dashboards.ipynb --port=$(APP_PORT) --no-browser $(VOILA_ARGS)

# The browser tests drive Debian's chromium (never a downloaded one). Install it when we can
# (root with apt-get, e.g. CI); otherwise say how, and the browser tests skip (fail under CI=true).
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium for the browser tests (apt-get)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	else \
		echo "chromium not found: the browser tests will skip. Install it with: sudo apt-get install chromium"; \
	fi

# Grading runs each submitted notebook under bubblewrap (docs/instructors.md). Install it when
# we can (root with apt-get, e.g. CI); otherwise say how: the grader then refuses to run, and
# the sandbox tests skip (fail under CI=true).
.PHONY: sandbox
sandbox:
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing bubblewrap for the grading sandbox (apt-get)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; \
	else \
		echo "bwrap not found: grading needs it. Install it with: sudo apt-get install bubblewrap"; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

benchmarks: $(STAMP)
	$(BIN)/python -m benchmarks

# Re-execute the committed labs in place (top to bottom, no widget state) after editing one.
labs: $(STAMP)
	$(BIN)/python scripts/run_labs.py
	$(BIN)/python -m trnlab.course editions

# The instructor edition (instructor/) is generated from labs/ and the exercise solutions.
editions: $(STAMP)
	$(BIN)/python -m trnlab.course editions

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
