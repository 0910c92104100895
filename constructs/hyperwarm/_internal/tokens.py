"""Token checks for the pure rule modules, which must load without aws-cdk (the cdk.json models and the
deploy rehearsal import them). A token only exists once aws_cdk is loaded, so without it nothing is one."""

from __future__ import annotations

import sys
from typing import Any


def unresolved(value: Any) -> bool:
    """Whether ``value`` is a CDK token (a deploy-time value that synth-time checks must skip)."""
    cdk = sys.modules.get("aws_cdk")
    return cdk is not None and value is not None and bool(cdk.Token.is_unresolved(value))


def resolved(value: Any) -> bool:
    """Whether ``value`` is given and known at synth, so it can be checked."""
    return value is not None and not unresolved(value)
