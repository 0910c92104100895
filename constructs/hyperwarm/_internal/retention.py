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
from constructs import IConstruct


def retain_except_on_create(scope: IConstruct) -> None:
    """Every resource under ``scope`` that aws-cdk-lib or anyone retains (``DeletionPolicy: Retain``, the
    default of log groups, keys, buckets and tables) is retained except when its first create rolls back."""
    cdk.Aspects.of(scope).add(_ExceptOnCreate(), priority=cdk.AspectPriority.MUTATING)


@jsii.implements(cdk.IAspect)
class _ExceptOnCreate:
    def visit(self, node: IConstruct) -> None:
        if isinstance(node, cdk.CfnResource) and node.cfn_options.deletion_policy == cdk.CfnDeletionPolicy.RETAIN:
            node.cfn_options.deletion_policy = cdk.CfnDeletionPolicy.RETAIN_EXCEPT_ON_CREATE
