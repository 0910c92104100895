"""The warm rollout's workflow: the state machine, its step function, their IAM and timeouts, and the ASL
definition run by moto's Step Functions interpreter with the step answered in-process (scripted)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk import assertions
from moto import mock_aws
from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction
from stand_ins import ACCOUNT, cached_model, imported_cluster

from hyperwarm import (
    CacheRefreshHook,
    CacheRefreshHookProps,
    HyperPodRefreshTarget,
    InstanceGroupSpec,
    RefreshedPrefix,
    default_staging_timeout,
)
from hyperwarm._internal.constraints import gigabytes
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.refresh.rollout import BACKSTOP_MARGIN_SECONDS, MAX_FAILED_STEPS

REGION = "us-west-2"


def _hook(targets: Callable[[Any], list[HyperPodRefreshTarget]]) -> tuple[CacheRefreshHook, cdk.Stack]:
    app = cdk.App()
    stack = cdk.Stack(app, "T", env=cdk.Environment(account=ACCOUNT, region=REGION))
    cluster = imported_cluster(stack, [InstanceGroupSpec(name="gpu", instance_type="ml.g5.xlarge", holds_caches=True)])
    hook = CacheRefreshHook(stack, "Hook", CacheRefreshHookProps(
        models=[RefreshedPrefix(prefix="models/big", hyperpod=targets(cluster))]))
    return hook, stack


def _warm(cluster: Any, size_gb: float = 16, **options: Any) -> HyperPodRefreshTarget:
    return HyperPodRefreshTarget(cached_model(cluster, "big", "models", node_cached=True, size_gb=size_gb), **options)


@pytest.fixture(scope="module")
def warm() -> tuple[CacheRefreshHook, dict[str, Any]]:
    """One hook with a warm target (145 GB, default timeouts) and one without caches, synthesized once."""
    hook, stack = _hook(lambda c: [_warm(c, size_gb=145),
                                   HyperPodRefreshTarget(cached_model(c, "small", "models"))])
    return hook, assertions.Template.from_stack(stack).to_json()


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def _only(template: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    (found,) = _resources(template, kind).items()
    return found[0], found[1]["Properties"]


def _function(template: dict[str, Any], handler: str) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, r["Properties"]) for k, r in _resources(template, "AWS::Lambda::Function").items()
                if r["Properties"].get("Handler") == handler]
    return found


def _statements(template: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    return [s for p in _resources(template, "AWS::IAM::Policy").values()
            if {"Ref": role_id} in p["Properties"]["Roles"] for s in p["Properties"]["PolicyDocument"]["Statement"]]


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def _definition(template: dict[str, Any]) -> dict[str, Any]:
    """The ASL with references resolved to names a test can read (a function's ARN ends in its logical id)."""
    def resolve(value: Any) -> str:
        if isinstance(value, str):
            return value
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(resolve(p) for p in parts)
        if "Fn::GetAtt" in value:
            return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{value['Fn::GetAtt'][0]}"
        return {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}[value["Ref"]]

    _, machine = _only(template, "AWS::StepFunctions::StateMachine")
    return json.loads(resolve(machine["DefinitionString"]))


# -- the template -------------------------------------------------------------------------------

def test_a_standard_workflow_logs_every_transition_without_data_traced_with_a_backstop_timeout(warm) -> None:
    _, template = warm
    _, machine = _only(template, "AWS::StepFunctions::StateMachine")
    assert machine["StateMachineType"] == "STANDARD" and machine["TracingConfiguration"] == {"Enabled": True}
    logging = machine["LoggingConfiguration"]
    assert (logging["Level"], logging["IncludeExecutionData"]) == ("ALL", False)
    (destination,) = logging["Destinations"]
    group = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    assert template["Resources"][group]["Type"] == "AWS::Logs::LogGroup"
    # Step Functions' logging guide: groups under /aws/vendedlogs/states/ keep CloudWatch Logs' resource policy small
    assert template["Resources"][group]["Properties"]["LogGroupName"].startswith("/aws/vendedlogs/states/")
    # 145 GB at 1 Gbit/s is 1,160 s per node, twice that stages; plus the 30-minute switch and the margin.
    assert _definition(template)["TimeoutSeconds"] == 2320 + 2 * 1800 + BACKSTOP_MARGIN_SECONDS  # staging, switch, revert


def test_the_one_task_is_the_rollout_step_with_the_step_as_input_and_failures_counted(warm) -> None:
    _, template = warm
    step_id, _ = _function(template, contract.ROLLOUT_HANDLER)
    states = _definition(template)["States"]
    tasks = {name: s for name, s in states.items() if s["Type"] == "Task"}
    assert set(tasks) == {"Step", "Abandon"}
    for task in tasks.values():
        assert task["Resource"] == "arn:aws:states:::lambda:invoke"
        payload = {f"{name}.$": f"$.{name}" for name in ("target", "version", "phase", "wait_seconds", "abandon",
                                                          "failures")}
        # the execution's name from the context object, never from the input whoever starts an execution writes
        assert task["Parameters"] == {"FunctionName": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{step_id}",
                                      "Payload": {**payload, "execution.$": "$$.Execution.Name"}}
        assert task["OutputPath"] == "$.Payload" and task["TimeoutSeconds"] == 120
        retried = {e for r in task["Retry"] for e in r["ErrorEquals"]}
        assert "Lambda.ServiceException" in retried and "States.TaskFailed" not in retried
        (catch,) = task["Catch"]
        assert catch["ErrorEquals"] == ["States.ALL"] and catch["ResultPath"] == "$.error"
    assert states["Step"]["Catch"][0]["Next"] == "CountFailure"
    assert states["Wait"]["SecondsPath"] == "$.wait_seconds" and states["Wait"]["Next"] == "Step"


def test_the_step_runs_the_rollout_handler_in_the_cluster_vpc_with_a_role_of_its_own(warm) -> None:
    _, template = warm
    _, step = _function(template, contract.ROLLOUT_HANDLER)
    _, refresh = _function(template, contract.REFRESH_HANDLER)
    assert step["Role"] != refresh["Role"] and step["VpcConfig"]["SubnetIds"]
    assert step["Code"] == refresh["Code"] and step["Runtime"] == "python3.13"


def _by_name(template: dict[str, Any]) -> dict[str, Any]:
    """The workflow's ARN built from its name: what the step uses, without a reference to the workflow
    (which invokes the step: a reference would be a cycle)."""
    _, machine = _only(template, "AWS::StepFunctions::StateMachine")
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"},
                              f":states:{REGION}:{ACCOUNT}:stateMachine:{machine['StateMachineName']}"]]}


