"""What hyperwarm's one-minute metric functions share: the schedule, and PutMetricData into one namespace.

The cache metrics exporter and the endpoint metrics bridge both run every minute and publish to one
CloudWatch namespace each; a missed minute is superseded by the next run, so neither retries.
"""

from __future__ import annotations

from aws_cdk import aws_events as events, aws_events_targets as targets, aws_iam as iam, aws_lambda as lambda_
from constructs import Construct

from hyperwarm._internal.durations import ONE_MINUTE
from hyperwarm._internal.nag import acknowledge


def grant_put_metric_data(role: iam.Role, namespace: str) -> None:
    """``cloudwatch:PutMetricData`` into ``namespace`` only (the ``cloudwatch:namespace`` condition)."""
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=["cloudwatch:PutMetricData"], resources=["*"],
        conditions={"StringEquals": {"cloudwatch:namespace": namespace}}))
    acknowledge(role, "cloudwatch:PutMetricData has no resource-level permissions; the cloudwatch:namespace "
                f"condition limits it to {namespace}", "IAM5[Resource::*]")


def run_every_minute(scope: Construct, function: lambda_.Function, description: str) -> events.Rule:
    """An EventBridge rule ``Schedule`` in ``scope`` invoking ``function`` every minute, without retries."""
    rule = events.Rule(scope, "Schedule", schedule=events.Schedule.rate(ONE_MINUTE),
                       description=description)
    # A missed minute is superseded by the next run: no retries, nothing worth a dead-letter queue.
    rule.add_target(targets.LambdaFunction(function, retry_attempts=0, max_event_age=ONE_MINUTE))
    function.configure_async_invoke(retry_attempts=0, max_event_age=ONE_MINUTE)
    return rule
