"""The warm version change through the Lambda entry points: moto's DynamoDB, SQS, EKS and Step Functions, and the
HTTPS Kubernetes stand-in, where the test plays the cluster (the filler labels nodes, the operator replaces pods).

What the entry points add to the flow tested in test_warm_rollout.py: the execution is started in Step
Functions under its target-and-version name (a second start is a no-op), the Kubernetes calls go over
the wire (GET and merge-patch of the filler DaemonSet and the deployment, pods listed, nodes listed by label),
and the metrics carry the target.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from cluster_model import rendered
from refresh_world import BUCKET, NAMESPACE, PREFIX, targets

from hyperwarm.functions.cache_refresh import contract, handler
from hyperwarm.functions.cache_refresh.config import HyperPodTarget
from hyperwarm.functions.cache_refresh.errors import TransientError
from hyperwarm.functions.cache_refresh.state import DynamoStore, StateTable
from hyperwarm.functions.node_cache import layout

NODES = ("node-a", "node-b")
FILLER = layout.filler_name("llama")


@pytest.fixture
def warm(world: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The conftest world with a state machine, a node-cached deployment and its filler as the construct renders
    them, two nodes of its group holding v1 and one node of another group, and its two pods."""
    sfn = boto3.client("stepfunctions", region_name="us-west-2")
    arn = sfn.create_state_machine(name="rollout", definition=json.dumps({
        "StartAt": "Step", "States": {"Step": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::123456789012:role/sfn")["stateMachineArn"]
    monkeypatch.setenv(contract.ROLLOUT_STATE_MACHINE, arn)
    items = targets(endpoint=False)
    items[PREFIX][0]["node_cache"] = {"model": "llama"}
    monkeypatch.setenv("HYPERWARM_REFRESH_TARGETS", json.dumps(items))
    handler._settings = None
    world.kube.objects.clear()
    deployment, filler = rendered(BUCKET, PREFIX, "v1", replicas=2)
    for obj in (deployment, filler):
        obj["metadata"]["namespace"] = NAMESPACE
        world.kube.add(obj)
    for node in NODES:
        world.kube.add({"kind": "Node", "metadata": {"name": node, "labels": {
            layout.GROUP_LABEL: "inference", layout.ready_label("llama", "v1"): "true"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"nvidia.com/gpu": "8"}}})
    world.kube.add({"kind": "Node", "metadata": {"name": "cpu-node", "labels": {layout.GROUP_LABEL: "system"}},
                    "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    _pods(world, "v1")
    world.sfn, world.arn = sfn, arn
    return world


def _pods(world: Any, version: str) -> None:
    """The deployment's two pods, on version ``version`` (the operator replaced them)."""
    for key in [k for k in world.kube.objects if k[0] == "pods"]:
        del world.kube.objects[key]
    for node in NODES:
        world.kube.add({"kind": "Pod", "metadata": {"name": f"llama-{version}-{node}", "namespace": NAMESPACE},
                        "spec": {"nodeName": node, "volumes": [layout.volume(layout.version_dir(
                            layout.DEFAULT_HOST_PATH, "llama", version))]},
                        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})


def _filler_labels(world: Any, version: str) -> None:
    for node in NODES:
        world.kube.get("Node", "", node)["metadata"]["labels"][layout.ready_label("llama", version)] = "true"


def _target() -> HyperPodTarget:
    return next(t for t in handler.settings().targets[PREFIX] if isinstance(t, HyperPodTarget))


def _record() -> dict[str, Any]:
    return StateTable(DynamoStore(handler.client("dynamodb"), handler.settings().state_table)).get(_target().id)


def _step(context: Any, version: str) -> str:
    """A step as the rollout's own execution sends it (its name, ``$$.Execution.Name``, is the record's)."""
    execution = str((_record().get("pending") or {}).get("config", ""))
    answer = handler.on_rollout_step(contract.RolloutStep(_target().id, version, execution=execution).to_json(),
                                     context)
    return str(answer["phase"])


def _reads(world: Any) -> str | None:
    return layout.version_of_path(world.kube.get("InferenceEndpointConfig", NAMESPACE, "llama")["spec"]["kubernetes"][
        "volumes"][0]["hostPath"]["path"], layout.DEFAULT_HOST_PATH, "llama")


def test_an_upload_starts_one_execution_and_the_steps_stage_switch_and_retire_over_the_wire(warm: Any, context: Any) -> None:
    event = warm.upload("v2")
    assert handler.lambda_handler(event, context)["status"] == "refreshed"
    name = contract.rollout_execution_name(_target().id, "v2", str(_record()["pending"]["started"]))
    executions = warm.sfn.list_executions(stateMachineArn=warm.arn)["executions"]
    assert [e["name"] for e in executions] == [name]
    assert json.loads(warm.sfn.describe_execution(executionArn=executions[0]["executionArn"])["input"]) == \
        contract.RolloutStep(_target().id, "v2").to_json()
    assert _reads(warm) == "v1", "nothing serving changes when the rollout starts"

    assert _step(context, "v2") == "staging"
    kept = layout.filler_versions(warm.kube.get("DaemonSet", NAMESPACE, FILLER))
    assert [v.version for v in kept] == ["v1", "v2"] and kept[1].location == f"{PREFIX}/v2"
    assert _step(context, "v2") == "staging", "no node holds v2 yet"
    _filler_labels(warm, "v2")
    assert _step(context, "v2") == "switching"
    assert _reads(warm) == "v2"
    assert [v.version for v in layout.filler_versions(warm.kube.get("DaemonSet", NAMESPACE, FILLER))] == ["v1", "v2"], \
        "the old copy stays while old pods may read it"
    assert _step(context, "v2") == "switching", "the pods still read v1"
    _pods(warm, "v2")
    assert _step(context, "v2") == "done"
    assert [v.version for v in layout.filler_versions(warm.kube.get("DaemonSet", NAMESPACE, FILLER))] == ["v2"]
    assert _step(context, "v2") == "done", "a step after the end only answers"
    assert _record()["current_version"] == "v2" and _record()["last_rollout"]["cold_pods"] == 0
    assert warm.dead_letters() == []
    assert {(p[0], p[1]) for p in warm.kube.patches} == {(NAMESPACE, FILLER), (NAMESPACE, "llama")}


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
