"""Models cached on a HyperPod cluster's NVMe: weights and image caches, pre-warm, pre-pull, autoscaling, capacity."""

from hyperwarm._internal.deprecation import attach_renamed

__getattr__, __dir__, __all__ = attach_renamed(__name__, __file__)  # names renamed in 0.2.0 work, with a warning
