# trnlab: two commands a newcomer needs (see README.md).
#   make lab   - set up the environment if missing, open the labs in JupyterLab
#   make test  - set up the environment if missing, run lint and the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
KERNEL := trnlab
PORT   ?= 8888
STAMP  := $(VENV)/.trnlab-installed

.PHONY: lab test env lint format labs editions benchmarks clean

env: $(STAMP)

# The environment is rebuilt only when the project's dependency list changes.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (trnlab)"
	@touch $(STAMP)

# JupyterLab refuses to run as root unless told; containers and CI machines often are root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=labs --port=$(PORT) $(ROOT_FLAG) $(LAB_ARGS)

# The whole suite: lint, unit and property tests, every lab through papermill, nbval on the
# committed labs. One pytest run, so one summary line.
test: $(STAMP) lint browser sandbox
	$(BIN)/python -m pytest tests labs --nbval-lax --nbval-kernel-name $(KERNEL) $(PYTEST_ARGS)

# The classroom app: the main dashboards on one page, served by Voila (code cells hidden).
# Notebook 7's JupyterLab extension is left out: Voila cannot load it (a console error otherwise).
.PHONY: app browser
APP_PORT ?= 8866
VOILA_ARGS ?=
app: $(STAMP)
	$(BIN)/voila apps/dashboards.ipynb --port=$(APP_PORT) --no-browser \
		'--VoilaConfiguration.extension_denylist=["@jupyter-notebook/lab-extension"]' $(VOILA_ARGS)

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