def test_the_last_step_of_a_rollout_may_start_the_next_one_by_the_workflows_name(warm) -> None:
    """A version that waited behind a rollout is rolled warm by the step that ends it."""
    _, template = warm
    _, step = _function(template, contract.ROLLOUT_HANDLER)
    _, machine = _only(template, "AWS::StepFunctions::StateMachine")
    assert re.fullmatch(r"[0-9A-Za-z_-]{1,80}", machine["StateMachineName"])  # CreateStateMachine's name rule
    assert step["Environment"]["Variables"][contract.ROLLOUT_STATE_MACHINE] == _by_name(template)
    starts = [s for s in _statements(template, step["Role"]["Fn::GetAtt"][0]) if "states:StartExecution" in s["Action"]]
    assert [(s["Action"], s["Resource"]) for s in starts] == [("states:StartExecution", _by_name(template))]


def test_the_workflow_may_invoke_only_the_step_function_and_its_versions(warm) -> None:
    _, template = warm
    step_id, _ = _function(template, contract.ROLLOUT_HANDLER)
    _, machine = _only(template, "AWS::StepFunctions::StateMachine")
    role_id = machine["RoleArn"]["Fn::GetAtt"][0]
    statements = _statements(template, role_id)
    invokes = [s for s in statements if any(a.startswith("lambda:") for a in _actions(s))]
    assert [(_actions(s), s["Resource"]) for s in invokes] == [(["lambda:InvokeFunction"], [
        {"Fn::GetAtt": [step_id, "Arn"]}, {"Fn::Join": ["", [{"Fn::GetAtt": [step_id, "Arn"]}, ":*"]]}])]
    others = {a for s in statements if s not in invokes for a in _actions(s)}
    assert {a.split(":")[0] for a in others} <= {"logs", "xray"}


