"""What makes :class:`~hyperwarm.endpoints.props.InferenceEndpointProps` invalid, as pure functions.

No constructs, no aws-cdk: every rule returns its problems as ``field = value -- rule`` so the
construct reports all of them at once. Values that are CDK tokens are skipped (known only at deploy).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hyperwarm._internal.catalog import CATALOG
from hyperwarm._internal.constraints import WRONG_TYPE, field_problems
from hyperwarm._internal.tokens import resolved, unresolved
from hyperwarm.endpoints.props import METRIC_PUBLISH_FREQUENCIES
from hyperwarm.endpoints.routing import routing_problems
from hyperwarm.functions.cache_refresh import contract
from hyperwarm.serving.inference_ami import INFERENCE_AMI_CUDA, cuda_ami_problem
from hyperwarm.serving.settings import (
    ServerSettings,
    sagemaker_placement,
    server_settings,
)

if TYPE_CHECKING:
    import aws_cdk as cdk

    from hyperwarm.endpoints.props import (
        DeploymentGuardrails,
        InferenceEndpointProps,
        ProductionVariant,
        ServerlessSpec,
        VariantAutoscaling,
    )

VARIANT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>\S+)$")
# EC2 families with local NVMe instance store beyond hyperwarm's catalog: SageMaker rejects an
# EndpointConfig KmsKeyId when any variant runs on one (the volumes are hardware-encrypted).
_LOCAL_STORAGE_FAMILY = re.compile(r"^ml\.([a-z]+\d+[a-z]*d[a-z]*|g5|g6|g6e|g7e|p5|p5e|p5en|p6-[a-z0-9]+|p6e-[a-z0-9]+"
                                   r"|trn1|trn1n|trn2|dl1)\.")


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key); raises ValueError otherwise."""
    match = S3_URI.match(uri)
    if not match:
        raise ValueError(f"{uri!r} is not s3://bucket/key")
    return match["bucket"], match["key"]


def has_local_storage(instance_type: str) -> bool:
    """Whether ``instance_type`` brings NVMe instance store (then SageMaker refuses an EndpointConfig KMS key)."""
    spec = CATALOG.get(instance_type)
    if spec is not None:
        return spec.has_nvme
    return bool(_LOCAL_STORAGE_FAMILY.match(instance_type))


def takes_volume_key(variants: Sequence[ProductionVariant]) -> bool:
    """Whether SageMaker accepts a storage-volume key: only when NO variant is serverless or has local NVMe."""
    return all(v.serverless is None and v.instance_type and not has_local_storage(v.instance_type) for v in variants)


def variant_server_settings(variant: ProductionVariant) -> ServerSettings:
    """What ``variant``'s model container is told (environment) and what is wrong with it."""
    spec = variant.inference_component
    placement = sagemaker_placement(
        instance_type=variant.instance_type, serverless=variant.serverless is not None, component=spec is not None,
        accelerators_per_copy=spec.accelerators_per_copy if spec else None,
        has_model_data=variant.model.model_data is not None)
    image = variant.model.image
    return server_settings(variant.model.serving, placement, image=image.describe(),
                           image_framework=image.framework, image_uri=image.literal_uri)


def endpoint_problems(props: InferenceEndpointProps) -> list[str]:
    """Every problem of ``props``, variant problems prefixed with ``variant '<name>': ``."""
    # the props' ranges, guardrails and data capture included; a shift's percent has its rule per type below
    errors = field_problems(props, exclude=("guardrails.traffic.type", "guardrails.traffic.percent", "metric_publish_frequency"))
    name = props.endpoint_name
    name_problem = contract.endpoint_name_problem(name) if name is not None and resolved(name) else None
    if name_problem:
        errors.append(f"endpoint_name = {props.endpoint_name!r} -- {name_problem}")
    seen: set[str] = set()
    for v in props.variants:
        where = f"variant {v.name!r}"
        if not VARIANT_NAME.match(v.name):
            errors.append(f"{where}: name = {v.name!r} -- allowed: 1..63 letters, digits or hyphens, "
                          "starting and ending with a letter or digit")
        if v.name in seen:
            errors.append(f"{where}: name = {v.name!r} -- variant names must be unique in the endpoint")
        seen.add(v.name)
        errors += [f"{where}: {e}" for e in variant_problems(v)]
    if props.guardrails:
        errors += guardrail_problems(props.guardrails, props.endpoint_name)
    if len({bool(v.inference_component) for v in props.variants}) > 1:
        errors.append("variants -- either every variant uses an inference component or none does")
    errors += metrics_problems(props.metric_publish_frequency)
    return errors


def metrics_problems(frequency: cdk.Duration | None) -> list[str]:
    """``metric_publish_frequency``, when known at synth, is one SageMaker accepts."""
    if frequency is not None and not hasattr(frequency, "to_milliseconds"):  # no aws-cdk loaded here: duck-typed
        return [f"metric_publish_frequency = {frequency!r} -- {WRONG_TYPE} a cdk.Duration, e.g. cdk.Duration.seconds(60)"]
    if frequency is None or frequency.is_unresolved():
        return []
    seconds = frequency.to_milliseconds() / 1000
    if seconds in METRIC_PUBLISH_FREQUENCIES:
        return []
    allowed = ", ".join(str(s) for s in METRIC_PUBLISH_FREQUENCIES)
    return [f"metric_publish_frequency = {seconds:g} s -- allowed: {allowed} seconds"]


