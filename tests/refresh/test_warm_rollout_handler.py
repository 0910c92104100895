"""The warm rollout through the Lambda entry points: moto's DynamoDB, SQS, EKS and Step Functions, and the
HTTPS Kubernetes stand-in, where the test plays the operator (it writes the statuses the CRDs define).

What the entry points add to the flow tested in test_warm_rollout.py: the execution is started in Step
Functions under its target-and-version name (a second start is a no-op), the Kubernetes calls go over
the wire (POST a cache, list nodes by label, merge-patch, DELETE), and the metrics carry the target.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from refresh_world import NAMESPACE, PREFIX, targets

from hyperwarm.functions.cache_refresh import contract, handler
from hyperwarm.functions.cache_refresh.config import HyperPodTarget
from hyperwarm.functions.cache_refresh.errors import TransientError
from hyperwarm.functions.cache_refresh.state import DynamoStore, StateTable

CACHE = "ModelWeightsCacheConfig"
INSTANCE_TYPE = "ml.g5.8xlarge"
NODES = ("node-a", "node-b")


@pytest.fixture
def warm(world: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The conftest world with a state machine, two nodes and a cache that names its nodes."""
    sfn = boto3.client("stepfunctions", region_name="us-west-2")
    arn = sfn.create_state_machine(name="rollout", definition=json.dumps({
        "StartAt": "Step", "States": {"Step": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::123456789012:role/sfn")["stateMachineArn"]
    monkeypatch.setenv(contract.ROLLOUT_STATE_MACHINE, arn)
    monkeypatch.setenv("HYPERWARM_REFRESH_TARGETS", json.dumps(targets(endpoint=False)))
    handler._settings = None
    for node in NODES:
        world.kube.add({"kind": "Node", "metadata": {"name": node, "labels": {
            "node.kubernetes.io/instance-type": INSTANCE_TYPE}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    world.kube.add({"kind": "Node", "metadata": {"name": "cpu-node", "labels": {
        "node.kubernetes.io/instance-type": "ml.m5.large"}}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    cache = world.kube.get(CACHE, NAMESPACE, "llama-weights")
    cache["spec"]["nodeSelector"] = {"node.kubernetes.io/instance-type": INSTANCE_TYPE}
    world.sfn, world.arn = sfn, arn
    return world


def _target() -> HyperPodTarget:
    return next(t for t in handler.settings().targets[PREFIX] if isinstance(t, HyperPodTarget))


def _record() -> dict[str, Any]:
    return StateTable(DynamoStore(handler.client("dynamodb"), handler.settings().state_table)).get(_target().id)


def _step(context: Any, version: str) -> str:
    answer = handler.on_rollout_step(contract.RolloutStep(_target().id, version).to_json(), context)
    return str(answer["phase"])


def _operator_fills(world: Any, name: str, ready: int) -> None:
    """The operator's status of a cache ready on ``ready`` nodes, for the generation it has."""
    obj = world.kube.get(CACHE, NAMESPACE, name)
    obj["status"] = {"state": "Ready" if ready == len(NODES) else "Downloading", "readyNodes": ready,
                     "targetNodes": len(NODES), "conditions": [
                         {"type": "Ready", "status": "True", "observedGeneration": obj["metadata"]["generation"]}]}


def _operator_rolls(world: Any) -> None:
    obj = world.kube.get("InferenceEndpointConfig", NAMESPACE, "llama")
    obj["status"] = {"state": "DeploymentComplete", "observedGeneration": obj["metadata"]["generation"],
                     "deploymentStatus": {"status": {"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}}}


def test_an_upload_starts_one_execution_and_the_steps_stage_switch_and_retire_over_the_wire(warm: Any, context: Any) -> None:
    event = warm.upload("v2")
    assert handler.lambda_handler(event, context)["status"] == "refreshed"
    name = contract.rollout_execution_name(_target().id, "v2", str(_record()["pending"]["started"]))
    executions = warm.sfn.list_executions(stateMachineArn=warm.arn)["executions"]
    assert [e["name"] for e in executions] == [name]
    assert json.loads(warm.sfn.describe_execution(executionArn=executions[0]["executionArn"])["input"]) == \
        contract.RolloutStep(_target().id, "v2").to_json()
    assert warm.served_hyperpod() == f"{PREFIX}/v1", "nothing serving changes when the rollout starts"

    staged = contract.staged_cache_name("llama-weights", "v2")
    assert _step(context, "v2") == "staging"
    assert warm.kube.created == [(NAMESPACE, staged)]
    assert warm.kube.get(CACHE, NAMESPACE, staged)["spec"]["modelSourceConfig"]["modelLocation"] == f"{PREFIX}/v2"
    _operator_fills(warm, staged, 1)
    assert _step(context, "v2") == "staging", "ready on one node of the two the nodeSelector matches"
    _operator_fills(warm, staged, 2)
    assert _step(context, "v2") == "switching"
    assert warm.served_hyperpod() == f"{PREFIX}/v2"
    assert warm.kube.get(CACHE, NAMESPACE, "llama-weights"), "the old cache stays while old pods may read it"
    _operator_rolls(warm)
    assert _step(context, "v2") == "done"
    assert warm.kube.deleted == [(NAMESPACE, "llama-weights")]
    assert _step(context, "v2") == "done", "a step after the end only answers"
    assert warm.dead_letters() == []


def test_a_second_start_of_the_same_rollout_is_a_no_op(warm: Any) -> None:
    handler._start_workflow(_target(), "v2", "llama-v2-1")
    handler._start_workflow(_target(), "v2", "llama-v2-1")
    assert len(warm.sfn.list_executions(stateMachineArn=warm.arn)["executions"]) == 1


def test_a_start_that_step_functions_refuses_is_retried(warm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contract.ROLLOUT_STATE_MACHINE, warm.arn.replace(":rollout", ":missing"))
    with pytest.raises(TransientError, match="StateMachineDoesNotExist"):
        handler._start_workflow(_target(), "v2", "llama-v2-1")


def test_rollout_metrics_carry_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    published: list[dict[str, Any]] = []

    class Single:
        def __init__(self, **kwargs: Any) -> None:
            self.metric = {**kwargs, "dimensions": dict(kwargs["default_dimensions"])}

        def __enter__(self) -> Single:
            return self

        def __exit__(self, *exc: object) -> None:
            published.append(self.metric)

        def add_dimension(self, name: str, value: str) -> None:
            self.metric["dimensions"][name] = value

    monkeypatch.setattr(handler, "single_metric", Single)
    handler._metric("TimeToWarm", target="hyperpod:c/ns/InferenceEndpointConfig/llama", value=42.0, unit="Seconds")
    assert [(m["name"], m["value"], m["dimensions"]) for m in published] == [
        ("TimeToWarm", 42.0, {"service": contract.service_name(), "target": "hyperpod:c/ns/InferenceEndpointConfig/llama"})]


def test_an_unknown_step_input_is_refused_with_its_fields(warm: Any, context: Any) -> None:
    with pytest.raises(contract.ConfigError, match="target and version"):
        handler.on_rollout_step({"version": "v2"}, context)