def test_only_the_refresh_and_step_roles_may_start_executions_and_only_of_the_workflow(warm) -> None:
    _, template = warm
    machine_id, _ = _only(template, "AWS::StepFunctions::StateMachine")
    _, refresh = _function(template, contract.REFRESH_HANDLER)
    _, step = _function(template, contract.ROLLOUT_HANDLER)
    starts = [(role, s) for role in _resources(template, "AWS::IAM::Role") for s in _statements(template, role)
              if any(a.startswith("states:") for a in _actions(s))]
    assert sorted(((role, s["Action"], json.dumps(s["Resource"])) for role, s in starts)) == sorted([
        (refresh["Role"]["Fn::GetAtt"][0], "states:StartExecution", json.dumps({"Ref": machine_id})),
        (step["Role"]["Fn::GetAtt"][0], "states:StartExecution", json.dumps(_by_name(template)))])


def test_the_refresh_function_and_the_reconciliation_name_the_workflow(warm) -> None:
    _, template = warm
    machine_id, _ = _only(template, "AWS::StepFunctions::StateMachine")
    for handler in (contract.REFRESH_HANDLER, contract.RECONCILE_HANDLER):
        _, function = _function(template, handler)
        assert function["Environment"]["Variables"][contract.ROLLOUT_STATE_MACHINE] == {"Ref": machine_id}
    _, state_handler = _function(template, contract.STATE_HANDLER)
    assert contract.ROLLOUT_STATE_MACHINE not in state_handler["Environment"]["Variables"]


def test_the_step_role_reaches_the_state_table_the_queue_the_cluster_the_versions_and_the_workflow_only(warm) -> None:
    _, template = warm
    _, step = _function(template, contract.ROLLOUT_HANDLER)
    role_id = step["Role"]["Fn::GetAtt"][0]
    table_id, _ = _only(template, "AWS::DynamoDB::Table")
    queue_id, _ = _only(template, "AWS::SQS::Queue")
    by_action = {a: s["Resource"] for s in _statements(template, role_id) for a in _actions(s)}
    assert by_action.pop("dynamodb:GetItem") == by_action.pop("dynamodb:PutItem") == {"Fn::GetAtt": [table_id, "Arn"]}
    (count,) = [s for s in _statements(template, role_id) if "dynamodb:UpdateItem" in _actions(s)]
    assert (by_action.pop("dynamodb:UpdateItem"), count["Condition"]) == (  # the dead-letter quota's counts alone
        {"Fn::GetAtt": [table_id, "Arn"]}, {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["letters#*"]}})
    assert by_action.pop("sqs:SendMessage") == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert by_action.pop("states:StartExecution") == _by_name(template)
    assert json.dumps(by_action.pop("eks:DescribeCluster")).endswith(f':eks:{REGION}:{ACCOUNT}:cluster/hyperpod-eks"]]}}')
    # the gate again before the switch: the refreshed prefix's manifests, signatures and files, nothing else
    versions = {json.dumps(by_action.pop(a)) for a in ("s3:GetObject", "s3:GetObjectVersion")}
    assert len(versions) == 1 and versions.pop().endswith('/models/big/*"]]}')
    assert {a.split(":")[0] for a in by_action} == {"sqs", "xray"}  # GetQueueAttributes/Url; trace writes
    entries = [e["Properties"] for e in _resources(template, "AWS::EKS::AccessEntry").values()]
    assert {json.dumps(e["PrincipalArn"]) for e in entries} == {
        json.dumps({"Fn::GetAtt": [role_id, "Arn"]}), json.dumps(_function(template, contract.REFRESH_HANDLER)[1][
            "Role"])}
    assert all(e["KubernetesGroups"] == ["hyperwarm:cache-refresh"] and "AccessPolicies" not in e for e in entries)


def test_targets_carry_their_timeouts_to_the_functions(warm) -> None:
    _, template = warm
    for handler in (contract.REFRESH_HANDLER, contract.ROLLOUT_HANDLER):
        _, function = _function(template, handler)
        (big, small) = contract.parse_targets(function["Environment"]["Variables"][contract.REFRESH_TARGETS])[
            "models/big"]
        assert isinstance(big, contract.HyperPodTarget) and isinstance(small, contract.HyperPodTarget)
        assert (big.staging_timeout_seconds, big.switch_timeout_seconds) == (2320, 1800)
        assert small.staging_timeout_seconds == 300  # 16 GB: the least


