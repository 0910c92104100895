"""The Lambda functions the constructs deploy, installed with them; their source lives in the project's
``lambdas/`` folder, one package per function (``cache_refresh``, ``cache_exporter``, ``endpoint_metrics``, ``hub_token``)
plus the code they share (``eks_auth``, ``metric_publishing``). Each function's asset mirrors this package
(``hyperwarm/functions/<package>/`` and the shared packages it imports), so a handler has the same import
name inside Lambda as here, e.g. ``hyperwarm.functions.cache_refresh.handler.lambda_handler``."""
