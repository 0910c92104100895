"""Event-driven refresh: a complete new model version in S3 moves caches and endpoints to it."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
