"""The refresh functions' code: one asset for the refresh function, the state handler, the reconciler and the
deploy guard.

It holds ``hyperwarm/functions/cache_refresh/``, the shared ``hyperwarm/functions/eks_auth/``, ``cfn_response`` (the
deploy guard's answer to CloudFormation), ``metric_publishing`` (the deploy guard's count in the embedded metric
format) and ``hyperwarm/functions/node_cache/`` (the node cache's layout), and the
wheels locked in ``lambdas/cache_refresh/requirements.txt`` (shipped inside hyperwarm);
handlers are :data:`contract.REFRESH_HANDLER` and its siblings. How it is bundled:
:mod:`hyperwarm._internal.bundling`.
"""

from __future__ import annotations

from hyperwarm._internal.bundling import FunctionPackage

FUNCTION = FunctionPackage.of("cache_refresh", "the cache refresh function",
                              shared=("cfn_response", "eks_auth", "metric_publishing", "node_cache"), locked=True)
"""The refresh functions' package; ``FUNCTION.code()`` is their code asset."""
