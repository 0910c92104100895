"""The Kubernetes objects of cached models, as the operator's CRDs (``crds/``) and Kubernetes spell them.

Names are deterministic (``<model>``, ``<model>-weights``, ``img-<group>-<digest>``, ``prepull-<group>``) so
later changes (a new model version) can address them through the Kubernetes API. The model source location is
``spec.modelSourceConfig.modelLocation`` and nowhere else. :mod:`hyperwarm.caches.chart` renders these through
the types generated from the CRDs.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any

from hyperwarm._internal.acknowledgments import checkov_annotations
from hyperwarm.caches.cold_start import ColdStart
from hyperwarm.caches.props import CachedModelSpec, Probes
from hyperwarm.caches.sources import HuggingFaceModelSource, model_source_config
from hyperwarm.cluster.instance_group import HEALTH_TAINT_KEY, NVME_PATH, NodeTaint
from hyperwarm.cluster.node_capacity import INSTANCE_GROUP_LABEL
from hyperwarm.functions.node_cache import layout
from hyperwarm.serving.settings import (
    MODEL_DIR,
    SERVING_ANNOTATION,
    Placement,
    ServerSettings,
    server_settings,
    serving_metadata,
)

API_VERSION = "inference.sagemaker.aws.amazon.com/v1"
WEIGHTS_READY_LABEL_PREFIX = "inference.sagemaker.aws.amazon.com/weights-cache-ready."
IMAGE_READY_LABEL_PREFIX = "inference.sagemaker.aws.amazon.com/image-cache-ready."
MODEL_VOLUME = layout.MODEL_VOLUME
STARTUP_MARGIN = 1.5
"""The startup probe waits this multiple of the planner's cold start (its bandwidth is an estimate)."""
OPERATOR_DEPLOY_TIMEOUT_S = 3600
"""The CRD's default ``maxDeployTimeInSeconds``."""
PRIORITY_CLASS = "hyperwarm-image-prepull"
PRIORITY_VALUE = 100_000
"""The node agents' priority (image pre-pull, node-cache fill; the class keeps its first name): above ordinary
workloads (0) so they cannot preempt the agents; ``preemptionPolicy: Never`` keeps an agent from ever evicting a
serving pod."""
KEEPALIVE_COMMAND = ("sleep", "infinity")
"""Every pre-pulled image must provide ``sleep`` (the vLLM and LMI DLCs do)."""
_CHECKOV_ACKNOWLEDGED = checkov_annotations({
    "CKV2_K8S_6": "its containers only sleep to keep images on the node; they open no port and make no connection",
    "CKV_K8S_8": "a container that only runs sleep has no health to probe; kubelet restarts it if it exits",
    "CKV_K8S_9": "the pods serve nothing and no Service selects them, so readiness has no meaning here",
    "CKV_K8S_15": "the point is keeping the cached image: Always would re-pull multi-GB images on every restart",
    "CKV_K8S_43": "images are the serving images exactly as configured (tag or digest, latest rejected at synth) "
                  "so the node keeps the very reference the model pods pull",
})


def metadata(name: str, namespace: str | None, labels: dict[str, str],
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(sorted(labels.items()))}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = annotations
    return meta


def hub_token_secret_name(model: CachedModelSpec) -> str | None:
    """The Kubernetes Secret holding a Hugging Face source's token (None: a public repository)."""
    source = model.source
    return f"{model.name}-hub-token" if isinstance(source, HuggingFaceModelSource) and source.token_secret else None


def model_source(model: CachedModelSpec, region: str) -> dict[str, Any]:
    """``modelSourceConfig``: where the version is (the field a model update changes)."""
    return model_source_config(model.source, region, hub_token_secret_name(model))


