"""The Lambda functions the constructs deploy, installed with them; their source lives in the project's
``lambdas/`` folder. Each function's asset mirrors this package (``hyperwarm/functions/<package>/`` and the
shared ``eks_auth``), so a handler has the same import name inside Lambda as here, e.g.
``hyperwarm.functions.cache_refresh.handler.lambda_handler``."""
