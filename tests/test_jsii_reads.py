"""Synth-time reads answered in Python (docs/performance.md, "Synth time"): each must give what asking aws-cdk-lib
through jsii gives, and ask it less often."""

from __future__ import annotations

import collections
from collections.abc import Iterator

import aws_cdk as cdk
import jsii
import pytest
from aws_cdk import aws_cloudwatch as cloudwatch, aws_iam as iam, aws_lambda as lambda_, aws_s3 as s3
from constructs import Construct, IConstruct
from jsii_requests import counted

from hyperwarm import read_through_outputs
from hyperwarm._internal.constraints import gigabytes, in_gigabytes, in_seconds, is_token, seconds
from hyperwarm._internal.kinds import is_a, resource_type, stack_of
from hyperwarm._internal.nag import acknowledge_checkov


@pytest.fixture
def requests() -> Iterator[collections.Counter[str]]:
    """The jsii requests made while the test runs."""
    with counted() as requests:
        yield requests


def _app() -> tuple[cdk.Stack, list[object]]:
    stack = cdk.Stack(cdk.App(), "S")
    bucket = s3.Bucket(stack, "B")
    lambda_.Function(stack, "F", runtime=lambda_.Runtime.PYTHON_3_12, handler="i.h",
                     code=lambda_.Code.from_inline("def h(e, c): pass"))
    cloudwatch.Alarm(stack, "A", metric=cloudwatch.Metric(namespace="N", metric_name="M"), threshold=1,
                     evaluation_periods=1)
    cdk.CfnResource(stack, "Plain", type="AWS::SQS::Queue")
    iam.Role.from_role_arn(stack, "Imported", "arn:aws:iam::123456789012:role/r")
    plain = stack.node.find_child("Plain")
    return stack, [*stack.node.find_all(), bucket.grant_read(iam.AccountRootPrincipal()).principal_statement,
                   iam.ArnPrincipal("arn:aws:iam::123456789012:role/r"), plain.cfn_options,  # a jsii interface proxy
                   "a string", None, 3]


@pytest.mark.parametrize("cls", [cdk.CfnResource, cdk.Stack, Construct, cloudwatch.CfnAlarm, s3.Bucket,
                                 lambda_.CfnFunction, iam.ArnPrincipal, cdk.CfnCondition, cdk.Resource])
def test_is_a_answers_as_isinstance_does(cls: type) -> None:
    _, values = _app()
    assert [is_a(v, cls) for v in values] == [isinstance(v, cls) for v in values]
    assert any(is_a(v, cls) for v in values) or cls is cdk.CfnCondition


def test_resource_type_is_the_resources_own_and_read_once_per_class(requests: collections.Counter[str]) -> None:
    stack, _ = _app()
    resources = [c for c in stack.node.find_all() if is_a(c, cdk.CfnResource)]
    requests.clear()
    found = [resource_type(r) for r in resources]
    assert requests["get .cfnResourceType"] == 1  # the plain CfnResource; each L1 class's type was read before
    assert found == [r.cfn_resource_type for r in resources]
    assert "AWS::SQS::Queue" in found and "AWS::Lambda::Function" in found


def test_stack_of_asks_once_per_construct(requests: collections.Counter[str]) -> None:
    stack, _ = _app()
    bucket = stack.node.find_child("B")
    requests.clear()
    assert stack_of(bucket) is stack_of(bucket) and stack_of(bucket).node.path == stack.node.path
    assert requests["sinvoke Stack.of"] == 1


def test_a_duration_or_size_is_read_once_and_one_made_from_a_number_never(
        requests: collections.Counter[str]) -> None:
    given = cdk.Duration.minutes(2)
    requests.clear()
    assert in_seconds(given) == in_seconds(given) == 120.0 and not is_token(given) and not is_token(given)
    assert requests["invoke .toSeconds"] == 1 and requests["invoke .isUnresolved"] == 1
    parsed, size = seconds().make(90), gigabytes(145)
    requests.clear()
    assert in_seconds(parsed) == 90.0 and in_gigabytes(size) == 145.0 and not is_token(parsed)
    assert sum(requests.values()) == 0
    assert in_seconds(seconds(fractional=True).make(0.75)) == 0.75  # made as milliseconds: read from aws-cdk-lib


def test_a_token_duration_stays_a_token() -> None:
    duration = cdk.Duration.seconds(cdk.Token.as_number(cdk.Fn.ref("Wait")))
    assert is_token(duration) and is_token(duration)


def test_checkov_acknowledgments_add_up_on_one_resource() -> None:
    """Whoever wrote the resource's skips before, and through whichever Python object: jsii gives a new one for
    each reference it returns (``fn.node.default_child is fn.node.default_child`` is false)."""
    stack = cdk.Stack(cdk.App(), "S")
    function = lambda_.Function(stack, "F", runtime=lambda_.Runtime.PYTHON_3_12, handler="i.h",
                                code=lambda_.Code.from_inline("def h(e, c): pass"))
    held = function.node.default_child
    assert held is not function.node.default_child and is_a(held, cdk.CfnResource)
    held.add_metadata("checkov", {"skip": [{"id": "CKV_AWS_1", "comment": "written before, by someone else"}]})
    acknowledge_checkov(held, "the first reason, long enough to say why", "CKV_AWS_2")
    acknowledge_checkov(function, "the second reason, long enough to say why", "CKV_AWS_3")
    written = held.get_metadata("checkov")
    held.add_metadata("checkov", {"skip": [*written["skip"], {"id": "CKV_USER", "comment": "a user's, in between"}]})
    acknowledge_checkov(held, "the third reason, long enough to say why", "CKV_AWS_4", "CKV_AWS_2")
    skips = {s["id"]: s["comment"] for s in function.node.default_child.get_metadata("checkov")["skip"]}
    assert skips == {"CKV_AWS_1": "written before, by someone else",
                     "CKV_AWS_2": "the third reason, long enough to say why",
                     "CKV_AWS_3": "the second reason, long enough to say why",
                     "CKV_USER": "a user's, in between",
                     "CKV_AWS_4": "the third reason, long enough to say why"}


@jsii.implements(cdk.IAspect)
class _AddsABucket:
    """An aspect that adds a bucket during synth, which another stack reads."""

    def __init__(self, reader: cdk.Stack) -> None:
        self.reader, self.done = reader, False

    def visit(self, node: IConstruct) -> None:
        if not self.done and node.node.id == "Later":
            self.done = True
            cdk.CfnOutput(self.reader, "AddedDuringSynth", value=s3.CfnBucket(node, "B").ref)


def test_references_into_a_scope_read_its_outputs_with_resources_added_later() -> None:
    app = cdk.App(context={"@aws-cdk/core:aspectStabilization": True})  # aspects by priority (cdk.json sets it)
    producer, consumer = cdk.Stack(app, "Producer"), cdk.Stack(app, "Consumer")
    read_through_outputs(producer, cdk.ReferenceStrength.WEAK)
    bucket = s3.Bucket(producer, "B")  # after the call
    cdk.CfnOutput(consumer, "Name", value=bucket.bucket_name)
    cdk.Aspects.of(Construct(producer, "Later")).add(_AddsABucket(consumer))  # a resource made during synth
    assembly = app.synth()
    outputs = assembly.get_stack_by_name("Consumer").template["Outputs"]
    assert all("Fn::GetStackOutput" in outputs[name]["Value"] for name in ("Name", "AddedDuringSynth")), outputs
    assert not any("Export" in o for o in assembly.get_stack_by_name("Producer").template.get("Outputs", {}).values())
