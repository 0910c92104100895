#!/usr/bin/env python3
"""CDK entry point: ``cdk synth`` / ``cdk deploy`` (one environment with ``-c env=NAME``)."""
import hyperwarm  # noqa: F401  (first: it points jsii at the Node that hyperwarm installs)
from stacks.app import build_app
from stacks.errors import exit_on_config_error

with exit_on_config_error():
    build_app().synth()
