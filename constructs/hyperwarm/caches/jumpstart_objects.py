"""A JumpStart-sourced cached model as the operator's ``JumpStartModel`` object (:mod:`hyperwarm.caches.jumpstart`
says what maps, what is refused and why)."""

from __future__ import annotations

from typing import Any

from hyperwarm.caches.objects import API_VERSION, OPERATOR_DEPLOY_TIMEOUT_S, metadata, options, startup_budget_s
from hyperwarm.caches.props import CachedModelSpec
from hyperwarm.caches.sources import JumpStartModelSource
from hyperwarm.cluster.instance_group import NVME_PATH

KIND = "JumpStartModel"


def jumpstart_model(model: CachedModelSpec, *, namespace: str, labels: dict[str, str], instance_type: str,
                    cluster_name: str, gated_role_arn: str | None = None) -> dict[str, Any]:
    """The ``JumpStartModel`` of ``model`` on ``instance_type`` (its group's); the refresh moves it by patching
    ``spec.model.modelVersion`` (``targets/hyperpod.py``), where the version is and nowhere else."""
    source = model.source
    if not isinstance(source, JumpStartModelSource):
        raise TypeError(f"model {model.name!r}: a {source.kind} source is an InferenceEndpointConfig")
    spec_model: dict[str, Any] = {"modelHubName": source.hub_name, "modelId": source.model_id,
                                  "modelVersion": source.model_version, "acceptEula": source.accept_eula}
    if source.gated and gated_role_arn is not None:
        spec_model["gatedModelDownloadRole"] = gated_role_arn
    spec: dict[str, Any] = {
        "model": spec_model,
        "server": {"instanceType": instance_type},
        "replicas": model.replicas,
        "modelCacheConfig": {
            "weightsCache": {"enabled": model.weights_cache == "operator", "hostPath": NVME_PATH},
            "imageCache": {"enabled": model.operator_image_cache},
        },
        # The operator gives up a deployment after maxDeployTimeInSeconds: never before a cold start.
        "maxDeployTimeInSeconds": max(OPERATOR_DEPLOY_TIMEOUT_S, startup_budget_s(model)),
    }
    if model.serving.environment:
        spec["environmentVariables"] = [{"name": k, "value": v} for k, v in model.serving.environment.items()]
    if model.routing:
        spec["intelligentRoutingSpec"] = {"enabled": True, "routingStrategy": model.routing}
    option_spec, worker = options(model, cluster_name=cluster_name)
    assert not worker, worker  # probes and request limits are refused by jumpstart_problems
    spec.update(option_spec)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata(model.name, namespace, labels),
            "spec": spec}
