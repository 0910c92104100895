"""Endpoints plug into aws-cdk-lib: a created and an imported endpoint are ``aws_sagemaker.IEndpoint``s, so
API Gateway's ``SagemakerIntegration`` (and anything else that takes one) works with them."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_apigateway as apigateway, aws_cloudwatch as cloudwatch, aws_iam as iam, aws_sagemaker as sagemaker
from aws_cdk.assertions import Template
from stand_ins import MODEL

from hyperwarm import (
    IInferenceEndpoint,
    InferenceEndpoint,
    InferenceEndpointProps,
    ProductionVariant,
)

INVOKE = ["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"]


def _stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "Test", env=cdk.Environment(region="us-east-1", account="111122223333"))


def _created(stack: cdk.Stack) -> IInferenceEndpoint:
    return InferenceEndpoint(stack, "Chat", InferenceEndpointProps(
        endpoint_name="chat", variants=[ProductionVariant(name="main", model=MODEL, instance_type="ml.g5.2xlarge",
                                                          instance_count=1)]))


def _imported(stack: cdk.Stack) -> IInferenceEndpoint:
    return InferenceEndpoint.from_endpoint_attributes(stack, "Chat", endpoint_name="Chat-Prod",
                                                      variant_names=["main"])


ENDPOINTS = pytest.mark.parametrize("make", [_created, _imported], ids=["created", "imported"])


def _integration_role_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Statements of the policies attached to the role API Gateway's SageMaker integration assumes."""
    roles = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::IAM::Role"
             and "apigateway.amazonaws.com" in str(r["Properties"]["AssumeRolePolicyDocument"])]
    assert len(roles) == 1, roles
    return [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
            and {"Ref": roles[0]} in r["Properties"]["Roles"]
            for s in r["Properties"]["PolicyDocument"]["Statement"]]


@ENDPOINTS
def test_an_endpoint_is_an_aws_sagemaker_iendpoint(make) -> None:
    endpoint = make(_stack())
    # jsii interfaces support no isinstance: what jsii hands to aws-cdk-lib is what the class declares.
    assert sagemaker.IEndpoint in type(endpoint).__jsii_ifaces__
    assert isinstance(endpoint, cdk.Resource)
    assert isinstance(endpoint, IInferenceEndpoint)


@ENDPOINTS
def test_api_gateway_sagemaker_integration_invokes_that_endpoint_only(make) -> None:
    stack = _stack()
    endpoint = make(stack)
    api = apigateway.RestApi(stack, "Api", cloud_watch_role=False)
    api.root.add_resource("chat").add_method("POST", apigateway.SagemakerIntegration(endpoint))

    template = Template.from_stack(stack).to_json()
    statements = _integration_role_statements(template)
    assert statements, "the integration's role may invoke nothing"
    for statement in statements:
        assert statement["Effect"] == "Allow"
        assert set(_list(statement["Action"])) <= set(INVOKE), statement
        assert stack.resolve(statement["Resource"]) == stack.resolve(endpoint.endpoint_arn)
    assert "sagemaker:InvokeEndpoint" in {a for s in statements for a in _list(s["Action"])}
    (method,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::ApiGateway::Method"]
    uri = stack.resolve(method["Properties"]["Integration"]["Uri"])
    assert "runtime.sagemaker" in str(uri) and "invocations" in str(uri)


def test_the_imported_endpoints_arn_names_it_in_lower_case() -> None:
    """SageMaker ARNs carry endpoint names in lower case: a grant on the mixed-case name would match nothing."""
    stack = _stack()
    endpoint = _imported(stack)
    assert stack.resolve(endpoint.endpoint_arn) == {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, ":sagemaker:us-east-1:111122223333:endpoint/chat-prod"]]}


@ENDPOINTS
def test_iendpoint_metric_takes_the_interfaces_arguments(make) -> None:
    stack = _stack()
    endpoint = make(stack)
    metric = endpoint.metric("Invocations", dimensions_map={"VariantName": "main"}, statistic="Sum",
                             period=cdk.Duration.minutes(1))
    assert isinstance(metric, cloudwatch.Metric)
    assert (metric.namespace, metric.metric_name, metric.statistic) == ("AWS/SageMaker", "Invocations", "Sum")
    assert metric.period.to_seconds() == 60
    assert stack.resolve(metric.dimensions) == {"EndpointName": stack.resolve(endpoint.endpoint_name),
                                                "VariantName": "main"}


@ENDPOINTS
def test_grant_invoke_is_the_iendpoint_grant(make) -> None:
    stack = _stack()
    endpoint = make(stack)
    role = iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())
    endpoint.grant_invoke(role)
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy", {
        "Properties": {"Roles": [{"Ref": stack.get_logical_id(role.node.default_child)}]}}).values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert sorted(_list(statement["Action"])) == INVOKE
    assert stack.resolve(statement["Resource"]) == stack.resolve(endpoint.endpoint_arn)


def _list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value
