"""Models cached on a HyperPod cluster's NVMe: weights and image caches, pre-warm, pre-pull, autoscaling, capacity."""

import lazy_loader

from hyperwarm._internal.deprecation import with_renamed

_lazy_getattr, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
__getattr__ = with_renamed(__name__, _lazy_getattr)  # names renamed in 0.2.0 still work, with a warning
