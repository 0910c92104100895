"""The warm rollout's workflow: a Step Functions Standard state machine that moves one HyperPod target to a
new model version in stages (stage, switch, retire), one execution per target and version.

A staging takes minutes to an hour (prod's 145 GB at the planner's 1 Gbit/s per node is about 19 minutes);
a Lambda invocation lasts at most 900 s, a Standard workflow up to a year, with Wait states and Retry/Catch
per step, and every execution's steps visible in the console. The workflow's one task is the refresh code's
step (:data:`contract.ROLLOUT_HANDLER`): it reads the cluster, advances the rollout by one idempotent step and
answers a :class:`contract.RolloutStep` whose ``phase`` says what comes next::

    Step --phase staging|switching--> Wait($.wait_seconds) --> Step
         --phase done--> Done (Succeed)
         --phase failed--> Failed (Fail: the step already dead-lettered; the old version serves)
         --error past its retries--> MarkAbandoned (abandon: true) --> Abandon (the step) --> Abandoned (Fail)

The refresh function starts an execution named :func:`contract.rollout_execution_name` (a duplicate start is a
no-op), as does the step that ends a rollout for the version that waited behind it. The step's per-target
staging and switch timeouts end a rollout; the state machine's own timeout is only the backstop behind them
(:func:`backstop_timeout`).
"""

from __future__ import annotations

import math
import typing
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import (
    aws_iam as iam,
    aws_lambda as lambda_,
    aws_logs as logs,
    aws_stepfunctions as sfn,
    aws_stepfunctions_tasks as tasks,
)
from constructs import Construct

from hyperwarm._internal.constraints import in_gigabytes
from hyperwarm._internal.nag import acknowledge, acknowledge_checkov, logical_id
from hyperwarm.caches.cold_start import DEFAULT_BANDWIDTH_GBPS
from hyperwarm.functions.cache_refresh import contract

__all__ = ["BACKSTOP_MARGIN_SECONDS", "STAGING_SAFETY_FACTOR", "backstop_timeout", "default_staging_timeout",
           "rollout_workflow"]

STAGING_SAFETY_FACTOR = 2.0
"""The default staging timeout is this many times one node's cache fill at the planner's rate
(:data:`hyperwarm.caches.cold_start.DEFAULT_BANDWIDTH_GBPS`, AWS's published ~1 Gbit/s effective per node):
nodes fill side by side, and the slowest one counts; twice the estimate lets a node fill at half the rate."""
BACKSTOP_MARGIN_SECONDS = 3600
"""The state machine's timeout beyond the slowest target's staging plus switch timeouts: the polls between
steps (:data:`contract.ROLLOUT_POLL_SECONDS`) and a step's retries with back-off (under half an hour, see
:func:`_invoke`) fit in it, so the step's own timeouts always end a rollout first."""
STEP_TIMEOUT = cdk.Duration.minutes(2)
"""One step reads and patches a few cluster objects and the state table: seconds, bounded at two minutes."""


def default_staging_timeout(model_size: cdk.Size | None, bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS) -> cdk.Duration:
    """The staging timeout of a target whose model has ``model_size`` weights: one node's cache fill at
    ``bandwidth_gbps`` times :data:`STAGING_SAFETY_FACTOR`, within ``contract.TIMEOUT_SECONDS_RANGE``
    (145 GB: 2,320 s; 16 GB: 300 s, the least). Unknown size: ``contract.DEFAULT_STAGING_TIMEOUT_SECONDS``."""
    if model_size is None or model_size.is_unresolved():
        return cdk.Duration.seconds(contract.DEFAULT_STAGING_TIMEOUT_SECONDS)
    fill_s = in_gigabytes(model_size) * 8 / bandwidth_gbps
    low, high = contract.TIMEOUT_SECONDS_RANGE
    return cdk.Duration.seconds(min(high, max(low, math.ceil(fill_s * STAGING_SAFETY_FACTOR))))


def backstop_timeout(targets: Sequence[contract.HyperPodTarget]) -> cdk.Duration:
    """The state machine's ``TimeoutSeconds``: the slowest target's staging timeout and two switch timeouts (the
    switch, then a revert back), plus :data:`BACKSTOP_MARGIN_SECONDS`."""
    slowest = max((t.staging_timeout_seconds + 2 * t.switch_timeout_seconds for t in targets),
                  default=contract.DEFAULT_STAGING_TIMEOUT_SECONDS + 2 * contract.DEFAULT_SWITCH_TIMEOUT_SECONDS)
    return cdk.Duration.seconds(slowest + BACKSTOP_MARGIN_SECONDS)


