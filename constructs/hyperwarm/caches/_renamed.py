"""The names ``hyperwarm.caches`` had before 0.2.0 (``_renamed.pyi`` types them as deprecated). The package answers
them itself, with a warning; this module only lets lazy_loader's eager import (``EAGER_IMPORT``) resolve them."""

from .autoscaling import HyperPodAutoscaling as HyperPodAutoScaling
from .props import CachedModelSpec as CachedModelProps

__all__ = ["CachedModelProps", "HyperPodAutoScaling"]
