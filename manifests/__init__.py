"""cdk8s charts of hyperwarm's in-cluster objects: model weights and image caches per environment."""

from .chart import CachesChart, build_chart, cache_objects, write_manifests
from .inference import (
    cache_ready_preferences,
    image_cache_name,
    inference_endpoint_config,
    model_image_cache,
    model_weights_cache_config,
)
from .prepull import PRIORITY_CLASS, daemonset_name, prepull_daemonset, priority_class

__all__ = [
    "CachesChart", "PRIORITY_CLASS", "build_chart", "cache_objects", "cache_ready_preferences",
    "daemonset_name", "image_cache_name", "inference_endpoint_config", "model_image_cache",
    "model_weights_cache_config", "prepull_daemonset", "priority_class",
    "write_manifests",
]
