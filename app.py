#!/usr/bin/env python3
"""CDK entry point: ``cdk synth`` / ``cdk deploy`` (one environment with ``-c env=NAME``)."""
from stacks.app import build_app

build_app().synth()
