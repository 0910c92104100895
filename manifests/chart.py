"""One cdk8s chart per environment with every cache object of its ``caches`` section.

The same rendered objects go to the cluster (``stacks.caches_stack``) and to
``dist/manifests/<env>/`` for review and GitOps users.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import cdk8s
import yaml
from constructs import Construct

from stacks.config import EnvironmentConfig

from .inference import inference_endpoint_config, model_image_cache, model_weights_cache_config
from .options import CLUSTER_NAME_PLACEHOLDER
from .prepull import prepull_daemonset, priority_class


def _labels(env_name: str, model: str | None = None) -> dict[str, str]:
    labels = {"app.kubernetes.io/managed-by": "hyperwarm", "hyperwarm.io/environment": env_name}
    if model:
        labels["hyperwarm.io/model"] = model
    return labels


def cache_objects(env_name: str, config: EnvironmentConfig,
                  cluster_name: str = CLUSTER_NAME_PLACEHOLDER) -> list[dict[str, Any]]:
    """Every Kubernetes object of the environment's caches, in apply order; empty without models.

    ``cluster_name`` is the EKS cluster's name (a token in the stack); ``dist/manifests`` keep
    :data:`~manifests.options.CLUSTER_NAME_PLACEHOLDER` for a GitOps user to fill in.
    """
    caches = config.caches
    if not caches.models:
        return []
    ns = caches.namespace
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": _labels(env_name)}}]

    daemonset_images: dict[str, set[str]] = defaultdict(set)
    image_parents: dict[tuple[str, str], list[str]] = defaultdict(list)
    for model in caches.models:
        daemonset_images[model.instance_group].update(model.daemonset_images)
        if model.prewarm and model.operator_image_cache:
            image_parents[(model.instance_group, model.image)].append(model.name)
    if any(daemonset_images.values()):
        objects.append(priority_class(_labels(env_name)))

    for model in caches.models:
        labels = _labels(env_name, model.name)
        if model.prewarm and model.weights_cache:
            objects.append(model_weights_cache_config(model, namespace=ns, region=config.region, labels=labels))
    for (group, image), parents in sorted(image_parents.items()):
        objects.append(model_image_cache(image, group, namespace=ns, labels=_labels(env_name), parents=parents))
    for group, images in sorted(daemonset_images.items()):
        if images:
            objects.append(prepull_daemonset(group, sorted(images), namespace=ns, labels=_labels(env_name),
                                             group_taints=config.instance_group(group).taints))
    for model in caches.models:
        objects.append(inference_endpoint_config(model, namespace=ns, region=config.region,
                                                 labels=_labels(env_name, model.name), cluster_name=cluster_name))
    return objects


class CachesChart(cdk8s.Chart):
    """The cache objects of one environment as a cdk8s chart (names are kept as given)."""

    def __init__(self, scope: Construct, id: str, *, env_name: str, config: EnvironmentConfig,
                 cluster_name: str = CLUSTER_NAME_PLACEHOLDER) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True)
        for obj in cache_objects(env_name, config, cluster_name):
            name = obj["metadata"]["name"]
            api_object = cdk8s.ApiObject(self, f"{obj['kind']}-{name}", api_version=obj["apiVersion"],
                                         kind=obj["kind"], metadata=obj["metadata"])
            for key, value in obj.items():
                if key not in ("apiVersion", "kind", "metadata"):
                    api_object.add_json_patch(cdk8s.JsonPatch.add(f"/{key}", value))


def build_chart(env_name: str, config: EnvironmentConfig,
                cluster_name: str = CLUSTER_NAME_PLACEHOLDER) -> CachesChart:
    """The environment's chart under its own ``cdk8s.App`` (never inside the CDK app's tree)."""
    return CachesChart(cdk8s.App(), f"hyperwarm-{env_name}-caches", env_name=env_name, config=config,
                       cluster_name=cluster_name)


def write_manifests(env_name: str, config: EnvironmentConfig, root: Path) -> list[Path]:
    """Write one YAML file per object to ``root/<env>/`` (stale files removed); none without caches."""
    directory = root / env_name
    for stale in directory.glob("*.yaml"):
        stale.unlink()
    objects = build_chart(env_name, config).to_json()
    if not objects:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, obj in enumerate(objects):
        path = directory / f"{index:02d}-{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(obj, sort_keys=False))
        paths.append(path)
    return paths
