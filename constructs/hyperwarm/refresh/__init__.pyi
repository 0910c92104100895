"""Public names of ``hyperwarm.refresh`` (read by type checkers, and by lazy_loader at run time)."""

from .concurrency import (
    ReservedConcurrency as ReservedConcurrency,
)
from .guard import (
    GuardedTarget as GuardedTarget,
    RefreshGuard as RefreshGuard,
    RefreshGuardProps as RefreshGuardProps,
)
from .hook import (
    BlueGreen as BlueGreen,
    CacheRefreshHook as CacheRefreshHook,
    CacheRefreshHookProps as CacheRefreshHookProps,
    EndpointRefreshTarget as EndpointRefreshTarget,
    RefreshedPrefix as RefreshedPrefix,
)
from .publishing import PublisherSigning as PublisherSigning
from .targets import (
    HyperPodRefreshTarget as HyperPodRefreshTarget,
    default_staging_timeout as default_staging_timeout,
    refresh_source_problem as refresh_source_problem,
)
from .timeouts import (
    RolloutTimeout as RolloutTimeout,
)
from .version_rules import (
    MaxStep as MaxStep,
    VersionPattern as VersionPattern,
)
