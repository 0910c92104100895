"""Typed builders of the HyperPod inference operator's objects (``inference.sagemaker.aws.amazon.com/v1``).

Names are deterministic (``<model>``, ``<model>-weights``, ``img-<group>-<digest>``) so later
changes (a new model version) can address them through the Kubernetes API. The model source
location is ``spec.modelSourceConfig.modelLocation`` and nowhere else.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

from hyperwarm import INSTANCE_GROUP_LABEL, NVME_PATH
from stacks.config.caches import CachedModel
from hyperwarm.serving.settings import MODEL_DIR, SERVING_ANNOTATION, serving_metadata

from .options import CLUSTER_NAME_PLACEHOLDER, options

API_VERSION = "inference.sagemaker.aws.amazon.com/v1"
WEIGHTS_READY_LABEL_PREFIX = "inference.sagemaker.aws.amazon.com/weights-cache-ready."
IMAGE_READY_LABEL_PREFIX = "inference.sagemaker.aws.amazon.com/image-cache-ready."
MODEL_VOLUME = "model-weights"


def metadata(name: str, namespace: str | None, labels: dict[str, str],
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(sorted(labels.items()))}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = annotations
    return meta


def model_source(model: CachedModel, region: str) -> dict[str, Any]:
    """``modelSourceConfig``: the versioned S3 location (the one field a model update changes)."""
    return {
        "modelSourceType": "s3",
        "s3Storage": {"bucketName": model.source.bucket, "region": model.source.region or region},
        "modelLocation": model.source.location,
    }


def group_requirement(group: str) -> dict[str, Any]:
    """Required node affinity: the pods run on ``group``'s nodes (where its caches are)."""
    return {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": INSTANCE_GROUP_LABEL, "operator": "In", "values": [group]}]}]}


def cache_ready_preferences(cache_uids: Sequence[str], weight: int = 100) -> list[dict[str, Any]]:
    """PREFERRED affinity toward nodes whose cache ``uid`` is warm (labels the operator sets).

    Never required: a pod on a cold node falls back to downloading. UIDs exist only once the cache
    objects are created, so synthesized manifests carry none; the operator already prefers the warm
    nodes of a deployment's own cache, and a controller that knows a pre-warm cache's UID adds it here.
    """
    return [{"weight": weight, "preference": {"matchExpressions": [{"key": f"{prefix}{uid}", "operator": "Exists"}]}}
            for uid in cache_uids for prefix in (WEIGHTS_READY_LABEL_PREFIX, IMAGE_READY_LABEL_PREFIX)]


def inference_endpoint_config(model: CachedModel, *, namespace: str, region: str, labels: dict[str, str],
                              cache_uids: Sequence[str] = (),
                              cluster_name: str = CLUSTER_NAME_PLACEHOLDER) -> dict[str, Any]:
    """The serving deployment, with ``spec.modelCacheConfig`` on the instance group's NVMe.

    Placement is by required affinity on the instance group (``nodeAffinity`` excludes
    ``instanceType``), so the operator warms exactly that group's nodes. The worker is told where the
    model is and how many GPUs to shard it over (``environmentVariables``, see :mod:`hyperwarm.serving.settings`).
    ``cluster_name`` (the EKS cluster's) goes into an autoscaling trigger on the exporter's metrics.
    """
    settings = model.server_settings()
    if settings.problems:  # EnvironmentConfig rejects these first; a direct caller gets the same words
        raise ValueError(f"model {model.name!r}: " + "; ".join(str(p) for p in settings.problems))
    requests: dict[str, Any] = {"cpu": model.resources.cpu, "memory": model.resources.memory}
    limits: dict[str, Any] = {"memory": model.resources.memory}
    if model.resources.gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = model.resources.gpus
    affinity: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": group_requirement(
        model.instance_group)}
    if cache_uids:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = cache_ready_preferences(cache_uids)
    worker: dict[str, Any] = {
        "image": model.image,
        "resources": {"requests": requests, "limits": limits},
        "modelInvocationPort": {"containerPort": model.port, "name": "http"},
        "modelVolumeMount": {"name": MODEL_VOLUME, "mountPath": MODEL_DIR},
        "environmentVariables": [{"name": k, "value": v} for k, v in settings.environment.items()],
    }
    if settings.args:
        worker["args"] = list(settings.args)
    spec: dict[str, Any] = {
        "modelName": model.name,
        "modelVersion": model.source.version,
        "modelSourceConfig": model_source(model, region),
        "replicas": model.replicas,
        "nodeAffinity": affinity,
        "worker": worker,
        "modelCacheConfig": {
            "weightsCache": {"enabled": model.weights_cache, "hostPath": NVME_PATH},
            "imageCache": {"enabled": model.operator_image_cache},
        },
    }
    if model.routing:
        spec["intelligentRoutingSpec"] = {"enabled": True, "routingStrategy": model.routing}
    option_spec, option_worker = options(model, cluster_name=cluster_name)
    spec.update(option_spec)
    worker.update(option_worker)
    annotations = {SERVING_ANNOTATION: json.dumps(serving_metadata(settings), sort_keys=True)}
    return {"apiVersion": API_VERSION, "kind": "InferenceEndpointConfig",
            "metadata": metadata(model.name, namespace, labels, annotations), "spec": spec}


def weights_cache_name(model_name: str) -> str:
    """The stand-alone pre-warm cache of a model (the refresh function repoints it by this name)."""
    return f"{model_name}-weights"


def model_weights_cache_config(model: CachedModel, *, namespace: str, region: str,
                               labels: dict[str, str]) -> dict[str, Any]:
    """Stand-alone pre-warm of the weights on every node of the group, before a deployment exists."""
    return {
        "apiVersion": API_VERSION, "kind": "ModelWeightsCacheConfig",
        "metadata": metadata(weights_cache_name(model.name), namespace, labels),
        "spec": {
            "enabled": True,
            "hostPath": NVME_PATH,
            "modelSourceConfig": model_source(model, region),
            "nodeSelector": {INSTANCE_GROUP_LABEL: model.instance_group},
        },
    }


def image_cache_name(group: str, image: str) -> str:
    """``img-<group>-<8 hex of the image>``: one image cache per image and group, shared by its models."""
    return f"img-{group[:40]}-{hashlib.sha256(image.encode()).hexdigest()[:8]}"


def model_image_cache(image: str, group: str, *, namespace: str, labels: dict[str, str],
                      parents: Sequence[str]) -> dict[str, Any]:
    """Stand-alone pre-pull of ``image`` on the group's nodes, shared by the deployments in ``parents``.

    ``spec.parentReferences`` would need the parents' live UIDs, which no manifest knows: the
    deployments served are listed, for people and ``kubectl``, in the ``hyperwarm.io/parents`` annotation.
    """
    spec: dict[str, Any] = {"image": image, "nodeSelector": {INSTANCE_GROUP_LABEL: group}}
    return {
        "apiVersion": API_VERSION, "kind": "ModelImageCache",
        "metadata": metadata(image_cache_name(group, image), namespace, labels,
                             {"hyperwarm.io/parents": ",".join(sorted(parents))}),
        "spec": spec,
    }