def test_metrics_name_the_workflow_and_the_target(warm) -> None:
    hook, _ = warm
    stack = cdk.Stack.of(hook)
    failed = hook.metric_rollout_executions_failed()
    assert (failed.namespace, failed.metric_name, failed.statistic) == ("AWS/States", "ExecutionsFailed", "Sum")
    assert stack.resolve(failed.dimensions["StateMachineArn"]) == stack.resolve(
        hook.rollout_workflow.state_machine_arn)
    target = _warm(hook.cluster)
    warm_metric = hook.metric_time_to_warm(target)
    assert (warm_metric.namespace, warm_metric.metric_name) == (contract.METRICS_NAMESPACE, "TimeToWarm")
    assert stack.resolve(warm_metric.dimensions) == {
        "service": contract.SERVICE, "target": "hyperpod:hyperpod-eks/models/InferenceEndpointConfig/big"}
    assert hook.node.find_child("RolloutWorkflow") is hook.rollout_workflow


def test_alarms_watch_executions_that_failed_timed_out_or_were_aborted_and_the_steps_errors(warm) -> None:
    """An execution that ends badly, however it ends, and a step that raises each alarm
    (their actions come from the environment's topic: test_alarms.py checks every alarm of the app reaches it)."""
    _, template = warm
    alarms = {k: a["Properties"] for k, a in _resources(template, "AWS::CloudWatch::Alarm").items()}
    (executions,) = [a for k, a in alarms.items() if k.startswith("HookRolloutExecutionsAlarm")]
    stats = [m["MetricStat"] for m in executions["Metrics"] if "MetricStat" in m]
    assert sorted((s["Metric"]["Namespace"], s["Metric"]["MetricName"], s["Stat"]) for s in stats) == [
        ("AWS/States", name, "Sum") for name in ("ExecutionsAborted", "ExecutionsFailed", "ExecutionsTimedOut")]
    (machine, _), = _resources(template, "AWS::StepFunctions::StateMachine").items()
    assert all(s["Metric"]["Dimensions"] == [{"Name": "StateMachineArn", "Value": {"Ref": machine}}] for s in stats)
    (step_errors,) = [a for k, a in alarms.items() if k.startswith("HookRolloutStepErrorsAlarm")]
    step, _ = _function(template, contract.ROLLOUT_HANDLER)
    assert (step_errors["Namespace"], step_errors["MetricName"], step_errors["Statistic"]) == (
        "AWS/Lambda", "Errors", "Sum")
    assert step_errors["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": step}}]
    assert all((a["Threshold"], a["ComparisonOperator"], a["TreatMissingData"]) == (
        1, "GreaterThanOrEqualToThreshold", "notBreaching") for a in (executions, step_errors))


def test_without_a_node_cached_target_there_is_no_workflow_and_targets_repoint_at_once() -> None:
    hook, stack = _hook(lambda c: [HyperPodRefreshTarget(cached_model(c, "small", "models"))])
    assert hook.rollout_workflow is None and hook.rollout_function is None
    template = assertions.Template.from_stack(stack).to_json()
    assert not _resources(template, "AWS::StepFunctions::StateMachine")
    _, refresh = _function(template, contract.REFRESH_HANDLER)
    assert contract.ROLLOUT_STATE_MACHINE not in refresh["Environment"]["Variables"]
    with pytest.raises(ValueError, match=r"no warm rollout workflow; it exists when a HyperPod target is node-cached"):
        hook.metric_rollout_executions_failed()


# -- timeouts -----------------------------------------------------------------------------------

@pytest.mark.parametrize("size_gb, expected", [(145, 2320), (16, 300), (100_000, 86_400), (None, 3600)])
def test_the_default_staging_timeout_is_twice_the_planners_fill_within_the_contract_range(size_gb, expected) -> None:
    size = None if size_gb is None else gigabytes(size_gb)
    assert default_staging_timeout(size).to_seconds() == expected


@pytest.mark.parametrize("options, message", [
    ({"staging_timeout": cdk.Duration.seconds(100)},
     r"models\[0\]\.hyperpod\[0\]\.staging_timeout = 100 seconds -- allowed: 300\.\.86400 seconds"),
    ({"switch_timeout": cdk.Duration.days(2)},
     r"models\[0\]\.hyperpod\[0\]\.switch_timeout = 172800 seconds -- allowed: 300\.\.86400 seconds"),
])
def test_timeouts_outside_their_range_fail_synth_naming_the_field(options, message) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        _hook(lambda c: [_warm(c, **options)])
    assert "_timeout_seconds" not in str(raised.value)  # one problem, under the props' own name


