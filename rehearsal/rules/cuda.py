"""GPU driver vs image: a SageMaker variant's host AMI runs the CUDA its model image was built for."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hyperwarm.inference_ami import cuda_ami_problem
from rehearsal.core import Assembly, Finding, ref_target, rule


def _image(resources: dict[str, Any], model_ref: Any) -> str | None:
    props = resources.get(ref_target(model_ref) or "", {}).get("Properties", {})
    container = props.get("PrimaryContainer") or next(iter(props.get("Containers", [])), {})
    image = container.get("Image")
    return image if isinstance(image, str) else None


def _variant_of_endpoint(resources: dict[str, Any], endpoint_name: Any, variant: str) -> dict[str, Any]:
    """The ProductionVariant `variant` of the endpoint named `endpoint_name` (a Ref or a literal name)."""
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::SageMaker::Endpoint":
            continue
        props = resource.get("Properties", {})
        if ref_target(endpoint_name) == logical_id or props.get("EndpointName") == endpoint_name:
            config = resources.get(ref_target(props.get("EndpointConfigName")) or "", {})
            for v in config.get("Properties", {}).get("ProductionVariants", []):
                if v.get("VariantName") == variant:
                    return v
    return {}


@rule("cuda.inference-ami",
      source="https://docs.aws.amazon.com/sagemaker/latest/dg/inference-gpu-drivers.html")
def inference_ami(assembly: Assembly) -> Iterator[Finding]:
    """A variant whose model image tag names a CUDA version (`cu130`) runs on an InferenceAmiVersion
    whose NVIDIA driver supports it (driver 535: CUDA 12.2, 550: 12.4, 580: 13.0, per the SageMaker
    API's InferenceAmiVersion documentation). Without one SageMaker picks its default AMI (driver 470 or
    535), the container cannot start its CUDA runtime, and the endpoint never serves."""
    for stack, logical_id, config in assembly.resources("AWS::SageMaker::EndpointConfig"):
        resources = assembly.templates[stack].get("Resources", {})
        for variant in config.get("Properties", {}).get("ProductionVariants", []):
            image = _image(resources, variant.get("ModelName"))
            problem = image and cuda_ami_problem(image, variant.get("InferenceAmiVersion"))
            if problem:
                yield Finding("cuda.inference-ami", stack, logical_id, f"variant {variant.get('VariantName')}: "
                                                                     f"InferenceAmiVersion {variant.get('InferenceAmiVersion')!r}: {problem}")
    for stack, logical_id, component in assembly.resources("AWS::SageMaker::InferenceComponent"):
        resources = assembly.templates[stack].get("Resources", {})
        props = component.get("Properties", {})
        image = _image(resources, props.get("Specification", {}).get("ModelName"))
        variant = _variant_of_endpoint(resources, props.get("EndpointName"), props.get("VariantName"))
        problem = image and cuda_ami_problem(image, variant.get("InferenceAmiVersion"))
        if problem:
            yield Finding("cuda.inference-ami", stack, logical_id, f"variant {props.get('VariantName')}: "
                                                                 f"InferenceAmiVersion {variant.get('InferenceAmiVersion')!r}: {problem}")
