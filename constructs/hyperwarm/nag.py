"""cdk-nag acknowledgments, kept next to the resource they excuse, each with its reason.

cdk-nag 3 matches an acknowledgment to a finding's exact id, so wildcard findings are named in
full (``IAM5[Action::s3:GetObject*]``); an acknowledgment covers the scope and its children.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import IConstruct


def acknowledge(scope: IConstruct, reason: str, *rules: str) -> None:
    """Acknowledge AwsSolutions ``rules`` (e.g. ``S1``, ``IAM5[Resource::*]``) on ``scope`` for ``reason``."""
    if len(reason) < 30:
        raise ValueError(f"acknowledgment of {rules} on {scope.node.path} needs a specific reason, got {reason!r}")
    for rule in rules:
        cdk.Validations.of(scope).acknowledge(
            cdk.Acknowledgment(id=f"AwsSolutions::AwsSolutions-{rule}", reason=reason))


def managed_policy(name: str) -> str:
    """The finding id of AWS-managed policy ``name`` (e.g. ``service-role/AWSLambdaBasicExecutionRole``)."""
    return f"IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]"


def logical_id(construct: IConstruct) -> str:
    """The logical id cdk-nag prints for ``construct``'s CloudFormation resource."""
    resource = construct.node.default_child or construct
    return cdk.Stack.of(construct).resolve(resource.logical_id)  # type: ignore[attr-defined]


def object_arn_finding(bucket: s3.IBucket, key_pattern: str) -> str:
    """How cdk-nag prints ``bucket.arn_for_objects(key_pattern)`` in a finding id."""
    if cdk.Token.is_unresolved(bucket.bucket_name):
        return f"<{logical_id(bucket)}.Arn>/{key_pattern}"
    return f"arn:<AWS::Partition>:s3:::{bucket.bucket_name}/{key_pattern}"
