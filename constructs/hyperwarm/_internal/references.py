"""Cross-stack references that read stack outputs, so the producing stack stays free to change."""

from __future__ import annotations

import aws_cdk as cdk
import jsii
from constructs import IConstruct

from hyperwarm._internal.kinds import is_a


def read_through_outputs(scope: IConstruct, strength: cdk.ReferenceStrength = cdk.ReferenceStrength.BOTH) -> None:
    """Every reference from another stack to a resource under ``scope`` is made with ``strength``. An imported
    export pins its producer: the producing stack could no longer remove, rename or replace what another stack
    imports ("Export ... cannot be deleted as it is in use"). ``WEAK`` reads ``Fn::GetStackOutput`` and pins
    nothing; ``BOTH`` (default) also keeps the exports that stacks deployed earlier import, until those stacks
    deploy again.

    An aspect on ``scope``: resources added later are covered, those other aspects add during synth too (a walk
    of the tree at synth, as :func:`retain_except_on_create` makes, would miss those; references are resolved
    after every aspect)."""
    cdk.Aspects.of(scope).add(_ReadThroughOutputs(strength))


@jsii.implements(cdk.IAspect)
class _ReadThroughOutputs:
    def __init__(self, strength: cdk.ReferenceStrength) -> None:
        self._strength = strength

    def visit(self, node: IConstruct) -> None:
        if is_a(node, cdk.CfnResource):
            node.apply_cross_stack_reference_strength(self._strength)
