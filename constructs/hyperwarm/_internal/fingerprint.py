"""One hash of CloudFormation resources' synthesized properties: it changes whenever one of them does."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import aws_cdk as cdk


def properties_digest(resources: Sequence[cdk.CfnResource], resolve: Callable[[Any], Any]) -> str:
    """The hash of ``resources``' properties as ``resolve`` (a stack's or a resolve context's) gives them: the deploy
    guard's fingerprint of what it protects, an endpoint's of what it deploys (``deployed_fingerprint``)."""
    properties = [resolve(r._cfn_properties) for r in resources]  # jsii's protected getter
    return hashlib.sha256(json.dumps(properties, sort_keys=True, default=str).encode()).hexdigest()[:16]
