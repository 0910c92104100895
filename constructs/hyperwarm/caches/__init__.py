"""Models cached on a HyperPod cluster's NVMe: weights and image caches, pre-warm, pre-pull, autoscaling, capacity."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
