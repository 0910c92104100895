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

from hyperwarm._internal.aspects import at_synth
from hyperwarm._internal.kinds import is_a


def retain_except_on_create(scope: IConstruct) -> None:
    """Every resource under ``scope`` that aws-cdk-lib or anyone retains (``DeletionPolicy: Retain``, the
    default of log groups, keys, buckets and tables) is retained except when its first create rolls back;
    applied at synth, so resources the app adds after this call are covered (not those another aspect adds
    during synth: :mod:`hyperwarm._internal.aspects`)."""
    at_synth(scope, "RetainExceptOnCreate", _except_on_create)


def _except_on_create(constructs: list[IConstruct]) -> None:
    for resource in constructs:
        if is_a(resource, cdk.CfnResource):
            # Typed as the interface it is: jsii's generic proxy would read each property twice (a round trip each).
            options = jsii.unsafe_cast(resource.cfn_options, cdk.ICfnResourceOptions)
            if options.deletion_policy == cdk.CfnDeletionPolicy.RETAIN:
                options.deletion_policy = cdk.CfnDeletionPolicy.RETAIN_EXCEPT_ON_CREATE
