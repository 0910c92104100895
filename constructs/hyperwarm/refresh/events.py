"""The cache refresh hook's EventBridge rules: a complete model version, a refreshed endpoint's state
change, and the reconciliation's schedule. A plain helper adding to the hook itself (its logical ids
stay the hook's)."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_events as events, aws_events_targets as targets, aws_lambda as lambda_, aws_sqs as sqs
from constructs import Construct


def manifest_event_pattern(bucket_name: str, prefixes: Sequence[str]) -> events.EventPattern:
    """S3 "Object Created" for ``<prefix>/<version>/manifest.json`` only: a version is complete."""
    return events.EventPattern(
        source=["aws.s3"], detail_type=["Object Created"],
        detail={"bucket": {"name": [bucket_name]},
                "object": {"key": [{"wildcard": f"{p}/*/manifest.json"} for p in prefixes]}})


def endpoint_state_pattern(endpoint_names: Sequence[str]) -> events.EventPattern:
    """SageMaker "Endpoint State Change" of the refreshed endpoints."""
    return events.EventPattern(source=["aws.sagemaker"], detail_type=["SageMaker Endpoint State Change"],
                               detail={"EndpointName": list(endpoint_names)})


class RefreshEvents:
    """The event rules deliver with retries and the hook's dead-letter queue for what they cannot
    deliver; the schedule does not retry (its next run does)."""

    def __init__(self, scope: Construct, *, bucket_name: str, prefixes: Sequence[str], endpoint_names: Sequence[str],
                 function: lambda_.IFunction, state_handler: lambda_.IFunction, reconciler: lambda_.IFunction,
                 reconcile_every: cdk.Duration, dead_letter_queue: sqs.IQueue, retry_attempts: int,
                 max_event_age: cdk.Duration) -> None:
        def target(handler: lambda_.IFunction) -> targets.LambdaFunction:
            return targets.LambdaFunction(handler, dead_letter_queue=dead_letter_queue,
                                          retry_attempts=retry_attempts, max_event_age=max_event_age)

        self.manifest_rule = events.Rule(scope, "ManifestRule",
                                         description="a model version is complete: its manifest landed",
                                         event_pattern=manifest_event_pattern(bucket_name, prefixes))
        self.manifest_rule.add_target(target(function))
        self.endpoint_rule: events.Rule | None = None
        if endpoint_names:
            self.endpoint_rule = events.Rule(scope, "EndpointStateRule",
                                             description="a refreshed endpoint changed state",
                                             event_pattern=endpoint_state_pattern(endpoint_names))
            self.endpoint_rule.add_target(target(state_handler))
        self.reconcile_rule = events.Rule(scope, "ReconcileSchedule", schedule=events.Schedule.rate(reconcile_every),
                                          description="settle refresh rollouts whose end was never announced")
        self.reconcile_rule.add_target(targets.LambdaFunction(reconciler, retry_attempts=0,
                                                              max_event_age=cdk.Duration.minutes(5)))
