"""Every model server is told what to serve and over how many GPUs."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from hyperwarm.cluster.catalog import CATALOG
from hyperwarm.serving.settings import (
    SERVING_ANNOTATION,
    SERVING_METADATA,
    SERVING_PORT,
    ServerConvention,
    convention_from_metadata,
    convention_of_image,
    gpus_used,
    parallelism_fits,
)
from rehearsal.core import Assembly, Finding, rule

RULE = "serving.model-and-parallelism"


@rule(RULE, source="https://github.com/aws/deep-learning-containers/blob/main/scripts/docker/vllm/sagemaker_args.py")
def model_servers_know_what_to_serve(assembly: Assembly) -> Iterator[Finding]:
    """Every SageMaker Model container and every HyperPod InferenceEndpointConfig worker names its
    model and a parallelism that matches the GPUs it gets.

    AWS's serving containers take their settings only from environment variables: the vLLM DLC's
    entrypoint turns `SM_VLLM_<FLAG>` into `--<flag>` (and ignores container arguments), SGLang reads
    `SM_SGLANG_*`, LMI `HF_MODEL_ID`/`OPTION_*`, TGI `HF_MODEL_ID`/`SM_NUM_GPUS`. With no model,
    vLLM starts its default model, a download that fails under network isolation; with no tensor
    parallelism a model sized for eight GPUs lands on one and runs out of memory. GPUs: the variant's
    instance type (hyperwarm's catalog) or its inference component's accelerators; a worker's
    `nvidia.com/gpu` limit. Images the rule cannot recognise must carry hyperwarm's serving record.
    """
    for stack, logical_id, model in assembly.resources("AWS::SageMaker::Model"):
        gpus = _sagemaker_gpus(assembly.templates[stack], logical_id)
        record = model.get("Metadata", {}).get(SERVING_METADATA, {})
        props = model.get("Properties", {})
        for container in [props.get("PrimaryContainer"), *props.get("Containers", [])]:
            if container is None:
                continue
            problem = _problem(container.get("Image"), record, container.get("Environment", {}), gpus)
            if problem:
                yield Finding(RULE, stack, logical_id, problem)
    for stack, logical_id, obj in assembly.kubernetes_objects():
        if obj.get("kind") != "InferenceEndpointConfig":
            continue
        worker = obj.get("spec", {}).get("worker", {})
        resources = worker.get("resources", {})
        gpus = resources.get("limits", {}).get("nvidia.com/gpu", resources.get("requests", {}).get("nvidia.com/gpu", 0))
        env = {e.get("name"): e.get("value", "") for e in worker.get("environmentVariables", [])}
        record = json.loads(obj.get("metadata", {}).get("annotations", {}).get(SERVING_ANNOTATION, "{}"))
        port = worker.get("modelInvocationPort", {}).get("containerPort", SERVING_PORT)
        problem = _problem(worker.get("image"), record, env, (int(gpus), f"the worker's nvidia.com/gpu is {gpus}"),
                           port=port)
        if problem:
            yield Finding(RULE, stack, f"{logical_id}/InferenceEndpointConfig/{obj['metadata'].get('name')}", problem)


def _problem(image: Any, record: Mapping[str, Any], env: Mapping[str, str], gpus: tuple[int, str] | None,
             port: int = SERVING_PORT) -> str | None:
    convention = (convention_of_image(image) if isinstance(image, str) else None) or convention_from_metadata(record)
    if convention is None:
        return (f"cannot tell how the server in image {json.dumps(image)} reads its model and parallelism: "
                f"use an AWS serving image or record the convention ({SERVING_METADATA})")
    if not any(env.get(name) for name in convention.model_envs):
        return (f"no model location: set {' or '.join(convention.model_envs)}; without it the {convention.name} "
                "server starts no model or a default one it must download")
    if port != SERVING_PORT and (convention.port_env is None or env.get(convention.port_env) != str(port)):
        return (f"the invocation port is {port} but the {convention.name} server listens on {SERVING_PORT}"
                + (f"; set {convention.port_env}={port}" if convention.port_env else ""))
    return _parallelism_problem(convention, env, gpus)


def _parallelism_problem(convention: ServerConvention, env: Mapping[str, str],
                         gpus: tuple[int, str] | None) -> str | None:
    tensor = convention.parallel_envs[0]
    if gpus is None:
        if not any(n in env for n in tensor):
            return f"no tensor parallelism ({tensor[0]}) and the GPUs of the model are unknown"
        return None
    count, source = gpus
    if count > 0 and not any(n in env for n in tensor):
        return f"no tensor parallelism: set {tensor[0]} ({source})"
    used = gpus_used(convention, env, count)
    if used is None:
        return f"a parallelism setting of {convention.name} is not a number: {_shown(convention, env)}"
    if not parallelism_fits(convention, used, count):
        return (f"{convention.name} uses {used} GPU(s) ({_shown(convention, env)}) but {source}; "
                + ("they must be equal" if convention.rule == "equals" else "it must divide them"))
    return None


def _shown(convention: ServerConvention, env: Mapping[str, str]) -> str:
    return " x ".join(f"{n}={env[n]}" for names in convention.parallel_envs for n in names if n in env) or "none"


def _sagemaker_gpus(template: Mapping[str, Any], model_id: str) -> tuple[int, str] | None:
    """GPUs of the variant or inference component that serves Model `model_id` (None when unknown)."""
    for resource in template.get("Resources", {}).values():
        props = resource.get("Properties", {})
        if resource.get("Type") == "AWS::SageMaker::EndpointConfig":
            for pv in props.get("ProductionVariants", []):
                if not _names(pv.get("ModelName"), model_id):
                    continue
                if "ServerlessConfig" in pv:
                    return 0, "a serverless variant has no GPU"
                spec = CATALOG.get(pv.get("InstanceType"))
                return (spec.gpus, f"{spec.instance_type} has {spec.gpus} GPU(s)") if spec else None
        if resource.get("Type") == "AWS::SageMaker::InferenceComponent":
            spec = props.get("Specification", {})
            if _names(spec.get("ModelName"), model_id):
                n = spec.get("ComputeResourceRequirements", {}).get("NumberOfAcceleratorDevicesRequired")
                return (int(n), f"each copy gets {int(n)} accelerator(s)") if isinstance(n, (int, float)) else None
    return None


def _names(value: Any, logical_id: str) -> bool:
    return value in ({"Fn::GetAtt": [logical_id, "ModelName"]}, {"Fn::GetAtt": f"{logical_id}.ModelName"},
                     {"Ref": logical_id})
