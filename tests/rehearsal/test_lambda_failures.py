"""lambda.async-failure-destination: asynchronously invoked functions keep their failures."""

from __future__ import annotations

from typing import Any

import pytest

from rehearsal import Assembly
from rehearsal.rules.lambda_failures import async_failure_destination, custom_resource_no_retries

FUNCTION = {"Type": "AWS::Lambda::Function", "Properties": {"Handler": "h.handler"}}
ARN = {"Fn::GetAtt": ["Fn", "Arn"]}


def invoke_config(qualifier: str = "$LATEST", on_failure: bool = True) -> dict[str, Any]:
    props: dict[str, Any] = {"FunctionName": {"Ref": "Fn"}, "Qualifier": qualifier, "MaximumRetryAttempts": 2}
    if on_failure:
        props["DestinationConfig"] = {"OnFailure": {"Destination": {"Fn::GetAtt": ["Dlq", "Arn"]}}}
    return {"Type": "AWS::Lambda::EventInvokeConfig", "Properties": props}


INVOKERS = {
    "rule": {"Type": "AWS::Events::Rule", "Properties": {"Targets": [{"Id": "t", "Arn": ARN,
                                                                      "DeadLetterConfig": {"Arn": "q"}}]}},
    "bucket": {"Type": "AWS::S3::Bucket", "Properties": {"NotificationConfiguration": {
        "LambdaConfigurations": [{"Event": "s3:ObjectCreated:*", "Function": ARN}]}}},
    "cdk-notifications": {"Type": "Custom::S3BucketNotifications", "Properties": {"NotificationConfiguration": {
        "LambdaFunctionConfigurations": [{"Events": ["s3:ObjectCreated:*"], "LambdaFunctionArn": ARN}]}}},
    "subscription": {"Type": "AWS::SNS::Subscription", "Properties": {"Protocol": "lambda", "Endpoint": ARN}},
    "topic": {"Type": "AWS::SNS::Topic", "Properties": {"Subscription": [{"Protocol": "lambda", "Endpoint": ARN}]}},
}


def findings(**resources: dict[str, Any]) -> list[str]:
    return [f"{f.resource}: {f.message}" for f in async_failure_destination(
        Assembly.from_templates({"s": {"Resources": {"Fn": FUNCTION, **resources}}}))]


@pytest.mark.parametrize("invoker", sorted(INVOKERS))
def test_an_async_target_without_a_failure_destination_is_reported(invoker: str) -> None:
    (finding,) = findings(Invoker=INVOKERS[invoker])
    assert finding.startswith("Fn: invoked asynchronously by Invoker") and "EventInvokeConfig" in finding


@pytest.mark.parametrize("invoker", sorted(INVOKERS))
def test_an_on_failure_destination_satisfies_the_rule(invoker: str) -> None:
    assert findings(Invoker=INVOKERS[invoker], Config=invoke_config()) == []


def test_a_function_dead_letter_config_satisfies_the_rule() -> None:
    function = {"Type": "AWS::Lambda::Function", "Properties": {"DeadLetterConfig": {"TargetArn": "arn:q"}}}
    assert async_failure_destination(Assembly.from_templates(
        {"s": {"Resources": {"Fn": function, "Invoker": INVOKERS["rule"]}}})) == []


def test_a_retry_config_without_on_failure_or_for_another_qualifier_does_not() -> None:
    assert len(findings(Invoker=INVOKERS["rule"], Config=invoke_config(on_failure=False))) == 1
    assert len(findings(Invoker=INVOKERS["rule"], Config=invoke_config(qualifier="live"))) == 1


def test_functions_invoked_synchronously_are_not_checked() -> None:
    custom = {"Type": "AWS::CloudFormation::CustomResource", "Properties": {"ServiceToken": ARN}}
    assert findings(Custom=custom) == []


def test_a_function_invoked_from_another_stack_through_an_export_is_checked() -> None:
    exporter = {"Resources": {"Fn": FUNCTION},
                "Outputs": {"FnArn": {"Value": ARN, "Export": {"Name": "functions:FnArn"}}}}
    rule = {"Type": "AWS::Events::Rule", "Properties": {"Targets": [
        {"Id": "t", "Arn": {"Fn::ImportValue": "functions:FnArn"}}]}}
    templates = {"functions": exporter, "events": {"Resources": {"Rule": rule}}}
    (finding,) = async_failure_destination(Assembly.from_templates(templates))
    assert (finding.stack, finding.resource) == ("functions", "Fn") and "by events/Rule" in finding.message
    exporter["Resources"]["Config"] = invoke_config()
    assert async_failure_destination(Assembly.from_templates(templates)) == []


def test_a_schedule_only_rule_needs_no_failure_destination() -> None:
    schedule = {"Type": "AWS::Events::Rule", "Properties": {"ScheduleExpression": "rate(1 minute)",
                                                            "Targets": [{"Id": "t", "Arn": ARN}]}}
    assert findings(Invoker=schedule) == []
    patterned = {"Type": "AWS::Events::Rule", "Properties": {
        "ScheduleExpression": "rate(1 minute)", "EventPattern": {"source": ["aws.s3"]},
        "Targets": [{"Id": "t", "Arn": ARN}]}}
    assert len(findings(Invoker=patterned)) == 1  # events that carry data must still be kept


# lambda.custom-resource-no-retries

GUARD_FUNCTION = {"Type": "AWS::Lambda::Function",
                  "Properties": {"Handler": "hyperwarm.functions.cache_refresh.deploy_guard.on_event"}}
GUARD = {"Type": "Custom::RefreshGuard", "Properties": {"ServiceToken": ARN}}


def _retries(*extra: dict[str, Any]) -> list[str]:
    resources = {"Fn": GUARD_FUNCTION, "Guard": GUARD, **{f"Config{i}": r for i, r in enumerate(extra)}}
    return [f.message for f in custom_resource_no_retries(Assembly.from_templates({"s": {"Resources": resources}}))]


def test_a_hyperwarm_custom_resource_function_that_lambda_may_retry_is_reported() -> None:
    (message,) = _retries()
    assert "MaximumRetryAttempts unset: 2" in message and "set retry_attempts=0" in message
    (message,) = _retries(invoke_config())  # two retries
    assert "MaximumRetryAttempts [2]" in message
    no_retries = invoke_config()
    no_retries["Properties"]["MaximumRetryAttempts"] = 0
    assert _retries(no_retries) == []


def test_the_synthesized_guards_are_never_retried(synthesized) -> None:
    assembly = Assembly.from_outdir(synthesized.outdir)
    assert custom_resource_no_retries(assembly) == []
    assert any(r.get("Type") == "Custom::RefreshGuard" for _, _, r in assembly.resources())
