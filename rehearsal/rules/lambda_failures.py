"""Lambda functions invoked asynchronously keep their failures."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rehearsal.core import Assembly, Finding, ref_target, rule

_FUNCTION = "AWS::Lambda::Function"


def _async_invocations(resources: dict[str, Any]) -> Iterator[tuple[Any, str]]:
    """(reference to the function, invoker logical id) for every asynchronous invoker in one template."""
    for logical_id, resource in resources.items():
        kind, props = resource.get("Type"), resource.get("Properties", {})
        references: list[Any] = []
        if kind == "AWS::Events::Rule" and "ScheduleExpression" in props and "EventPattern" not in props:
            continue  # a schedule's event carries nothing to keep: the next run supersedes a failed one
        if kind == "AWS::Events::Rule":
            references = [t.get("Arn") for t in props.get("Targets", [])]
        elif kind == "AWS::S3::Bucket":
            references = [c.get("Function") for c in
                          props.get("NotificationConfiguration", {}).get("LambdaConfigurations", [])]
        elif kind == "Custom::S3BucketNotifications":  # aws-cdk-lib's handler, S3 API field names
            references = [c.get("LambdaFunctionArn") for c in
                          props.get("NotificationConfiguration", {}).get("LambdaFunctionConfigurations", [])]
        elif kind == "AWS::SNS::Subscription" and props.get("Protocol") == "lambda":
            references = [props.get("Endpoint")]
        elif kind == "AWS::SNS::Topic":
            references = [s.get("Endpoint") for s in props.get("Subscription", []) if s.get("Protocol") == "lambda"]
        for reference in references:
            yield reference, logical_id


def _latest_invoke_configs(resources: dict[str, Any], function: str) -> list[dict[str, Any]]:
    """The properties of ``function``'s ``AWS::Lambda::EventInvokeConfig`` for ``$LATEST``: what an unqualified ARN
    (rules, S3, SNS, CloudFormation's ServiceToken) invokes."""
    return [r.get("Properties", {}) for r in resources.values()
            if r.get("Type") == "AWS::Lambda::EventInvokeConfig"
            and ref_target(r.get("Properties", {}).get("FunctionName")) == function
            and r.get("Properties", {}).get("Qualifier") == "$LATEST"]


def _keeps_failures(resources: dict[str, Any], function: str) -> bool:
    if resources[function].get("Properties", {}).get("DeadLetterConfig", {}).get("TargetArn"):
        return True
    return any(p.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
               for p in _latest_invoke_configs(resources, function))


@rule("lambda.async-failure-destination",
      source="https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html")
def async_failure_destination(assembly: Assembly) -> Iterator[Finding]:
    """A function that EventBridge rules, S3 notifications or SNS subscriptions invoke has an
    on-failure destination (``AWS::Lambda::EventInvokeConfig`` for ``$LATEST`` with
    ``DestinationConfig.OnFailure``) or a ``DeadLetterConfig``.

    These services invoke Lambda asynchronously: a rule target's own dead-letter queue only receives
    events EventBridge could not deliver. An error the function raises is retried twice by Lambda
    and then discarded, unless the function itself names where failed invocations go
    (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html).
    Schedule-only rules are exempt: their events hold no data to replay (watch the function's Errors).
    """
    reported: set[tuple[str, str]] = set()
    for stack, template in assembly.templates.items():
        resources = template.get("Resources", {})
        for reference, invoker in _async_invocations(resources):
            found = assembly.referenced(stack, reference)  # the function may live in another stack
            if found is None or found in reported:
                continue
            function_stack, function = found
            function_resources = assembly.templates[function_stack].get("Resources", {})
            if function_resources.get(function, {}).get("Type") != _FUNCTION:
                continue
            if _keeps_failures(function_resources, function):
                continue
            reported.add(found)
            where = invoker if stack == function_stack else f"{stack}/{invoker}"
            yield Finding("lambda.async-failure-destination", function_stack, function,
                          f"invoked asynchronously by {where} ({resources[invoker]['Type']}) but its "
                          "failures go nowhere: Lambda retries an error twice, then drops the event. Add an "
                          "AWS::Lambda::EventInvokeConfig with DestinationConfig.OnFailure (CDK: "
                          "function.configure_async_invoke(on_failure=...)) or a DeadLetterConfig")


@rule("lambda.custom-resource-no-retries",
      source="https://docs.aws.amazon.com/lambda/latest/dg/services-cloudformation.html")
def custom_resource_no_retries(assembly: Assembly) -> Iterator[Finding]:
    """A hyperwarm function that backs a CloudFormation custom resource (``ServiceToken`` its ARN; its handler under
    ``hyperwarm.functions``) is not retried by Lambda: ``AWS::Lambda::EventInvokeConfig`` with
    ``MaximumRetryAttempts`` 0 for ``$LATEST``.

    CloudFormation invokes the function asynchronously, and Lambda retries an asynchronous invocation that errors or
    times out twice (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html). A retry of a
    request CloudFormation has already given up on runs after the stack moved on (a rollback already answered):
    the deploy guard's late retry would rewrite the record the rollback restored. CloudFormation's own timeout is
    the retry: the stack rolls back and the request is sent again."""
    for stack, template in assembly.templates.items():
        resources = template.get("Resources", {})
        for logical_id, resource in resources.items():
            if not (resource.get("Type", "").startswith("Custom::")
                    or resource.get("Type") == "AWS::CloudFormation::CustomResource"):
                continue
            function = ref_target(resource.get("Properties", {}).get("ServiceToken"))
            handler = str(resources.get(function, {}).get("Properties", {}).get("Handler", ""))
            if function is None or not handler.startswith("hyperwarm.functions."):
                continue
            retries = [p.get("MaximumRetryAttempts") for p in _latest_invoke_configs(resources, function)]
            if retries != [0]:
                yield Finding("lambda.custom-resource-no-retries", stack, logical_id,
                              f"{function} ({handler}) backs this custom resource but Lambda may retry it "
                              f"(MaximumRetryAttempts {retries or 'unset: 2'}): a late retry runs after "
                              "CloudFormation moved on; set retry_attempts=0")
