"""Security-scanner acknowledgments, kept next to the resource they excuse, each with its reason.

cdk-nag 3 matches an acknowledgment to a finding's exact id, so wildcard findings are named in
full (``IAM5[Action::s3:GetObject*]``); an acknowledgment covers the scope and its children.
checkov reads its acknowledgments from the template itself: ``Metadata.checkov.skip`` on each
CloudFormation resource, and ``checkov.io/skip*`` annotations on each Kubernetes object.
"""

from __future__ import annotations

import json
import re
import weakref

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from constructs import IConstruct

from hyperwarm._internal.acknowledgments import check_reason, checkov_annotations
from hyperwarm._internal.kinds import is_a, resource_type, stack_of
from hyperwarm._internal.tokens import unresolved

__all__ = ["acknowledge", "acknowledge_checkov", "acknowledge_deploy_time_handlers", "checkov_annotations",
           "finding_text", "logical_id", "managed_policy", "object_arn_finding", "stack_singletons"]


def acknowledge(scope: IConstruct, reason: str, *rules: str) -> None:
    """Acknowledge AwsSolutions ``rules`` (e.g. ``S1``, ``IAM5[Resource::*]``) on ``scope`` for ``reason``."""
    check_reason(reason, rules, lambda: scope.node.path)
    validations = _validations.get(scope)
    if validations is None:
        validations = _validations[scope] = cdk.Validations.of(scope)
    validations.acknowledge(  # one call into jsii for all of them (synth time: docs/performance.md)
        *(cdk.Acknowledgment(id=f"AwsSolutions::AwsSolutions-{rule}", reason=reason) for rule in rules))


_validations: weakref.WeakKeyDictionary[IConstruct, cdk.Validations] = weakref.WeakKeyDictionary()
"""Each acknowledged scope's ``Validations``, asked of jsii once."""


def pseudo(value: str, name: str) -> str:
    """How cdk-nag prints a stack's region, account or partition: the value, or ``<AWS::Region>`` while a token."""
    return f"<{name}>" if unresolved(value) else value


def arn_prefix(scope: IConstruct) -> str:
    """How cdk-nag prints the start of an ARN formatted in ``scope``'s stack: ``arn:aws`` where the
    partition is known at synth (``@aws-cdk/core:enablePartitionLiterals`` and a region), else
    ``arn:<AWS::Partition>``."""
    stack = scope if is_a(scope, cdk.Stack) else stack_of(scope)
    prefix = _arn_prefixes.get(stack)
    if prefix is None:  # read once per stack: two jsii round trips, asked ~60 times for prod (docs/performance.md)
        prefix = _arn_prefixes[stack] = f"arn:{pseudo(stack.partition, 'AWS::Partition')}"
    return prefix


_arn_prefixes: weakref.WeakKeyDictionary[cdk.Stack, str] = weakref.WeakKeyDictionary()
"""Each stack's :func:`arn_prefix`: its partition is fixed when it is made."""


def finding_text(scope: IConstruct, value: str) -> str:
    """How cdk-nag prints ``value`` (a string that may hold tokens) in a finding id: an ``Fn::Sub``'s
    ``${AWS::AccountId}`` as ``<AWS::AccountId>``, a ``Ref`` as ``<Name>``. Bootstrap resources (the
    assets bucket) are named so, with the qualifier of the stack's synthesizer."""
    resolved = stack_of(scope).resolve(value)
    if isinstance(resolved, str):
        return resolved
    if isinstance(resolved.get("Fn::Sub"), str):
        return re.sub(r"\$\{([^}]+)\}", r"<\1>", resolved["Fn::Sub"])
    if "Ref" in resolved:
        return f"<{resolved['Ref']}>"
    return json.dumps(resolved, separators=(",", ":"))


