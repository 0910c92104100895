"""hyperwarm: CDK constructs for warm-starting, cache-aware LLM inference on AWS."""

from .buckets import declare_existing_buckets, model_bucket
from .cache_config import CachedModel, CachesConfig, S3ModelSource
from .capacity import CacheFootprint, GroupUsage, group_usage
from .catalog import CATALOG, InstanceSpec, instance_spec
from .cluster import (
    HEALTH_TAINT_KEY,
    INSTANCE_GROUP_LABEL,
    NVME_PATH,
    HyperPodEksCluster,
    HyperPodEksClusterProps,
    InstanceGroup,
)
from .config import ConfigError, EnvironmentConfig, InstanceGroupConfig, parse_environment, parse_environments
from .client import PREFIX_AWARE_ID_HEADER, canonical_json, invoke_endpoint_args, prefix_aware_id
from .endpoint import (
    Autoscaling,
    DataCapture,
    DeploymentGuardrails,
    InferenceComponentSpec,
    InferenceEndpoint,
    InferenceEndpointProps,
    ModelSpec,
    ProductionVariant,
    Routing,
    ServerlessSpec,
    TrafficShift,
    production_variant_api_shape,
)
from .endpoint_config import EndpointConfig, VariantConfig
from .images import ContainerImage
from .refresh import (
    BlueGreen,
    CacheRefreshHook,
    CacheRefreshHookProps,
    EndpointRefreshTarget,
    HyperPodRefreshTarget,
    RefreshedPrefix,
)
from .refresh_config import RefreshConfig, RefreshedModel

__all__ = [
    "CATALOG", "ConfigError", "EnvironmentConfig", "HEALTH_TAINT_KEY", "HyperPodEksCluster",
    "HyperPodEksClusterProps", "INSTANCE_GROUP_LABEL", "InstanceGroup", "InstanceGroupConfig",
    "InstanceSpec", "NVME_PATH", "instance_spec", "parse_environment", "parse_environments",
    # inference endpoints
    "Autoscaling", "ContainerImage", "DataCapture", "DeploymentGuardrails", "EndpointConfig",
    "InferenceComponentSpec", "InferenceEndpoint", "InferenceEndpointProps", "ModelSpec", "PREFIX_AWARE_ID_HEADER",
    "ProductionVariant", "Routing", "ServerlessSpec", "TrafficShift", "VariantConfig", "canonical_json",
    "invoke_endpoint_args", "prefix_aware_id", "production_variant_api_shape",
    # model caches
    "CacheFootprint", "CachedModel", "CachesConfig", "GroupUsage", "S3ModelSource", "group_usage",
    # cache refresh
    "BlueGreen", "CacheRefreshHook", "CacheRefreshHookProps", "EndpointRefreshTarget", "HyperPodRefreshTarget",
    "RefreshConfig", "RefreshedModel", "RefreshedPrefix",
    # model buckets
    "declare_existing_buckets", "model_bucket",
]
