"""``InferenceEndpointConfig`` fields of a cached model's scaling and serving options (all opt-in).

Each function maps one option of :mod:`stacks.config.deployment_options` onto the operator's CRD
field; a model without the option gets no field (the operator's default applies).
"""

from __future__ import annotations

import math
from typing import Any

from stacks.config.caches import CachedModel
from stacks.config.deployment_options import AutoScaling, Probes
from stacks.plan import ColdStart

STARTUP_MARGIN = 1.5
"""The startup probe waits this multiple of the planner's cold start (its bandwidth is an estimate)."""
OPERATOR_DEPLOY_TIMEOUT_S = 3600
"""The CRD's default ``maxDeployTimeInSeconds``."""


CLUSTER_NAME_PLACEHOLDER = "${HYPERWARM_EKS_CLUSTER_NAME}"
"""What an exporter trigger's ``ClusterName`` reads in ``dist/manifests`` (the stack puts the cluster's name)."""


def autoscaling_spec(scaling: AutoScaling, *, model: str,
                     cluster_name: str = CLUSTER_NAME_PLACEHOLDER) -> dict[str, Any]:
    """``autoScalingSpec``: KEDA's replica range, timings and the one trigger (:mod:`hyperwarm.caches.autoscaling`)."""
    return scaling.to_spec(model=model, cluster_name=cluster_name).to_crd()


def startup_budget_s(model: CachedModel, cold_start: ColdStart = ColdStart()) -> int:
    """How long a pod may take to first answer: the planner's cold start times the margin."""
    return math.ceil(cold_start.cold_s(model) * STARTUP_MARGIN)


def probes(model: CachedModel, p: Probes) -> dict[str, Any]:
    """``worker.probes``: a startup probe sized for a cold node, then liveness (and readiness)."""

    def http(failures: int) -> dict[str, Any]:
        return {"httpGet": {"path": p.path, "port": model.port}, "periodSeconds": p.period_s,
                "timeoutSeconds": p.timeout_s, "failureThreshold": failures}

    result = {"startupProbe": http(math.ceil(startup_budget_s(model) / p.period_s)),
              "livenessProbe": http(p.liveness_failures)}
    if p.readiness:
        result["readinessProbe"] = http(p.readiness_failures)
    return result


def options(model: CachedModel, *, cluster_name: str = CLUSTER_NAME_PLACEHOLDER
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec fields, worker fields) of the model's options."""
    spec: dict[str, Any] = {}
    worker: dict[str, Any] = {}
    if model.autoscaling:
        spec["autoScalingSpec"] = autoscaling_spec(model.autoscaling, cluster_name=cluster_name, model=model.name)
    if model.probes:
        worker["probes"] = probes(model, model.probes)
        # The operator gives up a deployment after maxDeployTimeInSeconds: never before a cold start.
        spec["maxDeployTimeInSeconds"] = max(OPERATOR_DEPLOY_TIMEOUT_S, startup_budget_s(model))
    if model.metrics:
        m = model.metrics
        spec["metrics"] = {"enabled": m.enabled, "metricsScrapeIntervalSeconds": m.scrape_interval_s,
                           "modelMetrics": {"path": m.path, "port": m.port or model.port}}
    if model.kv_cache:
        kv = model.kv_cache
        spec["kvCacheSpec"] = {"enableL1Cache": kv.l1, "enableL2Cache": kv.l2 is not None}
        if kv.l2:
            spec["kvCacheSpec"]["l2CacheSpec"] = {"l2CacheBackend": kv.l2, **(
                {"l2CacheLocalUrl": kv.l2_url} if kv.l2_url else {})}
    if model.load_balancer:
        lb = model.load_balancer
        spec["loadBalancer"] = {"healthCheckPath": lb.health_check_path, "idleTimeoutSeconds": lb.idle_timeout_s,
                                "routingAlgorithm": lb.routing_algorithm}
    if model.tls:
        tls: dict[str, Any] = {}
        if model.tls.certificate_arn:
            tls["customCertificateConfig"] = {"acmArn": model.tls.certificate_arn,
                                              "domainName": model.tls.domain_name}
        if model.tls.certificate_output_s3_uri:
            tls["tlsCertificateOutputS3Uri"] = model.tls.certificate_output_s3_uri
        spec["tlsConfig"] = tls
    if model.request_limits:
        r = model.request_limits
        worker["requestLimits"] = {"maxConcurrentRequests": r.max_concurrent_requests,
                                   "maxQueueSize": r.max_queue_size, "overflowStatusCode": r.overflow_status_code}
    return spec, worker
