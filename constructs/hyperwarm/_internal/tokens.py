"""Token checks for the pure rule modules, which must load without aws-cdk (the cdk.json models and the
deploy rehearsal import them). A token only exists once aws_cdk is loaded, so without it nothing is one."""

from __future__ import annotations

import sys
from typing import Any

_STRING_MARKERS = ("${Token[", "#{Token[")
"""How aws-cdk-lib encodes a token in a string and in a string list's element (``Token.as_string``,
``Token.as_list``): a string without either holds none."""


def unresolved(value: Any) -> bool:
    """Whether ``value`` is a CDK token (a deploy-time value that synth-time checks must skip). A plain string,
    integer or bool is answered here: asking aws-cdk-lib costs a call into jsii (hundreds per synth)."""
    cdk = sys.modules.get("aws_cdk")
    if cdk is None or value is None or isinstance(value, int):  # bool is an int; number tokens are floats
        return False
    if isinstance(value, str) and not any(marker in value for marker in _STRING_MARKERS):
        return False
    return bool(cdk.Token.is_unresolved(value))


def resolved(value: Any) -> bool:
    """Whether ``value`` is given and known at synth, so it can be checked."""
    return value is not None and not unresolved(value)