def test_a_deployment_named_by_two_targets_fails_synth() -> None:
    """One deployment reads one prefix: two warm changes of it would drop each other's copies."""
    with pytest.raises(ValueError, match=re.escape("models[].hyperpod[].name = 'models/big' -- named by two")):
        _hook(lambda c: [_warm(c), _warm(c)])


def test_the_longest_timeouts_keep_an_executions_history_far_below_its_limit(monkeypatch) -> None:
    """Polls lengthen with the phase (at most 240 a phase): a day of staging and two days of switch and revert
    write under half of Step Functions' 25,000 events. A poll fixed at a minute would write 43,840: synth says so."""
    day = cdk.Duration.days(1)
    _hook(lambda c: [_warm(c, staging_timeout=day, switch_timeout=day)])
    monkeypatch.setattr(contract, "poll_seconds", lambda timeout: contract.ROLLOUT_POLL_SECONDS)
    with pytest.raises(ValueError, match=r"history events -- allowed: at most 12500 \(Step Functions keeps 25,000"):
        _hook(lambda c: [_warm(c, staging_timeout=day, switch_timeout=day)])


def test_explicit_timeouts_reach_the_contract() -> None:
    _, stack = _hook(lambda c: [_warm(c, size_gb=145, staging_timeout=cdk.Duration.hours(2),
                                         switch_timeout=cdk.Duration.minutes(10))])
    _, function = _function(assertions.Template.from_stack(stack).to_json(), contract.REFRESH_HANDLER)
    (target,) = contract.parse_targets(function["Environment"]["Variables"][contract.REFRESH_TARGETS])["models/big"]
    assert isinstance(target, contract.HyperPodTarget)
    assert (target.staging_timeout_seconds, target.switch_timeout_seconds) == (7200, 600)


# -- the definition under moto's interpreter ---------------------------------------------------

Step = Callable[[contract.RolloutStep], dict[str, Any]]


class Rollout(SimpleNamespace):
    calls: list[contract.RolloutStep]
    waits: list[int]
    backoffs: list[float]
    status: str


@pytest.fixture
def run(warm, monkeypatch) -> Iterator[Callable[[Step], Rollout]]:
    """Runs the synthesized definition under moto's interpreter; each Lambda invoke calls the scripted
    step in-process (moto would run the function in Docker) and answers as Lambda does: the step's
    return value, or ``FunctionError`` with ``errorType`` when it raises. Waits and retry back-offs are
    recorded instead of slept."""
    _, template = warm
    definition = json.dumps(_definition(template))
    rollout = Rollout(calls=[], waits=[], backoffs=[], status="")
    script: list[Step] = []

    def invoke(parameters: dict[str, Any], region: str, state_credentials: Any) -> dict[str, Any]:
        step = contract.RolloutStep.from_json(json.loads(parameters["Payload"]))
        rollout.calls.append(step)
        try:
            return {"StatusCode": 200, "Payload": script[0](step)}
        except Exception as exc:  # what Lambda answers for an unhandled error
            return {"StatusCode": 200, "FunctionError": "Unhandled",
                    "Payload": {"errorType": type(exc).__name__, "errorMessage": str(exc)}}

    monkeypatch.setattr(lambda_eval_utils, "_invoke_lambda_function", invoke)
    monkeypatch.setattr(retrier_decl, "time", SimpleNamespace(sleep=rollout.backoffs.append))
    monkeypatch.setattr(WaitFunction, "_wait_interval", lambda self, env, wait_seconds: rollout.waits.append(wait_seconds))

    def execute(step: Step) -> Rollout:
        script.append(step)
        with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
            client = boto3.client("stepfunctions", region_name=REGION)
            arn = client.create_state_machine(name="rollout", definition=definition,
                                              roleArn=f"arn:aws:iam::{ACCOUNT}:role/rollout")["stateMachineArn"]
            first = contract.RolloutStep(target="hyperpod:c/ns/InferenceEndpointConfig/big", version="v2")
            execution = client.start_execution(
                stateMachineArn=arn, name=contract.rollout_execution_name(first.target, first.version),
                input=json.dumps(first.to_json()))["executionArn"]
            for _ in range(2000):  # the interpreter runs in a thread; bounded, never a timing assert
                rollout.status = client.describe_execution(executionArn=execution)["status"]
                if rollout.status != "RUNNING":
                    break
                time.sleep(0.01)
        return rollout

    yield execute


