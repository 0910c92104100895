"""hyperwarm: CDK constructs for warm-starting, cache-aware LLM inference on AWS.

Public names are imported on first use: the pure-Python modules (``catalog``, ``cluster_rules``,
``instance_group``, ``node_capacity``, ``serving``, ``hyperpod_dependencies``) load without aws-cdk, so
the deploy rehearsal can read them.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._node import use_bundled_node

use_bundled_node()  # before anything imports aws_cdk

_EXPORTS: dict[str, tuple[str, ...]] = {
    "addons": ("IInferenceOperator", "InferenceOperator", "grant_mounted_model_read"),
    "alarms": ("AlarmDestination", "AlarmDestinationProps", "SlackChannel", "alarm_topic", "allow_cloudwatch_alarms",
               "declare_existing_alarm_topic", "notify_alarms"),
    "autoscaling": ("CloudWatchTrigger", "HyperPodAutoScaling", "PrometheusTrigger"),
    "buckets": ("declare_existing_buckets", "model_bucket"),
    "cache_exporter": ("CacheMetricsExporter", "CacheMetricsExporterProps"),
    "capacity": ("CacheFootprint", "GroupUsage", "group_usage"),
    "catalog": ("CATALOG", "InstanceSpec", "instance_spec"),
    "cluster": ("HyperPodEksCluster", "HyperPodEksClusterProps", "IHyperPodCluster"),
    "cluster_rules": ("SUPPORTED_KUBERNETES_VERSIONS",),
    "control_plane": ("EksControlPlane", "EksControlPlaneProps"),
    "instance_group": ("HEALTH_TAINT_KEY", "NVME_PATH", "InstanceGroup", "InstanceGroupSpec", "NodeTaint"),
    "network": ("HyperPodNetwork", "HyperPodNetworkProps"),
    "node_capacity": ("INSTANCE_GROUP_LABEL",),
    "nodes": ("HyperPodNodes", "HyperPodNodesProps"),
    "client": ("PREFIX_AWARE_ID_HEADER", "canonical_json", "invoke_endpoint_args", "prefix_aware_id"),
    "endpoint": ("InferenceEndpoint",),
    "endpoint_base": ("IInferenceEndpoint",),
    "endpoint_configuration": ("EndpointConfiguration", "EndpointConfigurationProps", "production_variant_api_shape"),
    "endpoint_metrics": ("EndpointMetricsBridge", "EndpointMetricsBridgeProps"),
    "endpoint_props": (
        "Autoscaling", "DataCapture", "DeploymentGuardrails", "InferenceComponentSpec", "InferenceEndpointProps",
        "ModelSpec", "ProductionVariant", "ServerlessSpec", "TrafficShift",
    ),
    "images": ("ContainerImage", "ContainerImageConfig"),
    "inference_component": ("InferenceComponent", "InferenceComponentProps"),
    "metric_catalog": ("PUBLISHED_METRICS", "PublishedMetric"),
    "model": ("InferenceModel", "InferenceModelProps", "grant_model_data_read"),
    "observability": ("HyperPodModels", "InferenceObservability", "InferenceObservabilityProps"),
    "routing": ("Routing",),
    "refresh": (
        "BlueGreen", "CacheRefreshHook", "CacheRefreshHookProps", "EndpointRefreshTarget",
        "HyperPodRefreshTarget", "RefreshedPrefix",
    ),
    "refresh_guard": ("GuardedTarget", "RefreshGuard", "RefreshGuardProps"),
    "serving": ("MODEL_DIR", "ServerSettings", "Serving", "server_settings"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
