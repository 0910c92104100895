"""GPU driver vs image: the host AMI under a model server runs the CUDA its image was built for, on SageMaker
variants (``InferenceAmiVersion``) and on HyperPod workers (the HyperPod EKS AMI)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hyperwarm.cluster.node_capacity import workloads_from_objects
from hyperwarm.serving.inference_ami import (
    HYPERPOD_AMI_RELEASE,
    INFERENCE_AMI_CUDA,
    cuda_ami_problem,
    hyperpod_cuda_problem,
    image_cuda,
)
from rehearsal.core import Assembly, Finding, ref_target, rule, text_of

_TOKEN = "${TOKEN}"


def _image(resources: dict[str, Any], model_ref: Any) -> str | None:
    """The model's image as text (deploy-time parts read ``${TOKEN}``); None when the model names no image."""
    props = resources.get(ref_target(model_ref) or "", {}).get("Properties", {})
    container = props.get("PrimaryContainer") or next(iter(props.get("Containers", [])), {})
    return text_of(container["Image"], _TOKEN) if "Image" in container else None


def _unseen_tag(image: str) -> bool:
    """Whether the image's tag (where a CUDA version is named) is known only at deploy time."""
    return _TOKEN in image.rsplit("/", 1)[-1] or image == _TOKEN


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


def _variant_problem(image: str | None, ami: Any) -> str | None:
    """What is wrong, or unknown, about serving ``image`` on a variant with ``InferenceAmiVersion`` ``ami``."""
    if image is None:
        return None
    if _unseen_tag(image):
        return f"the image {image} has a tag known only at deploy time, so the CUDA it needs cannot be checked"
    if image_cuda(image) is not None and ami is not None and ami not in INFERENCE_AMI_CUDA:
        return (f"InferenceAmiVersion {ami!r} is unknown to hyperwarm (hyperwarm.serving.inference_ami), so its driver "
                f"cannot be checked against the CUDA the image {image} needs")
    problem = cuda_ami_problem(image, ami)
    return f"InferenceAmiVersion {ami!r}: {problem}" if problem else None


def _sagemaker_findings(assembly: Assembly) -> Iterator[Finding]:
    for stack, logical_id, config in assembly.resources("AWS::SageMaker::EndpointConfig"):
        resources = assembly.templates[stack].get("Resources", {})
        for variant in config.get("Properties", {}).get("ProductionVariants", []):
            problem = _variant_problem(_image(resources, variant.get("ModelName")), variant.get("InferenceAmiVersion"))
            if problem:
                yield Finding("cuda.inference-ami", stack, logical_id, f"variant {variant.get('VariantName')}: {problem}")
    for stack, logical_id, component in assembly.resources("AWS::SageMaker::InferenceComponent"):
        resources = assembly.templates[stack].get("Resources", {})
        props = component.get("Properties", {})
        image = _image(resources, props.get("Specification", {}).get("ModelName"))
        variant = _variant_of_endpoint(resources, props.get("EndpointName"), props.get("VariantName"))
        problem = _variant_problem(image, variant.get("InferenceAmiVersion"))
        if problem:
            yield Finding("cuda.inference-ami", stack, logical_id, f"variant {props.get('VariantName')}: {problem}")


def _group_problem(group: dict[str, Any], image: str) -> str | None:
    """What is wrong, or unknown, about running ``image`` on a node of HyperPod instance group ``group``."""
    name = group.get("InstanceGroupName", "?")
    if "ImageId" in group:
        return f"instance group {name!r} runs a custom AMI (ImageId), whose NVIDIA driver the rehearsal cannot know"
    release = group.get("ImageReleaseVersion")
    if release is not None and not (isinstance(release, str) and HYPERPOD_AMI_RELEASE.match(release)):
        return (f"instance group {name!r} pins ImageReleaseVersion {release!r}, whose NVIDIA driver hyperwarm does "
                "not know (HyperPod EKS AMIs 1.x run driver 580)")
    problem = hyperpod_cuda_problem(image)
    return f"instance group {name!r}: {problem}" if problem else None


def _hyperpod_findings(assembly: Assembly) -> Iterator[Finding]:
    clusters = {}
    for stack, _, cluster in assembly.resources("AWS::SageMaker::Cluster"):
        eks = cluster.get("Properties", {}).get("Orchestrator", {}).get("Eks", {}).get("ClusterArn")
        key = assembly.referenced(stack, eks)
        if key:
            clusters[key] = cluster.get("Properties", {}).get("InstanceGroups", [])
    for stack, logical_id, obj in assembly.kubernetes_objects():
        if obj.get("kind") != "InferenceEndpointConfig":
            continue
        where = f"InferenceEndpointConfig {obj.get('metadata', {}).get('name', '?')}"
        image = obj.get("spec", {}).get("worker", {}).get("image")
        if not isinstance(image, str) or _unseen_tag(image):
            yield Finding("cuda.hyperpod-ami", stack, logical_id, f"{where}: its worker image {image!r} is known only "
                          "at deploy time, so the CUDA it needs cannot be checked")
            continue
        if image_cuda(image) is None:
            continue  # an image that names no CUDA version claims none
        resource = assembly.templates[stack]["Resources"][logical_id]
        groups = clusters.get(assembly.referenced(stack, resource.get("Properties", {}).get("ClusterName")))
        if groups is None:
            yield Finding("cuda.hyperpod-ami", stack, logical_id, f"{where}: the rehearsal cannot follow its ClusterName "
                          "to a HyperPod cluster in the assembly, so the NVIDIA driver of its nodes is unknown")
            continue
        (workload,) = workloads_from_objects([obj])
        for group in groups:
            if workload.selects(group.get("InstanceGroupName"), group.get("InstanceType")):
                problem = _group_problem(group, image)
                if problem:
                    yield Finding("cuda.hyperpod-ami", stack, logical_id, f"{where}: {problem}")


@rule("cuda.inference-ami", source="https://docs.aws.amazon.com/sagemaker/latest/dg/inference-gpu-drivers.html")
def inference_ami(assembly: Assembly) -> Iterator[Finding]:
    """A variant whose model image tag names a CUDA version (`cu130`) runs on an InferenceAmiVersion
    whose NVIDIA driver supports it (driver 535: CUDA 12.2, 550: 12.4, 580: 13.0, per the SageMaker
    API's InferenceAmiVersion documentation). Without one SageMaker picks its default AMI (driver 470 or
    535), the container cannot start its CUDA runtime, and the endpoint never serves. An AMI hyperwarm
    does not know, or an image tag known only at deploy time, is a finding: the rule cannot check them."""
    yield from _sagemaker_findings(assembly)


@rule("cuda.hyperpod-ami",
      source="https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-release-ami-eks.html")
def hyperpod_ami(assembly: Assembly) -> Iterator[Finding]:
    """A HyperPod worker (``InferenceEndpointConfig``) whose image tag names a CUDA version runs on nodes whose
    NVIDIA driver supports it. Every supported HyperPod EKS AMI (1.0.x to 1.3.x) ships driver 580, which runs
    CUDA up to 13.0 (HyperPod AMI support policy and AMI release notes): a cu131 image fails to start its CUDA
    runtime on every node. Nodes on a custom AMI or an unknown ``ImageReleaseVersion``, a worker image known only
    at deploy time, and a manifest whose HyperPod cluster the rule cannot find are findings: it cannot check them."""
    yield from _hyperpod_findings(assembly)
