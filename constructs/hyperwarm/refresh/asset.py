"""The refresh functions' code: one asset for the refresh function, the state handler, the reconciler and the
deploy guard.

It holds ``hyperwarm/functions/cache_refresh/``, the shared ``hyperwarm/functions/eks_auth/`` and
``hyperwarm/functions/node_cache/`` (the node cache's layout), and the
distributions pinned in ``lambdas/cache_refresh/requirements.txt`` (the ``refresh`` extra installs them);
handlers are :data:`contract.REFRESH_HANDLER` and its siblings. How it is bundled:
:mod:`hyperwarm._internal.bundling`.
"""

from __future__ import annotations

from hyperwarm._internal.bundling import FunctionPackage
from hyperwarm.functions import cache_refresh, eks_auth, node_cache

FUNCTION = FunctionPackage.of(cache_refresh, "the cache refresh function", shared=(eks_auth, node_cache),
                              extra="refresh")
"""The refresh functions' package; ``FUNCTION.code()`` is their code asset."""