def group_requirement(groups: str | Sequence[str]) -> dict[str, Any]:
    """Required node affinity: the pods run on the nodes of ``groups`` (where their caches are)."""
    values = [groups] if isinstance(groups, str) else list(groups)
    return {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": INSTANCE_GROUP_LABEL, "operator": "In", "values": values}]}]}


def group_preferences(groups: Sequence[str]) -> list[dict[str, Any]]:
    """PREFERRED affinity by the groups' order: the scheduler puts a pod on the first group with room (weights
    100, 50, 25, ...). The operator's own ordered ``instanceTypes`` cannot serve here: its CRD makes it exclusive of
    ``nodeAffinity``, which keeps the pods on the groups that hold their caches (another group of the same type
    holds none)."""
    if len(groups) < 2:
        return []
    return [{"weight": max(1, 100 >> i), "preference": {"matchExpressions": [
        {"key": INSTANCE_GROUP_LABEL, "operator": "In", "values": [group]}]}} for i, group in enumerate(groups)]


def cache_ready_preferences(cache_uids: Sequence[str], weight: int = 100) -> list[dict[str, Any]]:
    """PREFERRED affinity toward nodes whose cache ``uid`` is warm (labels the operator sets).

    Never required: a pod on a cold node falls back to downloading. UIDs exist only once the cache
    objects are created, so synthesized manifests carry none; the operator already prefers the warm
    nodes of a deployment's own cache, and a controller that knows a pre-warm cache's UID adds it here.
    """
    return [{"weight": weight, "preference": {"matchExpressions": [{"key": f"{prefix}{uid}", "operator": "Exists"}]}}
            for uid in cache_uids for prefix in (WEIGHTS_READY_LABEL_PREFIX, IMAGE_READY_LABEL_PREFIX)]


_AWS_FIGURES = ColdStart()


def startup_budget_s(model: CachedModelSpec, cold_start: ColdStart = _AWS_FIGURES) -> int:
    """How long a pod may take to first answer: the planner's cold start times the margin."""
    return math.ceil(cold_start.cold_s(model) * STARTUP_MARGIN)


def probes(model: CachedModelSpec, p: Probes, cold_start: ColdStart = _AWS_FIGURES) -> dict[str, Any]:
    """``worker.probes``: a startup probe sized for a cold node, then liveness (and readiness)."""
    period_s = p.period.to_seconds()

    def http(failures: int) -> dict[str, Any]:
        return {"httpGet": {"path": p.path, "port": model.port}, "periodSeconds": period_s,
                "timeoutSeconds": p.timeout.to_seconds(), "failureThreshold": failures}

    result = {"startupProbe": http(math.ceil(startup_budget_s(model, cold_start) / period_s)),
              "livenessProbe": http(p.liveness_failures)}
    if p.readiness:
        result["readinessProbe"] = http(p.readiness_failures)
    return result


def _serving_options(model: CachedModelSpec) -> dict[str, Any]:
    """``spec`` fields of the model's metrics, KV cache, load balancer and TLS options (all opt-in)."""
    spec: dict[str, Any] = {}
    if model.metrics:
        m = model.metrics
        spec["metrics"] = {"enabled": m.enabled, "metricsScrapeIntervalSeconds": m.scrape_interval.to_seconds(),
                           "modelMetrics": {"path": m.path, "port": m.port or model.port}}
    if model.kv_cache:
        kv = model.kv_cache
        spec["kvCacheSpec"] = {"enableL1Cache": kv.l1, "enableL2Cache": kv.l2 is not None}
        if kv.l2:
            spec["kvCacheSpec"]["l2CacheSpec"] = {"l2CacheBackend": kv.l2, **(
                {"l2CacheLocalUrl": kv.l2_url} if kv.l2_url else {})}
    if model.load_balancer:
        lb = model.load_balancer
        spec["loadBalancer"] = {"healthCheckPath": lb.health_check_path,
                                "idleTimeoutSeconds": lb.idle_timeout.to_seconds(),
                                "routingAlgorithm": lb.routing_algorithm}
    if model.tls:
        tls: dict[str, Any] = {}
        if model.tls.certificate_arn:
            tls["customCertificateConfig"] = {"acmArn": model.tls.certificate_arn,
                                              "domainName": model.tls.domain_name}
        if model.tls.certificate_output_s3_uri:
            tls["tlsCertificateOutputS3Uri"] = model.tls.certificate_output_s3_uri
        spec["tlsConfig"] = tls
    return spec


def options(model: CachedModelSpec, *, cluster_name: str,
            cold_start: ColdStart = _AWS_FIGURES) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec fields, worker fields) of the model's scaling and serving options; none without options. The startup
    budget is ``cold_start``'s (the FSx readers of the cluster)."""
    spec: dict[str, Any] = {}
    worker: dict[str, Any] = {}
    if model.autoscaling:
        spec["autoScalingSpec"] = model.autoscaling.for_model(cluster_name=cluster_name, model=model.name).to_crd()
    if model.probes:
        worker["probes"] = probes(model, model.probes, cold_start)
        # The operator gives up a deployment after maxDeployTimeInSeconds: never before a cold start.
        spec["maxDeployTimeInSeconds"] = max(OPERATOR_DEPLOY_TIMEOUT_S, startup_budget_s(model, cold_start))
    spec.update(_serving_options(model))
    if model.request_limits:
        r = model.request_limits
        worker["requestLimits"] = {"maxConcurrentRequests": r.max_concurrent_requests,
                                   "maxQueueSize": r.max_queue_size, "overflowStatusCode": r.overflow_status_code}
    return spec, worker


