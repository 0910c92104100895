"""The app's configuration: the ``context.environments`` of ``cdk.json``, parsed and checked.

These pydantic models are the app's, not the construct library's: the stacks turn them into the
constructs' props. Parsing imports no aws-cdk, so a bad ``cdk.json`` fails fast, before synth.
"""

from .caches import CachedModel, CachesConfig, S3ModelSource
from .endpoints import EndpointConfig, VariantConfig
from .environment import (
                          ConfigError,
                          EnvironmentConfig,
                          InstanceGroupConfig,
                          load_context,
                          parse_environment,
                          parse_environments,
)
from .refresh import RefreshConfig, RefreshedModel
from .serving import ServingConfig

__all__ = [
    "CachedModel", "CachesConfig", "ConfigError", "EndpointConfig", "EnvironmentConfig", "InstanceGroupConfig",
    "RefreshConfig", "RefreshedModel", "S3ModelSource", "ServingConfig", "VariantConfig", "load_context",
    "parse_environment", "parse_environments",
]
