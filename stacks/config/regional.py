"""What an environment's region must offer: its instance types, and the registries its images come from.

Checked on the parsed configuration, so a type the region lacks or an image it cannot pull is one
message naming the ``cdk.json`` field, before aws-cdk-lib's template validation (which would stop
synth with a validation report) or a deploy (where pods would never pull the image).

Instance types per region: cfn-lint's data, gathered by cfn-lint from AWS's pricing API, the same
data its rules E3644 (HyperPod cluster instance groups) and the SageMaker hosting check read.
A region cfn-lint does not list is not checked (a region newer than its data).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Sequence
from pathlib import Path

from hyperwarm.caches import CachedModelSpec

from .endpoints import EndpointConfig

_ECR_ACCOUNT = re.compile(r"^(\d{12})\.dkr\.ecr\.")
_ECR_REGION = re.compile(r"^\d{12}\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/")


@functools.cache
def _offered(kind: str) -> dict[str, frozenset[str]]:
    """Region -> instance types, for ``aws_sagemaker_cluster`` (HyperPod) or ``aws_sagemaker_hosting``.

    Read from cfn-lint's files without importing cfn-lint (``cfnlint/__init__`` loads its rules and sympy:
    about 0.7 s of every synth)."""
    spec = importlib.util.find_spec("cfnlint")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the app checks instance types against cfn-lint's data: install hyperwarm[dev]")
    data = Path(next(iter(spec.submodule_search_locations)), "data", "schemas", "extensions", kind,
                "instancetype_enum.json")
    return {region: frozenset(entry["enum"]) for region, entry in json.loads(data.read_text()).items()
            if isinstance(entry, dict)}


def _type_problem(where: str, instance_type: str, region: str, kind: str, what: str) -> list[str]:
    offered = _offered(kind).get(region)
    if offered is None or instance_type in offered:
        return []
    family = instance_type.split(".")[1] if instance_type.count(".") >= 2 else ""
    alike = sorted(t for t in offered if t.split(".")[1:2] == [family]) or sorted(
        t for t in offered if t.startswith(("ml.g", "ml.p")))
    return [(f"{where}: {instance_type!r} -- not offered for {what} in {region} (AWS's pricing data, as cfn-lint "
             f"ships it); offered there, e.g.: {', '.join(alike[:8]) or 'none of its family'}")]


def image_region_problem(uri: str, region: str) -> str | None:
    """Why a node or an endpoint in ``region`` cannot pull ``uri`` (an ECR image of another region), or None."""
    match = _ECR_REGION.match(uri)
    if not match or match["region"] == region:
        return None
    return (f"an ECR image in {match['region']}, while the environment runs in {region}: a SageMaker model takes "
            f"an image of its own region, and the HyperPod nodes' role pulls only from their region's "
            f"registries; use the {region} URI (the same repository under <account>.dkr.ecr.{region}.amazonaws.com)")


def regional_problems(env: str, region: str, group_types: Sequence[str], models: Sequence[CachedModelSpec],
                      endpoints: Sequence[EndpointConfig]) -> list[str]:
    """Every instance type (of the instance groups, in order) the region does not offer and every image (of the
    cached models and endpoints) it cannot pull, with its field. Given the parts, not the environment's model,
    which imports this module."""
    at = f"environments.{env}"
    problems: list[str] = []
    for i, instance_type in enumerate(group_types):
        problems += _type_problem(f"{at}.instance_groups[{i}].instance_type", instance_type, region,
                                  "aws_sagemaker_cluster", "HyperPod clusters")
    for i, model in enumerate(models):
        images = [*((("image", model.image),) if model.image else ()),
                  *((f"extra_images[{j}].image", extra.image) for j, extra in enumerate(model.extra_images))]
        for field, uri in images:
            problem = image_region_problem(uri, region)
            if problem:
                problems.append(f"{at}.caches.models[{i}].{field}: {uri!r} -- {problem}")
    for i, endpoint in enumerate(endpoints):
        for j, variant in enumerate(endpoint.variants):
            where = f"{at}.endpoints[{i}].variants[{j}]"
            if variant.instance_type:
                problems += _type_problem(f"{where}.instance_type", variant.instance_type, region,
                                          "aws_sagemaker_hosting", "SageMaker endpoints")
            problem = image_region_problem(variant.image.uri, region) if variant.image.uri else None
            if problem:
                problems.append(f"{where}.image.uri: {variant.image.uri!r} -- {problem}")
    return problems


def pull_registry_accounts(models: Sequence[CachedModelSpec], configured: Sequence[str]) -> tuple[str, ...]:
    """Every account beyond AWS's own registries whose ECR images the nodes pull: the configured ones
    (``image_registry_accounts``) and those of the cached models' images."""
    images = [i for m in models for i in (m.image, *(e.image for e in m.extra_images)) if i]
    found = {m.group(1) for m in map(_ECR_ACCOUNT.match, images) if m}
    return tuple(sorted(found | set(configured)))