def _worker(model: CachedModelSpec) -> dict[str, Any]:
    settings = model_server_settings(model)
    requests: dict[str, Any] = {"cpu": model.resources.cpu, "memory": model.resources.memory}
    limits: dict[str, Any] = {"memory": model.resources.memory}
    if model.resources.gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = model.resources.gpus
    worker: dict[str, Any] = {
        "image": model.image,
        "resources": {"requests": requests, "limits": limits},
        "modelInvocationPort": {"containerPort": model.port, "name": "http"},
        "modelVolumeMount": {"name": MODEL_VOLUME, "mountPath": MODEL_DIR},
        "environmentVariables": [{"name": k, "value": v} for k, v in settings.environment.items()],
    }
    if settings.args:
        worker["args"] = list(settings.args)
    return worker


def model_server_settings(model: CachedModelSpec) -> ServerSettings:
    """The worker's environment and arguments: the model at its volume mount, tensor parallelism = its GPUs."""
    gpus = model.resources.gpus
    placement = Placement("hyperpod", gpus, f"resources.gpus is {gpus}", model_dir=MODEL_DIR, port=model.port)
    image = str(model.image)  # every source but JumpStart has one (CachedModelSpec); a JumpStartModel has no worker
    return server_settings(model.serving, placement, image=image, image_uri=image)


