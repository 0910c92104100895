"""The cache refresh hook's functions, their role and logs, and where their failures go.

A plain helper, not a construct: it adds its resources to the hook itself, so their logical ids are
the ones the hook always had.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import (
    aws_ec2 as ec2,
    aws_iam as iam,
    aws_lambda as lambda_,
    aws_lambda_destinations as destinations,
    aws_logs as logs,
    aws_sqs as sqs,
)
from constructs import Construct

from hyperwarm._internal.nag import acknowledge, acknowledge_checkov, managed_policy
from hyperwarm.cluster.interfaces import IHyperPodCluster
from hyperwarm.cluster.kube_access import private_api_network
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.refresh.asset import FUNCTION
from hyperwarm.refresh.rollout import STEP_TIMEOUT

_RUNTIME_REASON = ("Python 3.13 is the runtime this function and its bundled dependencies are tested on; "
                   "moving to a newer one is a deliberate, tested upgrade")


class RefreshFunctions:
    """The refresh function (manifest events), the state handler (endpoint state changes) and the
    reconciler (a schedule): one code asset, one role, in the cluster's private subnets when there is a cluster (its EKS API
    endpoint is private). Every invocation that still fails after Lambda's retries goes to
    ``dead_letter_queue`` (the on-failure destination), except the reconciler's: its next run retries.

    With ``rollout``, also the warm rollout's step function (the rollout workflow's task), from the same code with
    a role of its own: the refresh role may start the workflow, which invokes the step, so one role for both
    would make the workflow depend on itself."""

    def __init__(self, scope: Construct, *, cluster: IHyperPodCluster | None, environment: Mapping[str, str],
                 dead_letter_queue: sqs.IQueue, function_name: str | None, lock: cdk.Duration,
                 retry_attempts: int, max_event_age: cdk.Duration, rollout: bool = False,
                 reserved_concurrency: int | None = None) -> None:
        self.security_group: ec2.SecurityGroup | None = None
        network: dict[str, Any] = {}
        if cluster is not None:
            self.security_group, network = private_api_network(scope, cluster, "cache refresh function")
        self.role = _role(scope, in_vpc=bool(network))
        code = FUNCTION.code()  # one bundle for the three functions

        def function(id: str, logs_id: str, handler: str, memory: int, timeout: cdk.Duration, description: str,
                     name: str | None = None, role: iam.Role = self.role) -> lambda_.Function:
            created = lambda_.Function(
                scope, id, function_name=name, runtime=lambda_.Runtime.PYTHON_3_13,
                architecture=lambda_.Architecture.ARM_64, handler=handler, code=code, role=role,
                memory_size=memory, timeout=timeout, environment=dict(environment),
                log_group=logs.LogGroup(scope, logs_id, retention=logs.RetentionDays.THREE_MONTHS),
                tracing=lambda_.Tracing.ACTIVE, description=description,
                reserved_concurrent_executions=reserved_concurrency, **network)
            acknowledge(created, _RUNTIME_REASON, "L1")
            _acknowledge_function_checkov(created, reserved=reserved_concurrency is not None)
            return created

        self.function = function("Function", "Logs", contract.REFRESH_HANDLER, 512, lock,
                                 "hyperwarm: a complete new model version refreshes caches and endpoints",
                                 function_name)
        acknowledge(self.role, "X-Ray trace segment writes have no resource-level permissions", "IAM5[Resource::*]")
        self.state_handler = function("EndpointStateFunction", "EndpointStateLogs", contract.STATE_HANDLER, 256,
                                      cdk.Duration.minutes(2),
                                      "hyperwarm: finish a refreshed endpoint's rollout on its state change")
        for event_function in (self.function, self.state_handler):
            _dead_letter_failures(event_function, dead_letter_queue, retry_attempts, max_event_age)
        self.reconciler = function("ReconcileFunction", "ReconcileLogs", contract.RECONCILE_HANDLER, 256,
                                   cdk.Duration.minutes(5), "hyperwarm: settle refresh rollouts and waiting versions "
                                   "whose end was never announced")
        # The next schedule is its retry; a run that could not reconcile every target raises (Errors alarm).
        self.reconciler.configure_async_invoke(retry_attempts=0, max_event_age=cdk.Duration.minutes(5))
        acknowledge_checkov(self.reconciler, "a scheduled run with no event worth keeping: the next run "
                            "retries it, and a failed run counts in the Errors alarm", "CKV_AWS_116")
        self.rollout_role: iam.Role | None = None
        self.rollout_step: lambda_.Function | None = None
        if rollout:
            self.rollout_role = _role(scope, in_vpc=bool(network), id="RolloutRole",
                                      description="warm rollout step function")
            self.rollout_step = function("RolloutStepFunction", "RolloutStepLogs", contract.ROLLOUT_HANDLER, 256,
                                         STEP_TIMEOUT, "hyperwarm: advance a HyperPod target's warm rollout by one "
                                         "step (the rollout workflow's task)", role=self.rollout_role)
            acknowledge(self.rollout_role, "X-Ray trace segment writes have no resource-level permissions",
                        "IAM5[Resource::*]")
            acknowledge_checkov(self.rollout_step, "invoked synchronously by the rollout workflow, whose Retry and "
                                "Catch handle its failures: the catch's abandon step dead-letters the rollout",
                                "CKV_AWS_116")


def _role(scope: Construct, *, in_vpc: bool, id: str = "Role", description: str = "cache refresh function") -> iam.Role:
    role = iam.Role(scope, id, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description)
    role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(
        "service-role/AWSLambdaVPCAccessExecutionRole" if in_vpc else "service-role/AWSLambdaBasicExecutionRole"))
    acknowledge(role, "the AWS-managed Lambda execution policy only writes the function's logs and, "
                "in a VPC, manages its network interfaces",
                managed_policy("service-role/AWSLambdaBasicExecutionRole"),
                managed_policy("service-role/AWSLambdaVPCAccessExecutionRole"))
    return role


def _dead_letter_failures(function: lambda_.Function, queue: sqs.IQueue, retry_attempts: int,
                          max_event_age: cdk.Duration) -> None:
    """An invocation that still fails after Lambda's retries (raised, timed out, too old) is sent
    to the dead-letter queue as Lambda's invocation record, whose ``requestPayload`` is the event.

    The rule's dead-letter queue only receives events EventBridge could not deliver; without this
    Lambda would drop them (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html).
    """
    function.configure_async_invoke(on_failure=destinations.SqsDestination(queue),
                                    retry_attempts=retry_attempts, max_event_age=max_event_age)
    acknowledge_checkov(function, "failed invocations go to the dead-letter queue through the on-failure "
                        "destination (EventInvokeConfig), whose records the replay command reads; checkov "
                        "only recognises the older DeadLetterConfig", "CKV_AWS_116")


def _acknowledge_function_checkov(function: lambda_.Function, *, reserved: bool) -> None:
    """checkov findings on a refresh function and its log group."""
    if not reserved:
        acknowledge_checkov(function, "no reserved_concurrency given: reserving is carved out of the account's "
                            "pool and fails where fewer than 100 would stay unreserved (new accounts have 10), so "
                            "the hook reserves only when told (the app does in production); the state table's lock "
                            "already keeps refreshes of one target from running at once", "CKV_AWS_115")
    acknowledge_checkov(function, "the environment holds resource names, the queue URL and refresh targets, no "
                        "secrets; Lambda encrypts it at rest with an AWS-managed key", "CKV_AWS_173")
    acknowledge_checkov(function.log_group, "function logs hold model prefixes, versions and target names, no "
                        "secrets; CloudWatch Logs encrypts every log group at rest", "CKV_AWS_158")
