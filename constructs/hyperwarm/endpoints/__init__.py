"""SageMaker real-time endpoints whose production variants each route requests their own way."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
