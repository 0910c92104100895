"""hyperwarm: CDK constructs for warm-starting, cache-aware LLM inference on AWS."""

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

__all__ = [
    "CATALOG", "ConfigError", "EnvironmentConfig", "HEALTH_TAINT_KEY", "HyperPodEksCluster",
    "HyperPodEksClusterProps", "INSTANCE_GROUP_LABEL", "InstanceGroup", "InstanceGroupConfig",
    "InstanceSpec", "NVME_PATH", "instance_spec", "parse_environment", "parse_environments",
]
