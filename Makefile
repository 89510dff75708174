# Cluster Ops — the two set-up commands: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
MANAGE := $(BIN)/python manage.py
STAMP := $(VENV)/.installed-requirements
# With REDIS_URL set, Redis is yours; without it, `make run` starts the embedded one.
EMBEDDED_REDIS := $(if $(REDIS_URL),false,true)

.PHONY: run test test-fast bench lint docs venv clean slurm-lab slurm-lab-stop k8s-lab k8s-lab-stop

venv: $(STAMP)

$(STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Cluster Ops needs Python 3.11, found " + sys.version.split()[0] + " at " + sys.executable + " (set PYTHON=/path/to/python3.11)")'
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || { echo "Python's venv module is missing: apt-get install python3-venv"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

run: venv
	@# On a lab, the example jobs (examples/elastic_train.py) run this venv's Python: they need PyTorch.
	@if [ "$${SLURM_DEMO_JOBS:-0}$${KUBERNETES_DEMO_JOBS:-0}" != 00 ]; then \
	    $(BIN)/python -c 'import torch' 2>/dev/null || $(BIN)/pip install --quiet -r requirements-node.txt; fi
	@# Refused beside a running instance before anything is set up.
	@EMBEDDED_REDIS=$(EMBEDDED_REDIS) WEB_ADDRESS="$${WEB_ADDRESS:-127.0.0.1:8000}" $(MANAGE) process_config --check
	$(MANAGE) check
	$(MANAGE) migrate --noinput
	$(MANAGE) ensure_admin
	$(MANAGE) sync_schedules
	$(MANAGE) seed_demo
	$(MANAGE) collectstatic --noinput --verbosity 0
	@echo "Starting Cluster Ops; it says its address when it answers"
	@mkdir -p "$${VAR_DIR:-$(CURDIR)/var}"
	@export PATH="$(CURDIR)/$(BIN):$$PATH" CLUSTER_OPS_BIN="$(CURDIR)/$(BIN)" EMBEDDED_REDIS=$(EMBEDDED_REDIS) \
	    VAR_DIR="$${VAR_DIR:-$(CURDIR)/var}" WEB_ADDRESS="$${WEB_ADDRESS:-127.0.0.1:8000}" && \
	    conf=$$($(MANAGE) process_config) && exec $(BIN)/supervisord -c "$$conf"

# A throwaway Slurm on this host (as root: installs Debian's packages); prints the settings to export.
slurm-lab:
	@$(PYTHON) scripts/slurm_lab.py start

slurm-lab-stop:
	@$(PYTHON) scripts/slurm_lab.py stop

# A throwaway Kubernetes on this host (builds Kubernetes' programs once per machine); prints the settings to export.
k8s-lab: venv
	@$(BIN)/python scripts/k8s_lab.py start

k8s-lab-stop:
	@$(PYTHON) scripts/k8s_lab.py stop

test: venv
	@bash scripts/run_tests.sh $(PYTEST_ARGS)

# The quick tier while editing: lint, types, the manual and the tests that start no process or server.
test-fast: venv
	@bash scripts/run_tests.sh --fast $(PYTEST_ARGS)

# Every benchmark, then docs/performance.md rewritten with their figures, the machine and the date (~3 minutes).
bench: venv
	$(BIN)/python scripts/bench.py

# The manual (docs/, mkdocs.yml) as a static site in var/site/; `make test` builds it too, strictly.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