def _answers(*phases: str) -> Step:
    remaining = list(phases)

    def step(given: contract.RolloutStep) -> dict[str, Any]:
        return given._replace(phase=remaining.pop(0), wait_seconds=contract.ROLLOUT_POLL_SECONDS).to_json()
    return step


def test_a_rollout_stages_switches_and_succeeds(run) -> None:
    rollout = run(_answers("staging", "staging", "switching", "done"))
    assert rollout.status == "SUCCEEDED"
    assert [c.phase for c in rollout.calls] == ["staging", "staging", "staging", "switching"]
    assert {(c.target, c.version, c.abandon, c.execution) for c in rollout.calls} == {
        ("hyperpod:c/ns/InferenceEndpointConfig/big", "v2", False,
         contract.rollout_execution_name("hyperpod:c/ns/InferenceEndpointConfig/big", "v2"))}
    assert rollout.waits == [contract.ROLLOUT_POLL_SECONDS] * 3 and rollout.backoffs == []


def test_a_failed_answer_fails_the_execution_without_abandoning(run) -> None:
    rollout = run(_answers("staging", "failed"))
    assert rollout.status == "FAILED"
    assert [c.abandon for c in rollout.calls] == [False, False] and rollout.waits == [contract.ROLLOUT_POLL_SECONDS]


def test_a_step_that_keeps_failing_is_retried_a_poll_apart_then_abandoned(run) -> None:
    def step(given: contract.RolloutStep) -> dict[str, Any]:
        if given.abandon:
            return given._replace(phase="failed").to_json()
        raise RuntimeError("the state table does not answer")

    rollout = run(step)
    assert rollout.status == "FAILED"
    *failed, last = rollout.calls
    assert len(failed) == MAX_FAILED_STEPS and not any(c.abandon for c in failed)
    assert [c.failures for c in failed] == list(range(MAX_FAILED_STEPS))
    assert (last.target, last.version, last.abandon) == ("hyperpod:c/ns/InferenceEndpointConfig/big", "v2", True)
    assert rollout.waits == [contract.ROLLOUT_POLL_SECONDS] * (MAX_FAILED_STEPS - 1)


def test_a_step_that_fails_now_and_then_carries_on(run) -> None:
    """A failure in a row is counted; an answer starts the count again (the step answers failures 0)."""
    answers = iter(["staging", "error", "error", "staging", "error", "switching", "done"])

    def step(given: contract.RolloutStep) -> dict[str, Any]:
        phase = next(answers)
        if phase == "error":
            raise RuntimeError("throttled")
        return given._replace(phase=phase, failures=0, wait_seconds=contract.ROLLOUT_POLL_SECONDS).to_json()

    rollout = run(step)
    assert rollout.status == "SUCCEEDED"
    assert [c.failures for c in rollout.calls] == [0, 0, 1, 2, 0, 1, 0]


def test_an_unknown_phase_is_abandoned(run) -> None:
    def step(given: contract.RolloutStep) -> dict[str, Any]:
        return given._replace(phase="failed" if given.abandon else "sideways").to_json()

    rollout = run(step)
    assert rollout.status == "FAILED" and [c.abandon for c in rollout.calls] == [False, True]


def test_cdk_json_sets_a_refreshed_cached_models_timeouts_within_the_librarys_range() -> None:
    """A refresh entry's staging_timeout and switch_timeout are the library's RolloutTimeout: same range, parsed
    into Durations, reported with the field and what is allowed."""
    import json

    from pydantic import ValidationError

    from stacks.config.refresh import RefreshedModel

    entry = RefreshedModel.model_validate_json(json.dumps(
        {"prefix": "models/llama", "caches": ["llama"], "staging_timeout": 5400, "switch_timeout": 900}))
    assert entry.staging_timeout is not None and entry.staging_timeout.to_seconds() == 5400
    assert entry.switch_timeout is not None and entry.switch_timeout.to_seconds() == 900
    for key, value in (("staging_timeout", 299), ("switch_timeout", 86401)):
        with pytest.raises(ValidationError, match=key):
            RefreshedModel.model_validate_json(json.dumps({"prefix": "models/llama", "caches": ["llama"], key: value}))