def variant_problems(v: ProductionVariant) -> list[str]:
    """Problems of one variant: capacity, weight, routing, model data, server settings, autoscaling."""
    errors = field_problems(v, exclude=("routing",))  # ranges of the variant and its parts; routing's below
    errors += _capacity_problems(v)
    if v.routing is not None:
        errors += routing_problems(v.routing, serverless=v.serverless is not None,
                                   min_instances=v.min_instances, max_instances=v.max_instances)[0]
    data = v.model.model_data
    if data is not None and resolved(data) and not S3_URI.match(data):
        errors.append(f"model.model_data = {data!r} -- allowed: s3://bucket/key")
    errors += [f"model.{p}" for p in variant_server_settings(v).problems]
    if v.autoscaling is not None:
        errors += autoscaling_problems(v.autoscaling, component=v.inference_component is not None)
    return errors


def _capacity_problems(v: ProductionVariant) -> list[str]:
    if v.serverless is not None:
        errors = [f"instance_type = {v.instance_type!r} -- serverless variants take no instance type"] \
            if v.instance_type is not None else []
        if v.autoscaling is not None or v.inference_component is not None:
            errors.append("serverless -- serverless variants take neither autoscaling nor inference components")
        return errors + serverless_problems(v.serverless)
    errors = []
    if v.instance_type is None:
        errors.append("instance_type = None -- an ml.* instance type is required unless the variant is serverless")
    elif resolved(v.instance_type) and not v.instance_type.startswith("ml."):
        errors.append(f"instance_type = {v.instance_type!r} -- allowed: an ml.* SageMaker instance type")
    return errors


def serverless_problems(s: ServerlessSpec) -> list[str]:
    """Problems of a serverless variant beyond its fields' ranges: botocore's ``ServerlessProvisionedConcurrency``
    "should be less than or equal to ``MaxConcurrency``"."""
    provisioned, most = s.provisioned_concurrency, s.max_concurrency
    if provisioned is not None and resolved(provisioned) and resolved(most) and provisioned > most:
        return [f"serverless.provisioned_concurrency = {provisioned!r} -- allowed: at most max_concurrency ({most})"]
    return []


def autoscaling_problems(a: VariantAutoscaling, *, component: bool = False) -> list[str]:
    """Problems of a variant's autoscaling beyond its fields' ranges (``component``: the variant serves an
    inference component)."""
    errors: list[str] = []
    if resolved(a.min_capacity) and resolved(a.max_capacity) and a.max_capacity < a.min_capacity:
        errors.append(f"autoscaling.max_capacity = {a.max_capacity!r} -- allowed: >= min_capacity ({a.min_capacity})")
    if component:
        errors.append("autoscaling -- inference-component variants scale copies, not instances; "
                      "autoscaling of inference components is not supported by hyperwarm yet")
    return errors


def guardrail_problems(g: DeploymentGuardrails, endpoint_name: str | None) -> list[str]:
    """Problems of blue/green guardrails beyond their fields' ranges; the 5XX alarms name the endpoint, so they
    need ``endpoint_name``."""
    errors: list[str] = []
    shift = g.traffic
    if shift.type not in contract.TRAFFIC_TYPES:
        errors.append(f"guardrails.traffic.type = {shift.type!r} -- allowed: {', '.join(contract.TRAFFIC_TYPES)}")
    elif resolved(shift.percent) and (problem := contract.shift_percent_problem(shift.type, shift.percent)):
        errors.append(f"guardrails.traffic.percent = {shift.percent!r} -- {problem}")
    if g.alarm_on_5xx_errors and not endpoint_name:
        errors.append("guardrails.alarm_on_5xx_errors = True -- needs an explicit endpoint_name "
                      "(the alarms name the endpoint before it exists)")
    return errors


def image_problems(v: ProductionVariant, image_uri: str) -> tuple[list[str], list[str]]:
    """(errors, warnings): the host AMI's driver must run the CUDA ``image_uri`` was built for."""
    if v.serverless is not None:
        return [], []
    ami = v.inference_ami_version
    problem = None if unresolved(image_uri) else cuda_ami_problem(image_uri, ami)
    if problem:
        return [f"variant {v.name!r}: inference_ami_version = {ami!r} -- {problem}"], []
    if ami is not None and ami not in INFERENCE_AMI_CUDA and resolved(ami):
        return [], [(f"variant {v.name!r}: inference_ami_version {ami!r} is unknown to hyperwarm; its driver is not "
                     "checked against the image")]
    return [], []


def routing_warnings(v: ProductionVariant) -> list[str]:
    """What ``v``'s routing will not do yet (e.g. cache-aware routing while one instance runs)."""
    if v.routing is None:
        return []
    return routing_problems(v.routing, serverless=v.serverless is not None,
                            min_instances=v.min_instances, max_instances=v.max_instances)[1]
