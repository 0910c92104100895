"""The app's configuration: the ``context.environments`` of ``cdk.json``, parsed and checked.

The app-level sections (environments, accounts, buckets to create, which stacks) are the app's own
pydantic models; where a section stands for a construct's props, it is parsed into the library's props
dataclasses, or takes each field's type, range and default from them (``typing.Annotated`` metadata), so
the library is the one schema. A bad ``cdk.json`` fails before any construct is built.
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
