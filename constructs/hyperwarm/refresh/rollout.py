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
         --error--> CountFailure --fewer than MAX_FAILED_STEPS in a row--> Wait --> Step
                                 --else--> MarkAbandoned (abandon: true) --> Abandon (the step) --> Abandoned (Fail)

The step retries the cluster's transient errors itself, at each poll until the phase's deadline; what reaches
the workflow as an error (the state table unreachable, a crash, a timeout) is retried the same way, a poll
apart, up to :data:`MAX_FAILED_STEPS` in a row. Each poll is a minute, or longer for a long phase
(:func:`contract.poll_seconds`), so an execution's history stays far below Step Functions' 25,000 events
(:func:`contract.history_events`, checked at synth).

The refresh function starts an execution named :func:`contract.rollout_execution_name` (a duplicate start is a
no-op), as does the step that ends a rollout for the version that waited behind it. The step's per-target
staging and switch timeouts end a rollout; the state machine's own timeout is only the backstop behind them
(:func:`backstop_timeout`).
"""

from __future__ import annotations

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

from hyperwarm._internal.nag import acknowledge, acknowledge_checkov, logical_id
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.refresh.targets import STAGING_SAFETY_FACTOR, default_staging_timeout

__all__ = ["BACKSTOP_MARGIN_SECONDS", "HISTORY_BUDGET", "MAX_FAILED_STEPS", "STAGING_SAFETY_FACTOR",
           "backstop_timeout", "default_staging_timeout", "history_problems", "rollout_workflow"]

BACKSTOP_MARGIN_SECONDS = 3600
"""The state machine's timeout beyond the slowest target's staging plus switch timeouts: the polls between
steps and the failed steps retried a poll apart fit in it, so the step's own timeouts always end a rollout
first."""
STEP_TIMEOUT = cdk.Duration.minutes(2)
"""One step reads and patches a few cluster objects and the state table: seconds, bounded at two minutes."""
MAX_FAILED_STEPS = 30
"""Steps that fail in a row (an error, not an answer) before the workflow asks the step to abandon the rollout:
at a poll or more apart, half an hour of failures at least."""
LOG_GROUP_PREFIX = "/aws/vendedlogs/states/"
"""Step Functions recommends its log groups under this prefix (CloudWatch Logs' resource policy stays small)."""


def backstop_timeout(targets: Sequence[contract.HyperPodTarget]) -> cdk.Duration:
    """The state machine's ``TimeoutSeconds``: the slowest target's staging timeout and two switch timeouts (the
    switch, then a revert back), plus :data:`BACKSTOP_MARGIN_SECONDS`."""
    slowest = max((t.staging_timeout_seconds + 2 * t.switch_timeout_seconds for t in targets),
                  default=contract.DEFAULT_STAGING_TIMEOUT_SECONDS + 2 * contract.DEFAULT_SWITCH_TIMEOUT_SECONDS)
    return cdk.Duration.seconds(slowest + BACKSTOP_MARGIN_SECONDS)


HISTORY_BUDGET = contract.HISTORY_LIMIT // 2
"""What one execution may write at most: half of Step Functions' 25,000 events per execution history (service
quotas), so a rollout never ends because its history is full."""


def history_problems(targets: Sequence[contract.HyperPodTarget]) -> list[str]:
    """A target whose rollout could write more than :data:`HISTORY_BUDGET` history events (each phase polled to its
    timeout, and the backstop margin's polls)."""
    problems = []
    for target in targets:
        events = contract.history_events(target.staging_timeout_seconds, target.switch_timeout_seconds,
                                         BACKSTOP_MARGIN_SECONDS)
        if events > HISTORY_BUDGET:
            problems.append(f"{target.id}: staging and switch timeouts {target.staging_timeout_seconds} s and "
                            f"{target.switch_timeout_seconds} s let one execution write {events} history events -- "
                            f"allowed: at most {HISTORY_BUDGET} (Step Functions keeps 25,000 per execution)")
    return problems


def rollout_workflow(scope: Construct, step: lambda_.Function, timeout: cdk.Duration) -> sfn.StateMachine:
    """The state machine ``RolloutWorkflow`` in ``scope``, whose one task invokes ``step`` (and nothing else:
    its role may invoke that function and its versions); logs every transition, without execution data,
    to ``RolloutWorkflowLogs``; X-Ray traced.

    ``step`` may start executions of it too: when a rollout ends, its last step rolls the version that waited
    behind it, warm. The workflow invokes the step, so the step cannot reference the workflow's ARN; the
    workflow gets a name derived from its construct path instead (unique per stack), whose ARN both know."""
    states = Construct(scope, "RolloutStates")
    first = _rollout_states(states, step)
    log_group = logs.LogGroup(scope, "RolloutWorkflowLogs", retention=logs.RetentionDays.THREE_MONTHS,
                              log_group_name=LOG_GROUP_PREFIX + cdk.Names.unique_resource_name(
                                  states, max_length=200, separator="-"))
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


def _rollout_states(states: Construct, step: lambda_.Function) -> tasks.LambdaInvoke:
    """The workflow's states in ``states``, from its first (the step): step, wait for as long as its answer says,
    step again until done or failed; :data:`MAX_FAILED_STEPS` failed steps in a row abandon the rollout."""
    first = _invoke(states, "Step", step, "advance the rollout by one step; the answer's phase says what is next")
    abandon = _invoke(states, "Abandon", step, "end the rollout as failed: dead letter, the old version serving")
    mark = sfn.Pass(states, "MarkAbandoned", result=sfn.Result.from_boolean(True), result_path="$.abandon",
                    comment=f"{MAX_FAILED_STEPS} steps failed in a row (or one answered no known phase): ask it "
                            "to abandon")
    wait = sfn.Wait(states, "Wait", time=sfn.WaitTime.seconds_path("$.wait_seconds"),
                    comment="the step's answer says how long until the next look")
    wait.next(first)
    # An error keeps the step's input (the last answer: target, version, wait, failures in a row) beside it.
    count = sfn.Pass(states, "CountFailure", comment="one more step failed in a row",
                     parameters={"target.$": "$.target", "version.$": "$.version", "phase.$": "$.phase",
                                 "wait_seconds.$": "$.wait_seconds", "abandon": False,
                                 "failures.$": "States.MathAdd($.failures, 1)"})
    first.add_catch(count, errors=[sfn.Errors.ALL], result_path="$.error")
    count.next(sfn.Choice(states, "TooManyFailures", comment=f"{MAX_FAILED_STEPS} failed steps in a row: give up")
               .when(sfn.Condition.number_greater_than_equals("$.failures", MAX_FAILED_STEPS), mark)
               .otherwise(wait))
    abandon.add_catch(sfn.Fail(states, "AbandonFailed", error="RolloutAbandonFailed",
                               cause="the abandon step failed too: the scheduled reconciliation settles the rollout"),
                      errors=[sfn.Errors.ALL], result_path="$.error")
    mark.next(abandon)
    abandon.next(sfn.Fail(states, "Abandoned", error="RolloutAbandoned",
                          cause="steps failed past their retries: the rollout ended as failed, the old version serves"))
    phase = sfn.Choice(states, "Phase", comment="the step's answer: " + ", ".join(contract.ROLLOUT_PHASES))
    phase.when(sfn.Condition.or_(*(sfn.Condition.string_equals("$.phase", p) for p in ("staging", "switching"))),
               wait)
    phase.when(sfn.Condition.string_equals("$.phase", "done"), sfn.Succeed(states, "Done"))
    phase.when(sfn.Condition.string_equals("$.phase", "failed"), sfn.Fail(
        states, "Failed", error="RolloutFailed",
        cause="the step ended the rollout as failed (dead-lettered): the old version serves"))
    phase.otherwise(mark)
    first.next(phase)
    return first


def _invoke(scope: Construct, id: str, step: lambda_.IFunction, comment: str) -> tasks.LambdaInvoke:
    """The step with the state as its input (a ``RolloutStep``) and its answer as the state's output; Lambda's own
    service errors retried (aws-cdk-lib's retrier: 2 s doubling, 6 attempts). Any other failure is the workflow's
    (:func:`rollout_workflow`): each step is idempotent, so a later step only looks again."""
    return tasks.LambdaInvoke(scope, id, lambda_function=step, output_path="$.Payload", comment=comment,
                              payload=STEP_INPUT, retry_on_service_exceptions=True,
                              task_timeout=sfn.Timeout.duration(STEP_TIMEOUT))


STEP_INPUT = sfn.TaskInput.from_object({
    **{f"{name}.$": f"$.{name}" for name in contract.RolloutStep._fields if name != "execution"},
    "execution.$": "$$.Execution.Name"})
"""The step's input: the state's fields, and the execution's own name from the context object (not from the input,
which whoever starts an execution writes): the step acts only for the execution its rollout record names."""