def acknowledge_checkov(scope: IConstruct, reason: str, *checks: str, kind: str | None = None) -> None:
    """Acknowledge checkov ``checks`` (e.g. ``CKV_AWS_115``) for ``reason`` in the template, as
    ``Metadata.checkov.skip`` of ``scope``'s own resource (``scope`` or its ``node.default_child``),
    or with ``kind`` (e.g. ``AWS::Lambda::Function``) of every resource of that type in ``scope``'s tree.

    Only resources that exist when this is called are marked: call it after creating them.
    """
    check_reason(reason, checks, lambda: scope.node.path)
    if kind is None:
        own = scope if is_a(scope, cdk.CfnResource) else scope.node.default_child
        resources = [own] if is_a(own, cdk.CfnResource) else []
    else:
        resources = [c for c in scope.node.find_all() if is_a(c, cdk.CfnResource) and resource_type(c) == kind]
    if not resources:
        raise ValueError(f"acknowledgment of {checks} on {scope.node.path}: no CloudFormation resource "
                         + (f"of type {kind} in its tree" if kind else "of its own"))
    for resource in resources:
        # Read every time: jsii gives a new Python object for each JS reference it returns, and anyone may write
        # the metadata, so nothing cached per object would hold the resource's whole list.
        skips = {s["id"]: s for s in (resource.get_metadata("checkov") or {}).get("skip", [])}
        skips.update({check: {"id": check, "comment": reason} for check in checks})
        resource.add_metadata("checkov", {"skip": list(skips.values())})


_DEPLOY_TIME_HANDLER = {
    "CKV_AWS_115": "runs only while CloudFormation deploys this stack; reserved concurrency would only take "
                   "capacity from the account's unreserved pool",
    "CKV_AWS_116": "a custom-resource handler reports its outcome to CloudFormation, which fails the deployment "
                   "on an error; a dead-letter queue would hold events nobody replays",
    "CKV_AWS_173": "its environment holds resource names and ARNs only, no secrets; Lambda encrypts it at rest "
                   "with an AWS-managed key",
    "CKV_AWS_117": "calls only AWS APIs at deploy time and reaches nothing inside the VPC",
}


def acknowledge_deploy_time_handlers(scope: IConstruct) -> None:
    """checkov findings on the deploy-time Lambda handlers in ``scope``: custom-resource providers that only
    CloudFormation invokes (aws-cdk-lib's own, or hyperwarm's like the refresh guard)."""
    resources = [c for c in scope.node.find_all() if is_a(c, cdk.CfnResource)]
    functions = [c for c in resources if resource_type(c) == "AWS::Lambda::Function"]
    if not functions:
        raise ValueError(f"{scope.node.path}: no Lambda function to acknowledge")
    for function in functions:
        passing = {"CKV_AWS_117": getattr(function, "vpc_config", None) is not None,
                   "CKV_AWS_173": getattr(function, "environment", None) is None}
        for check, reason in _DEPLOY_TIME_HANDLER.items():
            if not passing.get(check):
                acknowledge_checkov(function, f"deploy-time custom-resource handler: {reason}", check)
    # The log groups aws-cdk-lib makes for them (@aws-cdk/aws-lambda:useCdkManagedLogGroup).
    for group in (c for c in resources if resource_type(c) == "AWS::Logs::LogGroup"):
        acknowledge_checkov(group, "log group of a deploy-time custom-resource handler: its own deploy logs, no "
                            "secrets; CloudWatch Logs encrypts every log group at rest", "CKV_AWS_158")


def stack_singletons(scope: IConstruct, id_prefix: str) -> list[IConstruct]:
    """aws-cdk-lib's singletons (e.g. custom-resource providers) that ``scope``'s resources put at the stack root."""
    return [c for c in cdk.Stack.of(scope).node.children if c.node.id.startswith(id_prefix)]


def managed_policy(name: str) -> str:
    """The finding id of AWS-managed policy ``name`` (e.g. ``service-role/AWSLambdaBasicExecutionRole``)."""
    return f"IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]"


def logical_id(construct: IConstruct) -> str:
    """The logical id cdk-nag prints for ``construct``'s CloudFormation resource."""
    resource = construct.node.default_child or construct
    return str(stack_of(construct).resolve(resource.logical_id))  # type: ignore[attr-defined]


def object_arn_finding(bucket: s3.IBucket, key_pattern: str) -> str:
    """How cdk-nag prints ``bucket.arn_for_objects(key_pattern)`` in a finding id: a bucket of the app by its
    logical id; an imported one by its name, where a ``Ref`` (a parameter) prints as ``<Name>`` and an
    ``Fn::ImportValue`` as the export's name (as cdk-nag 2 prints them)."""
    name = bucket.bucket_name
    if unresolved(name) and bucket.node.default_child is not None:
        return f"<{logical_id(bucket)}.Arn>/{key_pattern}"
    if unresolved(name):
        resolved = stack_of(bucket).resolve(name)
        imported = resolved.get("Fn::ImportValue") if isinstance(resolved, dict) else resolved
        name = imported if isinstance(imported, str) else finding_text(bucket, name)
    return f"{arn_prefix(bucket)}:s3:::{name}/{key_pattern}"
