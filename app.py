#!/usr/bin/env python3
"""CDK entry point: ``cdk synth`` / ``cdk deploy`` (one environment with ``-c env=NAME``; the deployed
templates to compare with, ``-c baseline=...``: see stacks/baseline.py)."""
import hyperwarm  # noqa: F401  (first: it points jsii at the Node that hyperwarm installs)
from stacks.app import build_app
from stacks.baseline import synthesize
from stacks.errors import exit_on_config_error

with exit_on_config_error():
    synthesize(build_app())
