"""Public names of ``hyperwarm.refresh`` (read by type checkers, and by lazy_loader at run time)."""

from .guard import (
    GuardedTarget as GuardedTarget,
)
from .guard import (
    RefreshGuard as RefreshGuard,
)
from .guard import (
    RefreshGuardProps as RefreshGuardProps,
)
from .hook import (
    BlueGreen as BlueGreen,
)
from .hook import (
    CacheRefreshHook as CacheRefreshHook,
)
from .hook import (
    CacheRefreshHookProps as CacheRefreshHookProps,
)
from .hook import (
    EndpointRefreshTarget as EndpointRefreshTarget,
)
from .hook import (
    HyperPodRefreshTarget as HyperPodRefreshTarget,
)
from .hook import (
    RefreshedPrefix as RefreshedPrefix,
)
