# spark-llm: `make demo` deploys to a simulated cluster and prints a completion; `make test` runs every check.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
ENV := . tools/env.sh
VENV := .venv
PY := $(VENV)/bin/python
# Python keeps its bytecode cache (__pycache__, ignored by git) for what make runs, even where the environment says
# otherwise (this machine sets PYTHONDONTWRITEBYTECODE=1): every `pulumi preview` and `up` starts the program afresh,
# and without the cache each start compiles spark_llm and components again (0.35 s of CPU a preview, 280 a test run).
unexport PYTHONDONTWRITEBYTECODE
# mypy's cache outside the checkout, so a fresh clone checks in 0.5 s instead of 8-11 (entries are keyed by module
# and checked against each file's hash: one cache serves every clone).
export MYPY_CACHE_DIR ?= $(HOME)/.cache/spark-llm/mypy

.PHONY: help deploy-tools deploy-deps deploy-venv tools venv pulumi system-deps lint unit integration test demo \
  sim-up sim-down docs clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

system-deps: ## Debian packages: docker.io, rsync, openssh-client, shellcheck, debootstrap, curl, postgresql
	tools/system-deps.sh

# Two stamps: deploying needs the first (the program's packages, with python3's venv and pip: nothing else to
# install), developing the second (plus pytest, ruff, mypy, ...), which stands for both.
$(VENV)/.deploy-installed: requirements-deploy.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-deploy.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

# The developers' venv: the same pins, installed by uv (tools/uv.sh, pinned in tools/versions.env, from PyPI into
# ~/.cache/spark-llm/uv) in ~8 s where pip took ~43 with one core busy, the first thing a fresh clone's `make test`
# waited on. Into the venv `make deploy-venv` made, if any, else a new one on this machine's python3, as
# `python3 -m venv` makes it (made again over what an interrupted make left). Bytecode compiled at install, as pip
# does: the first program runs do not each compile the Pulumi SDK.
$(VENV)/.installed: requirements.txt requirements-deploy.txt pyproject.toml
	[ -x $(PY) ] && [ -f $(VENV)/pyvenv.cfg ] || \
	  tools/uv.sh venv -q --allow-existing --python "$$(python3 -c 'import sys; print(sys.executable)')" $(VENV)
	tools/uv.sh pip install -q --compile-bytecode --python $(PY) -r requirements.txt -e .
	touch $(VENV)/.deploy-installed $@

venv: $(VENV)/.installed ## the project venv with pinned Python packages (the developers' tools included)

deploy-venv: $(VENV)/.deploy-installed ## the project venv with what deploying needs only (requirements-deploy.txt)

pulumi: ## the pinned Pulumi CLI, its Python language host and the command/docker providers
	tools/build-pulumi.sh >/dev/null
	$(ENV); tools/build-plugins.sh >/dev/null

deploy-deps: ## check ssh, rsync and python3-venv are there (installs nothing: names the apt-get command)
	tools/deploy-deps.sh

# Deploying needs no root: the venv in this checkout (the program's packages only: requirements-deploy.txt), the CLI
# and plugins in your home. Order matters (make runs prerequisites left to right): the check first, so a missing
# ssh stops before anything is installed.
deploy-tools: deploy-deps deploy-venv pulumi ## what deploying needs, no root: venv, Pulumi CLI, plugins in your home
	@$(ENV); echo "pulumi $$(pulumi version) at $$(command -v pulumi)"; pulumi plugin ls

tools: system-deps venv pulumi ## everything developing needs (as root: Debian packages for the sim and tests)
	@$(ENV); echo "pulumi $$(pulumi version) at $$(command -v pulumi)"; pulumi plugin ls

lint: system-deps venv ## ruff, mypy, import-linter (the layers), shellcheck, generated docs up to date
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy spark_llm components scripts/manifest.py scripts/fanout.py scripts/fanout_schedule.py scripts/fanout_transport.py scripts/supervisor.py scripts/supervisor_node.py __main__.py
	$(VENV)/bin/lint-imports --no-cache
	shellcheck -x $$(git ls-files '*.sh' .ci/run)
	$(PY) -m spark_llm.config.schema_docs --check

# Unit tests spread over UNIT_WORKERS processes (pytest-xdist): each test is independent (temp dirs, mocks). Three on
# two cores: the stand-in engine's tests wait on rendezvous timeouts (one run: 92.6 s with 2, 76.3 with 3, 82.1 with 4).
UNIT_WORKERS ?= 3
unit: venv ## tests without network or cluster
	$(ENV); $(PY) -m pytest -q -m "not integration" -n $(UNIT_WORKERS) tests/unit

# Test files spread over INTEGRATION_WORKERS pytest-xdist workers, each with a sim of its own (a file's tests share
# its module-scoped deployment, so whole files go to one worker). The engine is started once before the workers
# (docker-engine.sh also locks, for anyone who runs pytest directly). Three on two cores: a test spends much of its
# time waiting (a container's startup grace, a rendezvous, ssh), which a third sim fills.
# The longest files go first (tests/integration/schedule.py, hence --no-loadscope-reorder): the short ones fill the
# end, where a long one left a worker running alone.
INTEGRATION_WORKERS ?= 3
# CMDLOG=FILE: a line per command the tests run, with its wall and CPU seconds, and per test phase with its worker and
# times (tests/integration/conftest.py).
CMDLOG ?=
integration: tools ## tests against the simulated cluster with the real pulumi CLI (INTEGRATION_WORKERS sims at once)
	$(ENV); sim/docker-engine.sh ensure; SPARK_LLM_TEST_CMDLOG=$(CMDLOG) $(PY) -m pytest -q -m integration -n $(INTEGRATION_WORKERS) --dist loadfile --no-loadscope-reorder --durations=40 tests/integration

test: tools lint unit integration ## everything CI runs (installs what is missing first)

sim-up: tools ## bring up the simulated cluster (1 head + WORKERS workers)
	$(ENV); sim/sim up --workers $${WORKERS:-1}

sim-down: ## remove the simulated cluster
	$(ENV); sim/sim down

demo: tools ## simulated cluster + pulumi up --stack sim + one completion
	$(ENV); tools/demo.sh

docs: venv ## regenerate the config table in docs/configuration.md and the declarations in Pulumi.yaml
	$(PY) -m spark_llm.config.schema_docs --write

clean: ## remove the venv and local state (not the tool cache)
	rm -rf $(VENV) .pulumi-state .pytest_cache .mypy_cache .ruff_cache
