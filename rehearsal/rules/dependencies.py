"""Resources named by literal string: CloudFormation cannot see the reference, so nothing orders it.

A `Ref` or `Fn::GetAtt` makes CloudFormation create the target first. A name written as a string
(`endpoint/chat/variant/kv`, `s3://models/llama/v1/`, `arn:aws:s3:::models/*`) does not: the reader
is created whenever CloudFormation likes, possibly before the thing it names, and fails or rolls
back. These rules find every such name and demand a dependency path to its creator, across stacks
through the stack order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from hyperwarm.serving.buckets import EXISTING_BUCKETS_METADATA
from rehearsal.core import Assembly, Finding, rule, strings

_ENDPOINT_RESOURCE_ID = re.compile(r"^endpoint/(?P<name>[^/]+)/variant/")
_BUCKET = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
_END = r"(?=$|[/\"'\s,\]}*])"
_BUCKET_IN_TEXT = (
    re.compile(rf"s3://(?P<name>{_BUCKET}){_END}"),
    re.compile(rf":s3:::(?P<name>{_BUCKET}){_END}"),
    re.compile(rf"\"bucketName\"\s*:\s*\"(?P<name>{_BUCKET})\""),  # kubectl manifests' S3 sources
)
_BUCKET_NAME_KEYS = ("BucketName", "bucketName")


def _as_text(value: Any) -> str:
    """A ResourceId as text: literal, `Fn::Sub` template, or `Fn::Join` with its tokens as `${TOKEN}`."""
    if isinstance(value, dict) and "Fn::Sub" in value:
        sub = value["Fn::Sub"]
        return sub if isinstance(sub, str) else str(sub[0]) if isinstance(sub, list) and sub else ""
    if isinstance(value, (str, dict)):
        return next(strings(value), "")
    return ""


def _needs_creator(assembly: Assembly, stack: str, logical_id: str, what: str, name: str,
                   creators: dict[str, list[tuple[str, str]]]) -> Iterator[Finding]:
    rule_id = f"dependencies.{what}-names"
    for creator_stack, creator_id in creators.get(name, []):
        if not assembly.created_before(stack, logical_id, creator_stack, creator_id):
            how = (f"make stack {stack} depend on {creator_stack}" if creator_stack != stack
                   else f"add DependsOn: {creator_id}")
            yield Finding(rule_id, stack, logical_id,
                          f"names {what} {name!r} by string, which {creator_stack}/{creator_id} creates, with no "
                          f"dependency path to it: CloudFormation may create this first; {how}")


@rule("dependencies.endpoint-names",
      source="https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
             "aws-resource-applicationautoscaling-scalabletarget.html")
def endpoint_names(assembly: Assembly) -> Iterator[Finding]:
    """A SageMaker endpoint named by string (a ScalableTarget's `endpoint/<name>/variant/<v>` ResourceId,
    an inference component's EndpointName) has a dependency path to the `AWS::SageMaker::Endpoint`
    that creates it. The ScalableTarget reference says to add a dependency on the scaled resource:
    otherwise registration races the 10-40 minute endpoint creation and the stack rolls back."""
    creators: dict[str, list[tuple[str, str]]] = {}
    for stack, logical_id, resource in assembly.resources("AWS::SageMaker::Endpoint"):
        name = resource.get("Properties", {}).get("EndpointName")
        if isinstance(name, str):
            creators.setdefault(name, []).append((stack, logical_id))
    named: list[tuple[str, str, str]] = []
    for stack, logical_id, resource in assembly.resources("AWS::ApplicationAutoScaling::ScalableTarget"):
        props = resource.get("Properties", {})
        match = _ENDPOINT_RESOURCE_ID.match(_as_text(props.get("ResourceId"))) \
            if props.get("ServiceNamespace") == "sagemaker" else None
        if match and "${" in match["name"]:  # built from tokens: it must still wait for an endpoint
            if not any(assembly.created_before(stack, logical_id, s, e)
                       for s, e, _ in assembly.resources("AWS::SageMaker::Endpoint")):
                yield Finding("dependencies.endpoint-names", stack, logical_id,
                              f"names endpoint {match['name']!r} through an expression with no dependency path to "
                              "any AWS::SageMaker::Endpoint: CloudFormation may register it before the endpoint "
                              "exists; add DependsOn on the endpoint")
        elif match:
            named.append((stack, logical_id, match["name"]))
    for stack, logical_id, resource in assembly.resources("AWS::SageMaker::InferenceComponent"):
        name = resource.get("Properties", {}).get("EndpointName")
        if isinstance(name, str):
            named.append((stack, logical_id, name))
    for stack, logical_id, name in named:
        if name not in creators:
            yield Finding("dependencies.endpoint-names", stack, logical_id,
                          f"names endpoint {name!r}, which no stack of the assembly creates")
        yield from _needs_creator(assembly, stack, logical_id, "endpoint", name, creators)


def bucket_references(resource: dict[str, Any]) -> set[str]:
    """Bucket names a resource writes as literal strings: S3 URIs, S3 ARNs, `BucketName`/`bucketName`
    values (CloudFormation properties and Kubernetes manifests). Names with tokens in them are skipped."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in _BUCKET_NAME_KEYS and isinstance(item, str) and re.fullmatch(_BUCKET, item):
                    found.add(item)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    props = resource.get("Properties", {})
    if resource.get("Type") == "AWS::S3::Bucket":  # its own name creates, it does not read
        props = {k: v for k, v in props.items() if k != "BucketName"}
    walk(props)
    for text in strings(props):
        for pattern in _BUCKET_IN_TEXT:
            found.update(m["name"] for m in pattern.finditer(text))
    return found


def existing_buckets(template: dict[str, Any]) -> set[str]:
    """Buckets a template declares to exist before it deploys (`Metadata.hyperwarm:existingBuckets`)."""
    return set(template.get("Metadata", {}).get(EXISTING_BUCKETS_METADATA, ()))


@rule("dependencies.bucket-names",
      source="https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-dependson.html")
def bucket_names(assembly: Assembly) -> Iterator[Finding]:
    """A bucket named by string (model data URLs, IAM resources, bucket-notification and kubectl
    manifests' S3 sources) is either created in the assembly by an `AWS::S3::Bucket` that CloudFormation
    creates first (the stack order, or DependsOn within a stack), or declared pre-existing: no creator
    anywhere in the assembly AND the reading stack lists it under `Metadata.hyperwarm:existingBuckets`
    (hyperwarm writes that from cdk.json's `model_buckets`). CloudFormation only orders what a template
    references (DependsOn attribute reference); SageMaker fails a model whose data it cannot read."""
    creators: dict[str, list[tuple[str, str]]] = {}
    for stack, logical_id, resource in assembly.resources("AWS::S3::Bucket"):
        name = resource.get("Properties", {}).get("BucketName")
        if isinstance(name, str):
            creators.setdefault(name, []).append((stack, logical_id))
    for stack, logical_id, resource in assembly.resources():
        existing = existing_buckets(assembly.templates[stack])
        for name in sorted(bucket_references(resource)):
            if name in creators and name in existing:
                creator = "/".join(creators[name][0])
                yield Finding("dependencies.bucket-names", stack, logical_id,
                              f"bucket {name!r} is declared existing but {creator} creates it: declare it one way")
            elif name not in creators and name not in existing:
                yield Finding("dependencies.bucket-names", stack, logical_id,
                              f"names bucket {name!r}, which no stack of the assembly creates and stack {stack} "
                              f"does not declare existing (Metadata {EXISTING_BUCKETS_METADATA}); create it in a "
                              "stack that deploys first, or declare it in cdk.json model_buckets")
            else:
                yield from _needs_creator(assembly, stack, logical_id, "bucket", name, creators)
