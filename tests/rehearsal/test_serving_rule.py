"""serving.model-and-parallelism: every model container and HyperPod worker names its model and a
parallelism that matches its GPUs; each case is a defective template the rule must flag."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rehearsal import Assembly
from rehearsal.rules.serving import RULE, model_servers_know_what_to_serve

VLLM = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker"
TOLD = {"SM_VLLM_MODEL": "/opt/ml/model", "SM_VLLM_TENSOR_PARALLEL_SIZE": "8"}


def endpoint_stack(environment: dict[str, str] | None, image: Any = VLLM, instance_type: str = "ml.p5.48xlarge",
                   metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"Image": image}
    if environment is not None:
        container["Environment"] = environment
    model: dict[str, Any] = {"Type": "AWS::SageMaker::Model", "Properties": {"PrimaryContainer": container}}
    if metadata:
        model["Metadata"] = metadata
    return {"Resources": {
        "Model": model,
        "Config": {"Type": "AWS::SageMaker::EndpointConfig", "Properties": {"ProductionVariants": [
            {"VariantName": "main", "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]},
             "InstanceType": instance_type, "InitialInstanceCount": 1}]}},
    }}


def caches_stack(env: list[dict[str, str]], gpus: int = 4, port: int = 8080,
                 annotations: dict[str, str] | None = None, image: str = VLLM) -> dict[str, Any]:
    worker = {"image": image, "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}},
              "modelInvocationPort": {"containerPort": port}, "modelVolumeMount": {"name": "m"},
              "environmentVariables": env}
    obj = {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
           "metadata": {"name": "llama", **({"annotations": annotations} if annotations else {})},
           "spec": {"worker": worker}}
    return {"Resources": {"Manifest": {"Type": "Custom::AWSCDK-EKS-KubernetesResource",
                                       "Properties": {"Manifest": json.dumps([obj])}}}}


def findings(template: dict[str, Any]) -> list[str]:
    found = model_servers_know_what_to_serve(Assembly.from_templates({"s": template}))
    assert all(f.rule == RULE for f in found)
    return [f"{f.resource}: {f.message}" for f in found]


def test_a_model_told_its_model_and_all_gpus_passes() -> None:
    assert findings(endpoint_stack(TOLD)) == []


def test_a_model_without_environment_is_flagged() -> None:
    """The defect this rule was written for: SageMaker Models had no Environment at all."""
    assert findings(endpoint_stack(None)) == [
        "Model: no model location: set SM_VLLM_MODEL; without it the vllm server starts no model "
        "or a default one it must download"]


def test_a_70b_model_on_one_of_eight_gpus_is_flagged() -> None:
    assert findings(endpoint_stack({**TOLD, "SM_VLLM_TENSOR_PARALLEL_SIZE": "1"})) == [
        "Model: vllm uses 1 GPU(s) (SM_VLLM_TENSOR_PARALLEL_SIZE=1) but ml.p5.48xlarge has 8 GPU(s); "
        "they must be equal"]


def test_missing_tensor_parallelism_is_flagged() -> None:
    assert findings(endpoint_stack({"SM_VLLM_MODEL": "/opt/ml/model"})) == [
        "Model: no tensor parallelism: set SM_VLLM_TENSOR_PARALLEL_SIZE (ml.p5.48xlarge has 8 GPU(s))"]


def test_a_cpu_variant_needs_no_parallelism() -> None:
    assert findings(endpoint_stack({"SM_VLLM_MODEL": "/opt/ml/model"}, instance_type="ml.m5.xlarge")) == []


def test_an_inference_components_accelerators_are_its_gpus() -> None:
    template = endpoint_stack(TOLD)
    template["Resources"]["Config"]["Properties"]["ProductionVariants"][0].pop("ModelName")
    template["Resources"]["Component"] = {"Type": "AWS::SageMaker::InferenceComponent", "Properties": {
        "Specification": {"ModelName": {"Fn::GetAtt": ["Model", "ModelName"]},
                          "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 2}}}}
    assert findings(template) == [
        "Model: vllm uses 8 GPU(s) (SM_VLLM_TENSOR_PARALLEL_SIZE=8) but each copy gets 2 accelerator(s); "
        "they must be equal"]


def test_an_image_it_cannot_recognise_needs_the_serving_record() -> None:
    image = {"Fn::Join": ["", ["1.dkr.ecr/", {"Ref": "Repo"}, ":1"]]}
    assert findings(endpoint_stack(TOLD, image=image)) == [
        'Model: cannot tell how the server in image {"Fn::Join": ["", ["1.dkr.ecr/", {"Ref": "Repo"}, ":1"]]} reads '
        "its model and parallelism: use an AWS serving image or record the convention (hyperwarm:serving)"]
    assert findings(endpoint_stack(TOLD, image=image, metadata={"hyperwarm:serving": {"framework": "vllm"}})) == []


def test_a_custom_server_is_checked_by_its_recorded_variables() -> None:
    record = {"hyperwarm:serving": {"framework": "custom", "model_env": "MODEL_DIR", "parallel_env": "NUM_GPUS"}}
    custom = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-server:1"
    assert findings(endpoint_stack({"MODEL_DIR": "/opt/ml/model", "NUM_GPUS": "8"}, custom, metadata=record)) == []
    assert findings(endpoint_stack({"MODEL_DIR": "/opt/ml/model", "NUM_GPUS": "3"}, custom, metadata=record)) == [
        "Model: custom uses 3 GPU(s) (NUM_GPUS=3) but ml.p5.48xlarge has 8 GPU(s); it must divide them"]


WORKER_TOLD = [{"name": "SM_VLLM_MODEL", "value": "/opt/ml/model"}, {"name": "SM_VLLM_TENSOR_PARALLEL_SIZE", "value": "4"}]


def test_a_worker_told_its_model_and_gpus_passes() -> None:
    assert findings(caches_stack(WORKER_TOLD)) == []


@pytest.mark.parametrize("env, expected", [
    ([], "no model location: set SM_VLLM_MODEL"),
    (WORKER_TOLD[:1], "no tensor parallelism: set SM_VLLM_TENSOR_PARALLEL_SIZE (the worker's nvidia.com/gpu is 4)"),
    ([WORKER_TOLD[0], {"name": "SM_VLLM_TENSOR_PARALLEL_SIZE", "value": "8"}],
     "vllm uses 8 GPU(s) (SM_VLLM_TENSOR_PARALLEL_SIZE=8) but the worker's nvidia.com/gpu is 4; they must be equal"),
])
def test_a_defective_worker_is_flagged(env: list[dict[str, str]], expected: str) -> None:
    (finding,) = findings(caches_stack(env))
    assert finding.startswith(f"Manifest/InferenceEndpointConfig/llama: {expected}")


def test_a_worker_on_another_port_must_move_the_server_there() -> None:
    (finding,) = findings(caches_stack(WORKER_TOLD, port=9000))
    assert finding.endswith("the invocation port is 9000 but the vllm server listens on 8080; set SM_VLLM_PORT=9000")
    assert findings(caches_stack([*WORKER_TOLD, {"name": "SM_VLLM_PORT", "value": "9000"}], port=9000)) == []


def test_the_rule_and_the_serving_rules_load_without_aws_cdk() -> None:
    code = "import sys, rehearsal.rules.serving, hyperwarm.serving.settings; sys.exit('aws_cdk' in sys.modules)"
    repo = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=repo, check=False).returncode == 0
