"""The Lambda functions the constructs deploy, installed with them; their source lives in the project's
``lambdas/`` folder. Each is bundled as a top-level package of its own (the asset's root holds
``cache_refresh/``), so its handlers are ``cache_refresh.<module>.<function>`` inside Lambda."""