def rollout_workflow(scope: Construct, step: lambda_.Function, timeout: cdk.Duration) -> sfn.StateMachine:
    """The state machine ``RolloutWorkflow`` in ``scope``, whose one task invokes ``step`` (and nothing else:
    its role may invoke that function and its versions); logs every transition, without execution data,
    to ``RolloutWorkflowLogs``; X-Ray traced.

    ``step`` may start executions of it too: when a rollout ends, its last step rolls the version that waited
    behind it, warm. The workflow invokes the step, so the step cannot reference the workflow's ARN; the
    workflow gets a name derived from its construct path instead (unique per stack), whose ARN both know."""
    states = Construct(scope, "RolloutStates")
    first = _invoke(states, "Step", step, "advance the rollout by one step; the answer's phase says what is next")
    abandon = _invoke(states, "Abandon", step, "end the rollout as failed: dead letter, the old version serving")
    mark = sfn.Pass(states, "MarkAbandoned", result=sfn.Result.from_boolean(True), result_path="$.abandon",
                    comment="the step failed past its retries (or answered no known phase): ask it to abandon")
    # The catch keeps the step's input (target, version, phase) beside the error, so the abandon step
    # knows which rollout to end.
    first.add_catch(mark, errors=[sfn.Errors.ALL], result_path="$.error")
    abandon.add_catch(sfn.Fail(states, "AbandonFailed", error="RolloutAbandonFailed",
                               cause="the abandon step failed too: the scheduled reconciliation settles the rollout"),
                      errors=[sfn.Errors.ALL], result_path="$.error")
    mark.next(abandon)
    abandon.next(sfn.Fail(states, "Abandoned", error="RolloutAbandoned",
                          cause="a step failed past its retries: the rollout ended as failed, the old version serves"))
    wait = sfn.Wait(states, "Wait", time=sfn.WaitTime.seconds_path("$.wait_seconds"),
                    comment="the step's answer says how long until the next look")
    wait.next(first)
    phase = sfn.Choice(states, "Phase", comment="the step's answer: " + ", ".join(contract.ROLLOUT_PHASES))
    phase.when(sfn.Condition.or_(*(sfn.Condition.string_equals("$.phase", p) for p in ("staging", "switching"))),
               wait)
    phase.when(sfn.Condition.string_equals("$.phase", "done"), sfn.Succeed(states, "Done"))
    phase.when(sfn.Condition.string_equals("$.phase", "failed"), sfn.Fail(
        states, "Failed", error="RolloutFailed",
        cause="the step ended the rollout as failed (dead-lettered): the old version serves"))
    phase.otherwise(mark)
    first.next(phase)

    log_group = logs.LogGroup(scope, "RolloutWorkflowLogs", retention=logs.RetentionDays.THREE_MONTHS)
    machine = sfn.StateMachine(
        scope, "RolloutWorkflow", definition_body=sfn.DefinitionBody.from_chainable(first),
        state_machine_type=sfn.StateMachineType.STANDARD, timeout=timeout, tracing_enabled=True,
        comment="hyperwarm: one HyperPod target's warm rollout to one model version (stage, switch, retire)",
        # Every transition and error; the inputs and answers (target ids and versions) stay in the
        # execution history, which the console shows per execution.
        logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False))
    name = cdk.Names.unique_resource_name(machine, max_length=80, separator="-")
    typing.cast(sfn.CfnStateMachine, machine.node.default_child).state_machine_name = name
    arn = cdk.Stack.of(machine).format_arn(service="states", resource="stateMachine", resource_name=name,
                                           arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)
    step.add_environment(contract.ROLLOUT_STATE_MACHINE, arn)
    step.add_to_role_policy(iam.PolicyStatement(actions=["states:StartExecution"], resources=[arn]))
    acknowledge(machine, "aws-cdk-lib grants the Lambda invoke integration on the step function and its "
                "versions, nothing else", f"IAM5[Resource::<{logical_id(step)}.Arn>:*]")
    acknowledge(machine, "CloudWatch Logs' log-delivery actions and X-Ray's trace writes have no resource-level "
                "permissions (Step Functions logging and tracing need them on *)", "IAM5[Resource::*]")
    acknowledge_checkov(log_group, "the workflow's log holds state transitions and errors of model rollouts, no "
                        "execution data and no secrets; CloudWatch Logs encrypts every log group at rest",
                        "CKV_AWS_158")
    return machine


def _invoke(scope: Construct, id: str, step: lambda_.IFunction, comment: str) -> tasks.LambdaInvoke:
    """The step with the state as its input (a ``RolloutStep``) and its answer as the state's output. Retries:
    Lambda's own service errors (aws-cdk-lib's retrier: 2 s doubling, 6 attempts), then any failure of the
    step (raised, timed out) 4 times from 10 s doubling, at most 2 minutes apart, with jitter: each step is
    idempotent, so a retry only looks again. At worst 11 attempts of :data:`STEP_TIMEOUT` and about 5 minutes of
    back-off: under half an hour."""
    task = tasks.LambdaInvoke(scope, id, lambda_function=step, output_path="$.Payload", comment=comment,
                              retry_on_service_exceptions=True)
    task.add_retry(errors=[sfn.Errors.TASKS_FAILED], interval=cdk.Duration.seconds(10),
                   backoff_rate=2, max_attempts=4, max_delay=cdk.Duration.minutes(2),
                   jitter_strategy=sfn.JitterType.FULL)
    return task
