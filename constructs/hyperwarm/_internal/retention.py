"""Retained resources go when the create that made them rolls back: ``RetainExceptOnCreate``, not ``Retain``.

CloudFormation keeps a resource whose DeletionPolicy is ``Retain`` even when the stack operation that
created it rolls back: a failed first create leaves it outside any stack, nameless and billing (a GPU
cluster, a bucket, a key, a log group). ``RetainExceptOnCreate`` retains it on every other operation,
stack deletion included, and deletes it only then; existing resources a stack imports are retained too
(CloudFormation, "DeletionPolicy attribute"). ``UpdateReplacePolicy`` has no such value and stays
``Retain`` (``cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE`` writes both).
"""

from __future__ import annotations

import aws_cdk as cdk
import jsii
from constructs import Construct, IConstruct


def retain_except_on_create(stack: cdk.Stack) -> None:
    """Every resource in ``stack`` that aws-cdk-lib or anyone retains (``DeletionPolicy: Retain``, the
    default of log groups, keys, buckets and tables) is retained except when its first create rolls back.

    Applied at synth, so resources added later are covered. The aspect sits on a construct of its own with no
    children and walks the stack once when visited: on the stack itself, jsii would call into Python for
    every construct of it (~500 callbacks for prod; synth time, docs/performance.md)."""
    cdk.Aspects.of(Construct(stack, "RetainExceptOnCreate")).add(_ExceptOnCreate(stack),
                                                                priority=cdk.AspectPriority.MUTATING)


@jsii.implements(cdk.IAspect)
class _ExceptOnCreate:
    def __init__(self, stack: cdk.Stack) -> None:
        self._stack = stack

    def visit(self, node: IConstruct) -> None:
        for resource in self._stack.node.find_all():
            if isinstance(resource, cdk.CfnResource):
                options = resource.cfn_options
                if options.deletion_policy == cdk.CfnDeletionPolicy.RETAIN:
                    options.deletion_policy = cdk.CfnDeletionPolicy.RETAIN_EXCEPT_ON_CREATE
