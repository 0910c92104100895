"""Public names of ``hyperwarm.caches`` (read by type checkers, and by lazy_loader at run time)."""

from .autoscaling import (
    CloudWatchTrigger as CloudWatchTrigger,
    HyperPodAutoScaling as HyperPodAutoScaling,
    PrometheusTrigger as PrometheusTrigger,
)
from .capacity import (
    CacheFootprint as CacheFootprint,
    GroupUsage as GroupUsage,
    group_usage as group_usage,
)
