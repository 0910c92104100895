"""Public names of ``hyperwarm.refresh`` (read by type checkers, and by lazy_loader at run time)."""

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
    HyperPodRefreshTarget as HyperPodRefreshTarget,
    RefreshedPrefix as RefreshedPrefix,
)
from .publishing import PublisherSigning as PublisherSigning
from .rollout import default_staging_timeout as default_staging_timeout
