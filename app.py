#!/usr/bin/env python3
"""CDK entry point: ``cdk synth`` / ``cdk deploy`` (one environment with ``-c env=NAME``; the deployed
templates to compare with, ``-c baseline=...``: see stacks/baseline.py)."""
# Run through `python -m hyperwarm.run app.py` (cdk.json): jsii's Node is chosen before anything is imported.
from stacks.app import build_app, freeze_imports
from stacks.baseline import synthesize
from stacks.errors import exit_on_config_error

freeze_imports()
with exit_on_config_error():
    synthesize(build_app())
