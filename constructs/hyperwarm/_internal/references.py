"""Cross-stack references that read stack outputs, so the producing stack stays free to change."""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

from hyperwarm._internal.aspects import at_synth
from hyperwarm._internal.kinds import is_a


def read_through_outputs(scope: IConstruct, strength: cdk.ReferenceStrength = cdk.ReferenceStrength.BOTH) -> None:
    """Every reference from another stack to a resource under ``scope`` is made with ``strength``, at synth (so
    resources added later are covered). An imported export pins its producer: the producing stack could no longer
    remove, rename or replace what another stack imports ("Export ... cannot be deleted as it is in use").
    ``WEAK`` reads ``Fn::GetStackOutput`` and pins nothing; ``BOTH`` (default) also keeps the exports that stacks
    deployed earlier import, until those stacks deploy again."""
    def produce(constructs: list[IConstruct]) -> None:
        for resource in constructs:
            if is_a(resource, cdk.CfnResource):
                resource.apply_cross_stack_reference_strength(strength)

    at_synth(scope, "ReadThroughOutputs", produce)