def inference_endpoint_config(model: CachedModelSpec, *, namespace: str, region: str, labels: dict[str, str],
                              cluster_name: str, cache_uids: Sequence[str] = (),
                              cold_start: ColdStart = _AWS_FIGURES) -> dict[str, Any]:
    """The serving deployment on the instance group's nodes, reading its weights where ``weights_cache`` says.

    Placement is by required affinity on the instance group (``nodeAffinity`` excludes ``instanceType``). A
    node-cached model also requires the node's ready label of its version and reads the version's directory (a
    hostPath volume); otherwise the operator reads S3, through its weights cache when it is on. The worker is told
    where the model is and how many GPUs to shard it over (:mod:`hyperwarm.serving.settings`). ``cluster_name``
    (the EKS cluster's) goes into an exporter trigger; ``cold_start`` sizes the startup probe.
    """
    settings = model_server_settings(model)
    if settings.problems:
        raise ValueError(f"model {model.name!r}: " + "; ".join(str(p) for p in settings.problems))
    requirement = group_requirement(model.instance_groups)
    spec: dict[str, Any] = {"modelName": model.name, "modelVersion": model.source.version}
    if model.weights_cache == "node":
        requirement["nodeSelectorTerms"][0]["matchExpressions"].append(
            layout.ready_requirement(model.name, model.source.version))
        spec["modelSourceConfig"] = {"modelSourceType": "kubernetesVolume"}
        spec["kubernetes"] = {"volumes": [layout.volume(layout.version_dir(NVME_PATH, model.name,
                                                                            model.source.version))]}
    else:
        spec["modelSourceConfig"] = model_source(model, region)
    affinity: dict[str, Any] = {"requiredDuringSchedulingIgnoredDuringExecution": requirement}
    preferences = [*group_preferences(model.instance_groups), *cache_ready_preferences(cache_uids)]
    if preferences:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferences
    worker = _worker(model)
    spec.update({
        "replicas": model.replicas,
        "nodeAffinity": affinity,
        "worker": worker,
        "modelCacheConfig": {
            "weightsCache": {"enabled": model.weights_cache == "operator", "hostPath": NVME_PATH},
            "imageCache": {"enabled": model.operator_image_cache},
        },
    })
    if model.routing:
        spec["intelligentRoutingSpec"] = {"enabled": True, "routingStrategy": model.routing}
    option_spec, option_worker = options(model, cluster_name=cluster_name, cold_start=cold_start)
    spec.update(option_spec)
    worker.update(option_worker)
    annotations = {SERVING_ANNOTATION: json.dumps(serving_metadata(settings), sort_keys=True)}
    return {"apiVersion": API_VERSION, "kind": "InferenceEndpointConfig",
            "metadata": metadata(model.name, namespace, labels, annotations), "spec": spec}


def priority_class(labels: dict[str, str]) -> dict[str, Any]:
    """The node agents' PriorityClass: hard to preempt, never preempting."""
    return {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": metadata(PRIORITY_CLASS, None, labels),
        "value": PRIORITY_VALUE,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "hyperwarm node agents (image pre-pull, node-cache fill): never preempt others, hard to preempt",
    }


def daemonset_name(group: str) -> str:
    return f"prepull-{group[:50]}"


def node_agent_tolerations(group_taints: Sequence[NodeTaint]) -> list[dict[str, str]]:
    """A node agent (pre-pull, node-cache fill) runs through HyperPod's health checks and the group's taints, so
    a new node holds its images and weights by the time it turns schedulable."""
    return [{"key": HEALTH_TAINT_KEY, "operator": "Equal", "value": "Unschedulable", "effect": "NoSchedule"},
            *({"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect} for t in group_taints)]


def _keepalive_container(image: str) -> dict[str, Any]:
    return {
        "name": f"keep-{hashlib.sha256(image.encode()).hexdigest()[:10]}",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(KEEPALIVE_COMMAND),
        "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"cpu": "10m", "memory": "32Mi"}},
        "securityContext": {
            "runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def prepull_daemonset(group: str, images: Sequence[str], *, namespace: str, labels: dict[str, str],
                      group_taints: Sequence[NodeTaint] = ()) -> dict[str, Any]:
    """One DaemonSet per instance group keeping ``images`` on each of its nodes (images the operator's image
    cache does not cover: sidecars, init images). Each image runs as a container that only sleeps: a running
    container keeps its image in use, so kubelet's image garbage collection cannot evict it. Tiny requests, no
    service account token, non-root, read-only root file system; tolerates the HyperPod health-check taint so
    the image is in place when the node turns schedulable."""
    name = daemonset_name(group)
    selector = {"app.kubernetes.io/name": "hyperwarm-prepull", "app.kubernetes.io/instance": name}
    tolerations = node_agent_tolerations(group_taints)
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": metadata(name, namespace, labels, _CHECKOV_ACKNOWLEDGED),
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {**labels, **selector}},
                "spec": {
                    "priorityClassName": PRIORITY_CLASS,
                    "affinity": {"nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": group_requirement(group)}},
                    "tolerations": tolerations,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 5,
                    "containers": [_keepalive_container(image) for image in sorted(set(images))],
                },
            },
        },
    }
